"""Filters between LlamaIndex ``MetadataFilters`` and Khora's ``RecallFilter``, both ways.

``metadata_filters_to_recall_filter`` turns a LlamaIndex filter into a ``RecallFilter`` dict
with the meaning LlamaIndex's own evaluator gives it
(``llama_index.core.vector_stores.utils.build_metadata_filter_fn``):

==================================  ==================================================
LlamaIndex                          RecallFilter
==================================  ==================================================
``key``                             ``metadata.<key>``, unless it names a system key
                                    (``title``, ``source``, ``occurred_at``, ...) or is
                                    already ``metadata``/``metadata.<path>``; a dotted
                                    key is a nested metadata path
``==`` ``!=`` ``>`` ``>=`` ``<``    ``$eq`` ``$ne`` ``$gt`` ``$gte`` ``$lt`` ``$lte``
``<=``                              (a string on a system date key is a ``$date``); a
                                    number also names the stored booleans Python's
                                    ``==``/``<`` equate with 0 and 1
``in`` / ``nin`` (a list)           ``$in`` / ``$nin`` (``None`` members dropped: a
                                    missing or null value is never ``in``; ``in []``
                                    matches nothing, ``nin []`` everything)
no filters (any condition)          no constraint (LlamaIndex selects every node)
``is_empty``                        missing, ``null``, ``""`` or ``[]``: an ``$or`` of
                                    null-or-missing and the empty values the key's type
                                    can hold
``and`` / ``or``                    ``$and`` / ``$or``
``not``                             none of the filters match: ``$nor`` (``$not`` for one)
nested ``MetadataFilters``          nested logical operators
==================================  ==================================================

``RecallFilter`` has no substring and no array-membership operators, so ``text_match``,
``text_match_insensitive``, ``contains``, ``any`` and ``all`` raise
``RecallFilterUnsupportedError`` naming the operator; they are never dropped. A ``None``
value with a comparison operator raises ``RecallFilterValidationError`` (LlamaIndex
matches nothing there; ``is_empty`` says "missing or null").

``recall_filter_to_metadata_filters`` goes the other way, so a Khora filter can be handed
to any LlamaIndex vector store: metadata keys lose their ``metadata.`` prefix, system date
operands become ISO-8601 strings, ``$not`` is a one-filter ``not``, and ``$nor`` is a ``not``
over one nested ``or`` (unambiguous whether a store reads ``not`` as "none of" or as
"not all of"). What ``MetadataFilters`` cannot express raises
``RecallFilterUnsupportedError``: whole-``metadata`` equality, list or object equality, the
``null`` shorthand, booleans (``MetadataFilter`` values are strings and numbers), ``$exists``,
``$date`` operands on metadata keys (no date type) and ``$in`` lists mixing strings with
numbers.
"""

from __future__ import annotations

import operator as _op
from collections.abc import Mapping
from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from khora_core.errors import RecallFilterUnsupportedError, RecallFilterValidationError
from khora_core.filters import RecallFilter
from khora_core.filters.ast import And, DateValue, Leaf, Node, Nor, Not, Or
from khora_core.filters.tree import metadata_key
from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS

__all__ = [
    "metadata_filters_to_recall_filter",
    "recall_filter_to_metadata_filters",
    "to_recall_filter",
]

_SYSTEM_KEYS = frozenset(SYSTEM_DATE_KEYS) | frozenset(SYSTEM_STRING_KEYS)
_PREFIX = "metadata."
_COMPARISONS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
}
_MEMBERSHIP = {FilterOperator.IN: "$in", FilterOperator.NIN: "$nin"}
_UNSUPPORTED = {
    FilterOperator.TEXT_MATCH: "substring matching",
    FilterOperator.TEXT_MATCH_INSENSITIVE: "case-insensitive substring matching",
    FilterOperator.CONTAINS: "array membership (the stored array contains the value)",
    FilterOperator.ANY: "array membership (the stored array contains any of the values)",
    FilterOperator.ALL: "array membership (the stored array contains all of the values)",
}
_MATCH_NOTHING: dict[str, Any] = {"$nor": [{}]}  # "none of [match everything]"
#: Python's order between a stored boolean (an ``int`` in Python) and a number operand.
_PY_ORDER = {"$gt": _op.gt, "$gte": _op.ge, "$lt": _op.lt, "$lte": _op.le}


