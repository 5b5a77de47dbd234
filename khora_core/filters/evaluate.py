"""The in-memory evaluator, and THE definition of recall-filter type semantics.

Every backend compiler (``sql_postgres.py``, ``sql_sqlite.py``, ``cypher.py``) must select
exactly the chunks this module selects; the property tests in ``tests/unit/filters`` and
``tests/storage/test_filter_equivalence.py`` check that. ``docs/filters.md`` repeats these
rules for users.

Values
    A stored value is *missing* (a system key that is ``None``/absent, a metadata path
    that does not resolve), JSON ``null``, a boolean, a number, a string, an array, an
    object, or a *date* (a system date key's datetime). A metadata path walks objects
    only: ``metadata.a.b`` is missing when ``a`` is not an object (array elements are not
    addressable). A metadata string is *also* a date when it is ISO-8601 in the grammar
    of ``dates.py`` (``YYYY-MM-DD`` or a date-time with seconds and ``Z``/``+HH:MM``).

Equality (``$eq``, shorthand, ``$in`` members) is typed
    * ``null`` matches a missing value or JSON ``null``;
    * a number equals only a number (``1 == 1.0``); a boolean is not a number;
      a string equals only the identical string;
    * an array equals an array of the same length with equal elements in the same order;
      an object equals an object with the same keys and equal values (JSON equality; the
      whole-blob ``{"metadata": {...}}`` uses it);
    * a date operand equals a date column holding the same instant, or a metadata ISO
      date string denoting the same instant (to the microsecond);
    * on a system key, a list operand never matches (the column holds a scalar).

Ranges (``$gt $gte $lt $lte``)
    A number operand compares with stored numbers, a string operand with stored strings
    (by Unicode code point), a date operand with date columns and metadata ISO date
    strings. Any other stored value (missing, null, another type) does not match.

Negations
    ``$ne`` is ``not $eq``, ``$nin`` is ``not $in``, ``$exists: false`` is
    ``not $exists: true``, and ``$not``/``$nor`` negate whole conditions. So a missing
    value matches ``$ne``, ``$nin``, ``$exists: false``, ``null`` and any ``$not`` of a
    condition it fails, and nothing else.

``$exists: true``
    The value is not missing (a metadata field holding JSON ``null`` exists; a system
    string key exists when it is not ``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from khora_core.filters.dates import datetime_to_us, iso_to_us
from khora_core.filters.tree import And, DateValue, Leaf, Node, Nor, Not, Or, metadata_path

__all__ = ["MISSING", "evaluate", "json_equal", "resolve"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: A value that is not there (distinct from JSON null).
MISSING: Any = _Missing()


def evaluate(node: Node, record: Mapping[str, Any]) -> bool:
    """Whether ``record`` (``Chunk.filter_record()``) satisfies ``node``."""
    if isinstance(node, Leaf):
        return _leaf(node, record)
    if isinstance(node, Not):
        return not evaluate(node.child, record)
    if isinstance(node, And):
        return all(evaluate(c, record) for c in node.children)
    if isinstance(node, Or):
        return any(evaluate(c, record) for c in node.children)
    if isinstance(node, Nor):
        return not any(evaluate(c, record) for c in node.children)
    raise TypeError(f"not a filter node: {node!r}")


def resolve(key: str, record: Mapping[str, Any]) -> Any:
    """The stored value for ``key``, or ``MISSING``.

    System dates come back as ``DateValue``; datetimes found inside metadata are read as
    their ISO text, which is how metadata stores them.
    """
    if key == "metadata" or key.startswith("metadata."):
        value: Any = record.get("metadata", MISSING)
        for segment in metadata_path(key):
            if not isinstance(value, Mapping) or segment not in value:
                return MISSING
            value = value[segment]
        return _normalise(value)
    value = record.get(key)
    if value is None:
        return MISSING
    if isinstance(value, datetime):
        return DateValue(datetime_to_us(value))
    return value


def _normalise(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _as_date_us(stored: Any) -> int | None:
    if isinstance(stored, DateValue):
        return stored.us
    return iso_to_us(stored)


def json_equal(stored: Any, literal: Any) -> bool:
    """Typed JSON equality (see the module docstring); ``stored`` is never MISSING here."""
    stored = _normalise(stored)
    if literal is None:
        return stored is None
    if isinstance(literal, bool):
        return isinstance(stored, bool) and stored == literal
    if isinstance(literal, (int, float)):
        return isinstance(stored, (int, float)) and not isinstance(stored, bool) and stored == literal
    if isinstance(literal, str):
        return isinstance(stored, str) and stored == literal
    if isinstance(literal, list):
        return (
            isinstance(stored, (list, tuple))
            and len(stored) == len(literal)
            and all(json_equal(s, v) for s, v in zip(stored, literal, strict=True))
        )
    if isinstance(literal, Mapping):
        return (
            isinstance(stored, Mapping)
            and set(stored) == set(literal)
            and all(json_equal(stored[k], v) for k, v in literal.items())
        )
    return False


def _equal(stored: Any, operand: Any) -> bool:
    if operand is None:
        return stored is MISSING or stored is None
    if stored is MISSING or (isinstance(stored, DateValue) and not isinstance(operand, DateValue)):
        return False
    if isinstance(operand, DateValue):
        return _as_date_us(stored) == operand.us
    return json_equal(stored, operand)


def _compare(op: str, left: Any, right: Any) -> bool:
    if op == "$gt":
        return bool(left > right)
    if op == "$gte":
        return bool(left >= right)
    if op == "$lt":
        return bool(left < right)
    return bool(left <= right)


def _range(op: str, stored: Any, operand: Any) -> bool:
    if stored is MISSING or stored is None:
        return False
    if isinstance(operand, DateValue):
        us = _as_date_us(stored)
        return us is not None and _compare(op, us, operand.us)
    if isinstance(operand, str):
        return isinstance(stored, str) and _compare(op, stored, operand)
    if isinstance(stored, bool) or not isinstance(stored, (int, float)):
        return False
    return _compare(op, stored, operand)


def _leaf(leaf: Leaf, record: Mapping[str, Any]) -> bool:
    stored = resolve(leaf.key, record)
    op = leaf.op
    if op == "$eq":
        return _equal(stored, leaf.value)
    if op == "$ne":
        return not _equal(stored, leaf.value)
    if op == "$in":
        return any(_equal(stored, v) for v in leaf.value)
    if op == "$nin":
        return not any(_equal(stored, v) for v in leaf.value)
    if op == "$exists":
        return (stored is not MISSING) is leaf.value
    return _range(op, stored, leaf.value)
