"""Filters between LangChain's PGVector dialect and Khora's ``RecallFilter``, both ways.

LangChain vector stores commonly take the ``langchain-postgres`` (``PGVector``) filter dict::

    {"tier": "gold"}                                   # bare value: $eq
    {"year": {"$between": [2020, 2024]}}
    {"$or": [{"tier": {"$in": ["gold", "silver"]}}, {"source": "linear"}]}
    {"$not": [{"draft": True}]}                        # $not over a list: none of them

``pgvector_to_recall_filter`` turns it into a ``RecallFilter`` dict that selects exactly
what PGVector selects on the same metadata (``docs/integrations.md`` has the table):

* a key is always the user's own top-level metadata key, taken literally: ``"created_at"``
  is your ``created_at``, not Khora's ingest time, and ``"a.b"`` or ``"page label"`` is
  that key (PGVector refuses such names; Khora accepts any key). Khora's system fields and
  nested paths are reached by passing a ``RecallFilter`` instead of a dict;
* comparisons (``$eq $ne $lt $lte $gt $gte $between``) follow PostgreSQL's ``jsonb_path_match``:
  values of another JSON type never match (``{"n": {"$ne": 5}}`` skips ``n: "5"``), and a
  missing key matches no comparison, ``$ne`` included;
* ``$in``/``$nin`` compare the stored value's text, as PGVector's ``->>`` does: ``"8"`` finds
  the number ``8`` and ``"true"`` finds ``true``; a missing key or JSON ``null`` matches
  neither ``$in`` nor ``$nin``;
* ``$not`` follows SQL: the negation of a condition that is unknown for a document (a type
  mismatch, a missing key under ``$in``) is still unknown, so the document is not returned;
* ``$exists`` asks whether the top-level key is present.

Known differences (documented, not silently different): a list value is compared as a
whole, where PostgreSQL's lax JSON path compares each element; numbers in ``$in`` compare
by value (``8`` also finds ``8.0``); ``$like``/``$ilike`` raise
``RecallFilterUnsupportedError``.

``recall_filter_to_pgvector`` goes the other way so one Khora filter can be handed to any
LangChain store speaking that dialect; top-level metadata keys lose their ``metadata.``
prefix, dates become ISO-8601 strings, and what the dialect cannot express (nested paths,
whole-metadata equality, list equality, the ``null`` shorthand, ``null`` or ``bool`` in
``$in``) raises ``RecallFilterUnsupportedError``.

``KhoraTranslator`` (``khora_integrations.langchain.self_query``, importable from here too)
turns a self-querying retriever's structured query into this dialect.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from khora_core.errors import RecallFilterUnsupportedError, RecallFilterValidationError
from khora_core.filters.tree import metadata_key, metadata_path

if TYPE_CHECKING:
    from khora_integrations.langchain.self_query import KhoraTranslator

__all__ = ["KhoraTranslator", "pgvector_to_recall_filter", "recall_filter_to_pgvector"]

_COMPARISONS = ("$eq", "$ne", "$lt", "$lte", "$gt", "$gte")
_LIST_OPS = ("$in", "$nin")
_TEXT_OPS = ("$like", "$ilike")
_METADATA_PREFIX = "metadata."
#: The text PostgreSQL's ``->>`` gives a stored JSON number, for the numbers a ``$in``
#: member's text can equal (no leading zeros, no exponent).
_NUMBER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")


def __getattr__(name: str) -> Any:
    # ``KhoraTranslator`` is importable from here too; imported on first use, since
    # khora_integrations.langchain.self_query imports this module.
    if name == "KhoraTranslator":
        from khora_integrations.langchain.self_query import KhoraTranslator

        return KhoraTranslator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _invalid(path: str, code: str, message: str) -> RecallFilterValidationError:
    return RecallFilterValidationError([{"path": path, "code": code, "message": message}])


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _combine(fragments: list[dict[str, Any]], *, field_keys: bool) -> dict[str, Any]:
    """One dict when the fragments' keys are distinct fields, else an explicit ``$and``."""
    if len(fragments) == 1:
        return fragments[0]
    keys = [next(iter(f)) for f in fragments]
    if field_keys and len(set(keys)) == len(keys) and not any(k.startswith("$") for k in keys):
        return {k: v for f in fragments for k, v in f.items()}
    return {"$and": fragments}


# -- PGVector -> RecallFilter -------------------------------------------------------------
#
# PGVector's WHERE clause is three-valued: a condition is TRUE, FALSE or NULL (unknown), and
# NOT NULL is NULL. Each node below is translated into two Khora conditions, "is TRUE" and
# "is FALSE" (unknown is neither), so negation and the connectives follow SQL exactly.