def _invalid(path: str, code: str, message: str) -> RecallFilterValidationError:
    return RecallFilterValidationError([{"path": path, "code": code, "message": message}])


# -- MetadataFilters -> RecallFilter -------------------------------------------------------


def _khora_key(key: Any, path: str, node_metadata: bool) -> str:
    if not isinstance(key, str) or not key:
        raise _invalid(path, "unknown_key", f"a filter key must be a non-empty string, got {key!r}")
    if node_metadata:  # the node's own top-level key, whatever its name
        return metadata_key(key)
    if key.startswith("$"):
        raise _invalid(path, "bad_operator", f"{key!r} looks like an operator, not a metadata key")
    if key in _SYSTEM_KEYS or key == "metadata" or key.startswith(_PREFIX):
        return key
    return _PREFIX + key


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bools_equal_to(values: list[Any]) -> list[bool]:
    """The booleans Python's ``==`` finds among ``values`` (``True == 1``, ``False == 0.0``)."""
    return [b for b in (False, True) if any(_is_number(v) and v == b for v in values)]


def _operand(key: str, value: Any) -> Any:
    # System date keys only take dates; a string from a LlamaIndex filter is an ISO date.
    if key in SYSTEM_DATE_KEYS and isinstance(value, str):
        return {"$date": value}
    return value


def _empty_values(key: str) -> list[Any]:
    """What LlamaIndex's ``is_empty`` matches, limited to the values this key can hold."""
    if key in SYSTEM_DATE_KEYS:
        return [None]
    if key in SYSTEM_STRING_KEYS:
        return [None, ""]
    return [None, "", []]


def _leaf_to_khora(leaf: MetadataFilter, path: str, node_metadata: bool) -> dict[str, Any]:
    key = _khora_key(leaf.key, f"{path}.key", node_metadata)
    op = FilterOperator(leaf.operator)
    value = leaf.value
    if op in _UNSUPPORTED:
        raise RecallFilterUnsupportedError(
            f"{path or '<root>'}: the LlamaIndex operator {op.value!r} on {leaf.key!r} is "
            f"{_UNSUPPORTED[op]}, which RecallFilter cannot express; use '==', 'in' or a range "
            "operator, or filter the results yourself",
            key=key,
            backend="llama_index",
        )
    if op == FilterOperator.IS_EMPTY:
        empties = [{key: empty} for empty in _empty_values(key)]
        return empties[0] if len(empties) == 1 else {"$or": empties}
    if value is None:
        raise _invalid(
            path,
            "bad_operand",
            f"{op.value!r} with the value None matches nothing in LlamaIndex; "
            "use FilterOperator.IS_EMPTY for 'missing or null'",
        )
    # Python compares a stored boolean with a number as 0 or 1; Khora's comparisons are
    # typed, so the booleans LlamaIndex would match are named explicitly (metadata only:
    # system keys hold strings and dates).
    on_metadata = key not in _SYSTEM_KEYS
    if op in _MEMBERSHIP:
        if not isinstance(value, list):
            raise _invalid(path, "bad_operand", f"{op.value!r} takes a list of values, got {value!r}")
        members: list[Any] = [_operand(key, v) for v in value if v is not None]  # None: never in
        if on_metadata:
            members += _bools_equal_to(members)
        if not members:  # x in [] is False, x not in [] is True
            return dict(_MATCH_NOTHING) if op == FilterOperator.IN else {}
        return {key: {_MEMBERSHIP[op]: members}}
    comparison = _COMPARISONS[op]
    if on_metadata and _is_number(value):
        if comparison in ("$eq", "$ne"):
            bools = _bools_equal_to([value])
            if bools:
                return {key: {"$in" if comparison == "$eq" else "$nin": [value, *bools]}}
        elif comparison in _PY_ORDER:
            bools = [b for b in (False, True) if _PY_ORDER[comparison](b, value)]
            if bools:
                return {"$or": [{key: {comparison: value}}, {key: {"$in": bools}}]}
    return {key: {comparison: _operand(key, value)}}


