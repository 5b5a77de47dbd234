"""Small helpers to build a ``RecallFilter`` in code instead of writing the dict.

Each helper builds the dict form and validates it, so the same rules and errors apply::

    from khora_core.filters.builders import and_, eq, gte, in_

    f = eq("source_name", "linear") & in_("metadata.tier", ["gold", "silver"])
    f = and_(f, gte("occurred_at", datetime(2026, 1, 1, tzinfo=timezone.utc)))

Combine with ``&`` (and), ``|`` (or) and ``~`` (not) or with ``and_``/``or_``/``nor``/``not_``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from khora_core.filters.ast import RecallFilter

__all__ = ["and_", "eq", "exists", "gt", "gte", "in_", "lt", "lte", "ne", "nin", "nor", "not_", "or_"]

FilterLike = RecallFilter | Mapping[str, Any]


def _op(key: str, op: str, value: Any) -> RecallFilter:
    return RecallFilter.parse({key: {op: value}})


def eq(key: str, value: Any) -> RecallFilter:
    """``{key: {"$eq": value}}`` (a list means exact-array equality, ``None`` null-or-missing)."""
    return _op(key, "$eq", value)


def ne(key: str, value: Any) -> RecallFilter:
    """``{key: {"$ne": value}}`` (also matches a missing value)."""
    return _op(key, "$ne", value)


def gt(key: str, value: Any) -> RecallFilter:
    """``{key: {"$gt": value}}``."""
    return _op(key, "$gt", value)


def gte(key: str, value: Any) -> RecallFilter:
    """``{key: {"$gte": value}}``."""
    return _op(key, "$gte", value)


def lt(key: str, value: Any) -> RecallFilter:
    """``{key: {"$lt": value}}``."""
    return _op(key, "$lt", value)


def lte(key: str, value: Any) -> RecallFilter:
    """``{key: {"$lte": value}}``."""
    return _op(key, "$lte", value)


def in_(key: str, values: Iterable[Any]) -> RecallFilter:
    """``{key: {"$in": values}}``: the value is one of ``values``."""
    return _op(key, "$in", list(values))


def nin(key: str, values: Iterable[Any]) -> RecallFilter:
    """``{key: {"$nin": values}}``: the value is none of ``values`` (or missing)."""
    return _op(key, "$nin", list(values))


def exists(key: str, present: bool = True) -> RecallFilter:
    """``{key: {"$exists": present}}`` (metadata paths and string system keys)."""
    return _op(key, "$exists", present)


def _dicts(filters: tuple[FilterLike, ...]) -> list[Any]:
    return [f.to_dict() if isinstance(f, RecallFilter) else f for f in filters]


def and_(*filters: FilterLike) -> RecallFilter:
    """All of ``filters`` match."""
    return RecallFilter.parse({"$and": _dicts(filters)})


def or_(*filters: FilterLike) -> RecallFilter:
    """At least one of ``filters`` matches."""
    return RecallFilter.parse({"$or": _dicts(filters)})


def nor(*filters: FilterLike) -> RecallFilter:
    """None of ``filters`` matches."""
    return RecallFilter.parse({"$nor": _dicts(filters)})


def not_(f: FilterLike) -> RecallFilter:
    """``f`` does not match."""
    return RecallFilter.parse({"$not": _dicts((f,))[0]})