_TRUE: dict[str, Any] = {}
_FALSE: dict[str, Any] = {"$nor": [{}]}


def _all(*parts: dict[str, Any]) -> dict[str, Any]:
    if any(p is _FALSE for p in parts):
        return _FALSE
    kept = [p for p in parts if p is not _TRUE]
    if not kept:
        return _TRUE
    return kept[0] if len(kept) == 1 else {"$and": kept}


def _any(*parts: dict[str, Any]) -> dict[str, Any]:
    if any(p is _TRUE for p in parts):
        return _TRUE
    kept = [p for p in parts if p is not _FALSE]
    if not kept:
        return _FALSE
    return kept[0] if len(kept) == 1 else {"$or": kept}


def _none(*parts: dict[str, Any]) -> dict[str, Any]:
    if any(p is _TRUE for p in parts):
        return _FALSE
    kept = [p for p in parts if p is not _FALSE]
    return {"$nor": kept} if kept else _TRUE


@dataclass(frozen=True)
class _Truth:
    """When a PGVector condition is TRUE and when it is FALSE (otherwise: unknown)."""

    true: dict[str, Any]
    false: dict[str, Any]

    def negated(self) -> _Truth:
        return _Truth(self.false, self.true)


def _two_valued(true: dict[str, Any], unknown: dict[str, Any] = _FALSE) -> _Truth:
    return _Truth(true, _none(true, unknown))


class _Stored:
    """Khora conditions on the JSON type stored under one metadata key."""

    def __init__(self, key: str) -> None:
        self.key = key

    def exists(self, present: bool = True) -> dict[str, Any]:
        return {self.key: {"$exists": present}}

    def null(self) -> dict[str, Any]:
        return _all(self.exists(), {self.key: None})

    def non_null(self) -> dict[str, Any]:
        return _all(self.exists(), {self.key: {"$ne": None}})

    def of_type(self, value: Any) -> dict[str, Any]:
        if isinstance(value, bool):
            return {self.key: {"$in": [True, False]}}
        if isinstance(value, (int, float)):
            return _any({self.key: {"$gte": 0}}, {self.key: {"$lt": 0}})
        return {self.key: {"$gte": ""}}  # every string

    def compare(self, op: str, value: Any) -> dict[str, Any]:
        """Stored value of ``value``'s type for which ``stored <op> value`` holds."""
        k = self.key
        if isinstance(value, bool):
            lower, upper = {k: False}, {k: True}
            both = {k: {"$in": [True, False]}}
            table = {
                "$eq": {k: value},
                "$ne": {k: not value},
                "$lt": lower if value else _FALSE,
                "$lte": both if value else lower,
                "$gt": _FALSE if value else upper,
                "$gte": upper if value else both,
            }
            return table[op]
        if op == "$ne":
            return _any({k: {"$lt": value}}, {k: {"$gt": value}})
        return {k: {op: value}}


def _json_scalar(value: Any, path: str) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise _invalid(
        path,
        "invalid_operand",
        f"comparisons take a string, number, boolean or null, got {type(value).__name__}",
    )


def _comparison(stored: _Stored, op: str, value: Any) -> _Truth:
    """``jsonb_path_match(metadata, '$.key <op> $value')`` as a ``_Truth``."""
    if value is None:  # null equals only null; ordering a non-null against null is false
        true = {
            "$eq": stored.null(),
            "$ne": stored.non_null(),
            "$lt": _FALSE,
            "$gt": _FALSE,
            "$lte": stored.null(),
            "$gte": stored.null(),
        }[op]
        return _two_valued(true)
    same_type = stored.compare(op, value)
    true = _any(same_type, stored.null()) if op == "$ne" else same_type
    unknown = _all(stored.non_null(), _none(stored.of_type(value)))  # another type: unknown
    return _two_valued(true, unknown)


def _membership(stored: _Stored, values: Any, path: str, *, negated: bool) -> _Truth:
    """``metadata->>'key' IN (text of each value)`` (``NOT IN`` when ``negated``)."""
    if not isinstance(values, (list, tuple)):
        raise _invalid(path, "invalid_operand", f"$in/$nin take a list, got {type(values).__name__}")
    matches: list[dict[str, Any]] = []
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise _invalid(
                _join(path, i),
                "invalid_operand",
                f"$in/$nin members are strings or numbers (as in PGVector), got {value!r}",
            )
        text = str(value)
        matches.append({stored.key: text})
        if _NUMBER_TEXT.fullmatch(text):
            matches.append({stored.key: float(text) if "." in text else int(text)})
        elif text in ("true", "false"):
            matches.append({stored.key: text == "true"})
    truth = _two_valued(_any(*matches), {stored.key: None})  # missing or null: unknown
    return truth.negated() if negated else truth