def _filters_to_khora(filters: MetadataFilters, path: str, node_metadata: bool) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for i, item in enumerate(filters.filters):
        item_path = f"{path}.filters[{i}]" if path else f"filters[{i}]"
        if isinstance(item, MetadataFilters):
            parts.append(_filters_to_khora(item, item_path, node_metadata))
        else:
            parts.append(_leaf_to_khora(item, item_path, node_metadata))
    condition = FilterCondition(filters.condition or FilterCondition.AND)
    if condition == FilterCondition.OR:
        if not parts:
            return dict(_MATCH_NOTHING)  # any([]) is False in LlamaIndex
        return parts[0] if len(parts) == 1 else {"$or": parts}
    if condition == FilterCondition.NOT:
        if not parts:
            return {}  # "none of no filters" matches everything
        return {"$not": parts[0]} if len(parts) == 1 else {"$nor": parts}
    if not parts:
        return {}
    return parts[0] if len(parts) == 1 else {"$and": parts}


def metadata_filters_to_recall_filter(
    filters: MetadataFilters | MetadataFilter | None,
    *,
    node_metadata: bool = False,
) -> dict[str, Any] | None:
    """Translate LlamaIndex ``MetadataFilters`` into a ``RecallFilter`` dict.

    Args:
        filters: a ``MetadataFilters`` (any nesting), a single ``MetadataFilter`` or ``None``.
        node_metadata: every key is a top-level key of the stored metadata, taken literally
            (``"created_at"``, ``"a.b"`` and ``"page label"`` included), as LlamaIndex's
            ``SimpleVectorStore`` reads a node's metadata; ``KhoraVectorStore`` filters this
            way. When False, a system key name (``title``, ``created_at``, ...) means Khora's
            system field and a dotted key is a nested metadata path.

    Returns:
        A validated dict for ``RecallFilter.parse`` / ``Khora.recall(filter=...)``; ``None``
        when ``filters`` is ``None`` or an empty ``and`` (no constraint).

    Raises:
        RecallFilterUnsupportedError: an operator RecallFilter cannot express
            (``text_match``, ``text_match_insensitive``, ``contains``, ``any``, ``all``).
        RecallFilterValidationError: a malformed filter (a bad key, ``None`` with a
            comparison, a scalar for ``in``, a range on a system string key, ...).
    """
    if filters is None:
        return None
    if isinstance(filters, MetadataFilter):
        filters = MetadataFilters(filters=[filters])
    if not isinstance(filters, MetadataFilters):
        raise _invalid("", "bad_operand", f"expected MetadataFilters, got {type(filters).__name__}")
    if not filters.filters:  # LlamaIndex: no filters select everything, whatever the condition
        return None
    result = _filters_to_khora(filters, "", node_metadata)
    if not result:
        return None
    RecallFilter.parse(result)  # fail here, naming the filter, not later inside recall()
    return result


def to_recall_filter(value: Any, *, node_metadata: bool = False) -> RecallFilter | None:
    """A ``RecallFilter`` from what an integration user may pass as a filter.

    Args:
        value: ``MetadataFilters``/``MetadataFilter`` (translated), a ``RecallFilter``, a
            ``RecallFilter`` dict, or ``None``/``{}``.
        node_metadata: see ``metadata_filters_to_recall_filter``.

    Raises:
        RecallFilterUnsupportedError: see ``metadata_filters_to_recall_filter``.
        RecallFilterValidationError: the filter is malformed.
    """
    if isinstance(value, (MetadataFilters, MetadataFilter)):
        value = metadata_filters_to_recall_filter(value, node_metadata=node_metadata)
    if value is None or (isinstance(value, Mapping) and not value):
        return None
    return RecallFilter.parse(value)


# -- RecallFilter -> MetadataFilters -------------------------------------------------------