def _field(field: Any, spec: Any, path: str) -> _Truth:
    if not isinstance(field, str) or not field:
        raise _invalid(path, "invalid_key", f"a filter field must be a non-empty string, got {field!r}")
    if field.startswith("$"):
        raise _invalid(path, "unknown_operator", f"{field} is not an operator allowed here")
    stored = _Stored(metadata_key(field))
    if not isinstance(spec, Mapping):
        return _comparison(stored, "$eq", _json_scalar(spec, path))
    if not spec:
        raise _invalid(path, "empty", "an operator object needs at least one operator")
    parts: list[_Truth] = []
    for op, operand in spec.items():
        op_path = _join(path, str(op))
        if not isinstance(op, str) or not op.startswith("$"):
            raise _invalid(op_path, "invalid_operator", f"expected an operator such as $eq, got {op!r}")
        op = op.lower()
        if op in _COMPARISONS:
            parts.append(_comparison(stored, op, _json_scalar(operand, op_path)))
        elif op in _LIST_OPS:
            parts.append(_membership(stored, operand, op_path, negated=op == "$nin"))
        elif op == "$between":
            if not isinstance(operand, (list, tuple)) or len(operand) != 2:
                raise _invalid(op_path, "invalid_operand", "$between takes a [low, high] pair")
            parts.append(
                _and_truths(
                    [
                        _comparison(stored, "$gte", _json_scalar(operand[0], op_path)),
                        _comparison(stored, "$lte", _json_scalar(operand[1], op_path)),
                    ]
                )
            )
        elif op == "$exists":
            if not isinstance(operand, bool):
                raise _invalid(op_path, "invalid_operand", "$exists takes true or false")
            parts.append(_two_valued(stored.exists(operand)))
        elif op in _TEXT_OPS:
            raise RecallFilterUnsupportedError(
                f"{op} (pattern matching) on {field!r} is not supported by Khora's vector stores; "
                "use $eq, $in or a range operator instead",
                key=field,
                backend="khora",
            )
        else:
            raise _invalid(op_path, "unknown_operator", f"{op} is not a supported field operator")
    return _and_truths(parts)


def _and_truths(parts: list[_Truth]) -> _Truth:
    if len(parts) == 1:
        return parts[0]
    return _Truth(_all(*(p.true for p in parts)), _any(*(p.false for p in parts)))


def _or_truths(parts: list[_Truth]) -> _Truth:
    if len(parts) == 1:
        return parts[0]
    return _Truth(_any(*(p.true for p in parts)), _all(*(p.false for p in parts)))


def _node(node: Any, path: str) -> _Truth:
    if not isinstance(node, Mapping):
        raise _invalid(path, "invalid_type", f"expected a filter object, got {type(node).__name__}")
    if not node:
        raise _invalid(path, "empty", "an empty filter object is not allowed here")
    parts: list[_Truth] = []
    for key, value in node.items():
        key_path = _join(path, key) if isinstance(key, str) else path
        op = key.lower() if isinstance(key, str) and key.startswith("$") else None
        if op in ("$and", "$or"):
            if not isinstance(value, (list, tuple)) or not value:
                raise _invalid(key_path, "invalid_operand", f"{op} takes a non-empty list of filter objects")
            children = [_node(v, _join(key_path, i)) for i, v in enumerate(value)]
            parts.append(_and_truths(children) if op == "$and" else _or_truths(children))
        elif op == "$not":
            if isinstance(value, Mapping):
                parts.append(_node(value, key_path).negated())
            elif isinstance(value, (list, tuple)) and value:
                # PGVector's list form negates each item and joins them with AND.
                parts.append(
                    _and_truths([_node(v, _join(key_path, i)).negated() for i, v in enumerate(value)])
                )
            else:
                raise _invalid(
                    key_path, "invalid_operand", "$not takes a filter object or a non-empty list of them"
                )
        else:
            parts.append(_field(key, value, key_path))
    return _and_truths(parts)


def pgvector_to_recall_filter(filter: Any) -> Any:
    """Translate a PGVector-dialect filter dict into a ``RecallFilter`` dict.

    Args:
        filter: a PGVector-style dict (see the module docstring), a ``RecallFilter``
            (returned unchanged: use one for Khora's own grammar, system fields and nested
            paths) or ``None``/``{}`` (no filter).

    Returns:
        A dict for ``RecallFilter.parse``/``Khora.recall(filter=...)`` that selects what
        PGVector selects, the ``RecallFilter`` given, or ``None``.

    Raises:
        RecallFilterValidationError: the filter is malformed (``.errors`` locates it).
        RecallFilterUnsupportedError: ``$like``/``$ilike``.
    """
    if filter is None or (isinstance(filter, Mapping) and not filter):
        return None
    if not isinstance(filter, Mapping):
        from khora_core.filters import RecallFilter

        if isinstance(filter, RecallFilter):
            return filter
    true = _node(filter, "").true
    return None if true is _TRUE else true


# -- RecallFilter -> PGVector -------------------------------------------------------------


def _unsupported(path: str, message: str, key: str | None = None) -> RecallFilterUnsupportedError:
    return RecallFilterUnsupportedError(
        f"{path or '<root>'}: {message} in the PGVector filter dialect", key=key, backend="pgvector"
    )


def _is_date_literal(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"$date"}


def _to_pg_value(value: Any, path: str, key: str) -> Any:
    if _is_date_literal(value):
        return str(value["$date"])
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None:
        raise _unsupported(path, "the null shorthand (null-or-missing) cannot be expressed", key)
    if isinstance(value, (list, tuple, Mapping)):
        raise _unsupported(path, "equality with a list or object cannot be expressed", key)
    return value


def _field_to_pg(key: str, value: Any, path: str) -> list[dict[str, Any]]:
    if key == "metadata":
        raise _unsupported(path, "whole-metadata equality cannot be expressed", key)
    segments = metadata_path(key)
    if len(segments) > 1:
        raise _unsupported(path, "a nested metadata path cannot be expressed (keys are top-level)", key)
    field = segments[0] if segments else key
    if not isinstance(value, Mapping) or _is_date_literal(value):
        return [{field: _to_pg_value(value, path, key)}]
    ops = dict(value)
    fragments: list[dict[str, Any]] = []
    if set(ops) >= {"$gte", "$lte"}:
        low, high = ops.pop("$gte"), ops.pop("$lte")
        fragments.append({field: {"$between": [_to_pg_value(low, path, key), _to_pg_value(high, path, key)]}})
    for op, operand in ops.items():
        op_path = _join(path, op)
        if op in _COMPARISONS:
            fragments.append({field: {op: _to_pg_value(operand, op_path, key)}})
        elif op in _LIST_OPS:
            for i, item in enumerate(operand):
                scalar = isinstance(item, (str, int, float, datetime)) or _is_date_literal(item)
                if item is None or isinstance(item, bool) or not scalar:
                    raise _unsupported(_join(op_path, i), f"{op} with {item!r} cannot be expressed", key)
            fragments.append({field: {op: [_to_pg_value(v, op_path, key) for v in operand]}})
        elif op == "$exists":
            fragments.append({field: {op: operand}})
        elif op == "$not":
            fragments.append({"$not": _node_to_pg({key: operand}, op_path)})
        else:
            raise _unsupported(op_path, f"the operator {op}", key)
    return fragments


def _node_to_pg(node: Mapping[str, Any], path: str) -> dict[str, Any]:
    fragments: list[dict[str, Any]] = []
    for key, value in node.items():
        key_path = _join(path, key)
        if key in ("$and", "$or"):
            fragments.append({key: [_node_to_pg(v, _join(key_path, i)) for i, v in enumerate(value)]})
        elif key == "$nor":
            # PGVector's list-form $not means "none of them".
            fragments.append({"$not": [_node_to_pg(v, _join(key_path, i)) for i, v in enumerate(value)]})
        elif key == "$not":
            fragments.append({"$not": _node_to_pg(value, key_path)})
        elif key.startswith("$"):
            raise _unsupported(key_path, f"the operator {key}")
        else:
            fragments.extend(_field_to_pg(key, value, key_path))
    return _combine(fragments, field_keys=True)


def recall_filter_to_pgvector(filter: Any) -> dict[str, Any] | None:
    """Translate a ``RecallFilter`` (or its dict form) into a PGVector-dialect dict.

    The filter is validated first. Top-level metadata keys drop their ``metadata.`` prefix,
    system keys keep their names (other stores read them as metadata keys), dates become ISO-8601 strings,
    ``$gte`` + ``$lte`` on one field become ``$between``, ``$nor`` becomes the list form
    of ``$not``.

    Args:
        filter: a ``RecallFilter`` or a dict in its grammar.

    Returns:
        A dict any LangChain store speaking the PGVector dialect accepts; ``None`` for the
        empty filter (it matches everything, and the dialect has no empty object).

    Raises:
        RecallFilterValidationError: the filter is malformed.
        RecallFilterUnsupportedError: the filter uses something the dialect cannot
            express: nested paths, whole-metadata equality, list/object equality, the ``null``
            shorthand, ``null``/``bool`` inside ``$in``/``$nin``.
    """
    from khora_core.filters import RecallFilter

    parsed = RecallFilter.parse(filter)
    source = filter if isinstance(filter, Mapping) else parsed.to_dict()
    return _node_to_pg(source, "") if source else None