def _unsupported(path: str, message: str, key: str | None = None) -> RecallFilterUnsupportedError:
    return RecallFilterUnsupportedError(
        f"{path or '<root>'}: {message}; LlamaIndex MetadataFilters cannot express it",
        key=key,
        backend="llama_index",
    )


def _li_value(leaf: Leaf, value: Any, path: str) -> Any:
    if isinstance(value, DateValue):
        if leaf.key not in SYSTEM_DATE_KEYS:
            raise _unsupported(
                path, f"a $date operand on {leaf.key!r} (MetadataFilters has no date type)", leaf.key
            )
        return value.to_json()["$date"]
    if value is None:
        raise _unsupported(path, "the null shorthand (null-or-missing)", leaf.key)
    if isinstance(value, bool):
        raise _unsupported(
            path, f"the boolean {value!r} (MetadataFilter values are strings and numbers)", leaf.key
        )
    if isinstance(value, (list, dict)):
        raise _unsupported(path, "equality with a list or an object", leaf.key)
    return value


def _leaf_to_li(leaf: Leaf, path: str) -> MetadataFilter:
    if leaf.key == "metadata":
        raise _unsupported(path, "whole-metadata equality", leaf.key)
    if leaf.op == "$exists":
        raise _unsupported(path, "$exists (is_empty also matches '' and [])", leaf.key)
    key = leaf.key[len(_PREFIX) :] if leaf.key.startswith(_PREFIX) else leaf.key
    if leaf.op in ("$in", "$nin"):
        members = [_li_value(leaf, v, f"{path}[{i}]") for i, v in enumerate(leaf.value)]
        if any(isinstance(m, str) for m in members) and not all(isinstance(m, str) for m in members):
            raise _unsupported(path, f"{leaf.op} mixing strings and numbers", leaf.key)
        operator = FilterOperator.IN if leaf.op == "$in" else FilterOperator.NIN
        return MetadataFilter(key=key, value=members, operator=operator)
    operator = {v: k for k, v in _COMPARISONS.items()}[leaf.op]
    return MetadataFilter(key=key, value=_li_value(leaf, leaf.value, path), operator=operator)


def _node_to_li(node: Node, path: str) -> MetadataFilter | MetadataFilters:
    if isinstance(node, Leaf):
        return _leaf_to_li(node, f"{path}.{node.key}" if path else node.key)
    if isinstance(node, Not):
        return MetadataFilters(
            filters=[_node_to_li(node.child, f"{path}.$not")], condition=FilterCondition.NOT
        )
    name = {And: "$and", Or: "$or", Nor: "$nor"}[type(node)]
    children = [_node_to_li(c, f"{path}.{name}[{i}]") for i, c in enumerate(node.children)]
    if isinstance(node, Nor):
        inner = (
            children[0]
            if len(children) == 1
            else MetadataFilters(filters=children, condition=FilterCondition.OR)
        )
        return MetadataFilters(filters=[inner], condition=FilterCondition.NOT)
    condition = FilterCondition.OR if isinstance(node, Or) else FilterCondition.AND
    return MetadataFilters(filters=children, condition=condition)


def recall_filter_to_metadata_filters(
    filter: RecallFilter | Mapping[str, Any] | None,
) -> MetadataFilters | None:
    """Translate a ``RecallFilter`` (or its dict form) into LlamaIndex ``MetadataFilters``.

    Args:
        filter: a ``RecallFilter``, a dict in its grammar, or ``None``.

    Returns:
        ``MetadataFilters`` any LlamaIndex vector store accepts; ``None`` for ``None`` and
        for the empty filter (it matches everything).

    Raises:
        RecallFilterValidationError: the filter is malformed.
        RecallFilterUnsupportedError: the filter uses something ``MetadataFilters`` cannot
            express (see the module docstring).
    """
    parsed = RecallFilter.parse(filter)
    if parsed is None:
        return None
    root = parsed.root
    if isinstance(root, And) and not root.children:
        return None
    out = _node_to_li(root, "")
    return out if isinstance(out, MetadataFilters) else MetadataFilters(filters=[out])
