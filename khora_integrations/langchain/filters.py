"""Filters between LangChain's PGVector dialect and Khora's ``RecallFilter``, both ways.

LangChain vector stores commonly take the ``langchain-postgres`` (PGVector) filter dict::

    {"tier": "gold"}                                   # bare value: $eq
    {"year": {"$between": [2020, 2024]}}
    {"$or": [{"tier": {"$in": ["gold", "silver"]}}, {"source": "linear"}]}
    {"$not": {"draft": True}}                          # $not over a list means "none of"

``pgvector_to_recall_filter`` turns it into a ``RecallFilter`` dict: a plain field means
``metadata.<field>`` unless it names a system key (``source``, ``title``, ``occurred_at``,
...); a field already written as ``metadata.x`` or a whole Khora filter passes through
unchanged, so Khora's own dicts (with ``$nor``, ``$date``, field-level ``$not``) are
accepted too. ``$between`` becomes ``$gte`` + ``$lte``. ``$like``/``$ilike`` have no
``RecallFilter`` equivalent and raise ``RecallFilterUnsupportedError`` rather than being
ignored. Strings given for system date keys are read as ``{"$date": ...}`` literals.

``recall_filter_to_pgvector`` goes the other way so one Khora filter can be handed to any
LangChain store speaking that dialect; metadata fields lose their ``metadata.`` prefix,
dates become ISO-8601 strings, and what the dialect cannot express (whole-metadata
equality, list equality, the ``null`` shorthand, ``null`` or ``bool`` in ``$in``) raises
``RecallFilterUnsupportedError``.

``KhoraTranslator`` is a ``langchain_core.structured_query`` visitor, so self-querying
retrievers produce Khora filters.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from langchain_core.structured_query import (
    Comparator,
    Comparison,
    Operation,
    Operator,
    StructuredQuery,
    Visitor,
)

from khora_core.errors import RecallFilterUnsupportedError, RecallFilterValidationError
from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS

__all__ = ["KhoraTranslator", "pgvector_to_recall_filter", "recall_filter_to_pgvector"]

_SYSTEM_KEYS = frozenset(SYSTEM_DATE_KEYS) | frozenset(SYSTEM_STRING_KEYS)
_COMPARISONS = ("$eq", "$ne", "$lt", "$lte", "$gt", "$gte")
_LIST_OPS = ("$in", "$nin")
_TEXT_OPS = ("$like", "$ilike")
_LOGICAL_LIST = ("$and", "$or", "$nor")
_METADATA_PREFIX = "metadata."


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


def _khora_key(field: Any, path: str) -> str:
    if not isinstance(field, str) or not field:
        raise _invalid(path, "invalid_key", f"a filter field must be a non-empty string, got {field!r}")
    if field.startswith("$"):
        raise _invalid(path, "unknown_operator", f"{field} is not an operator allowed here")
    if field in _SYSTEM_KEYS or field == "metadata" or field.startswith(_METADATA_PREFIX):
        return field
    return _METADATA_PREFIX + field


def _is_date_literal(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"$date"}


def _to_khora_value(key: str, value: Any) -> Any:
    # System date keys only take dates; an ISO string from a LangChain filter is one.
    if key in SYSTEM_DATE_KEYS and isinstance(value, str):
        return {"$date": value}
    return value


def _field_ops_to_khora(key: str, ops: Mapping[str, Any], path: str) -> dict[str, Any]:
    if not ops:
        raise _invalid(path, "empty", "an operator object needs at least one operator")
    out: dict[str, Any] = {}
    for op, operand in ops.items():
        op_path = _join(path, op)
        if not isinstance(op, str) or not op.startswith("$"):
            raise _invalid(
                op_path,
                "mixed_operator_and_field",
                f"expected an operator such as $eq, got {op!r}; reach nested fields with a dotted key",
            )
        if op in _TEXT_OPS:
            raise RecallFilterUnsupportedError(
                f"{op} (pattern matching) on {path!r} has no RecallFilter equivalent; "
                "use $eq, $in or a range operator instead",
                key=key,
                backend="khora",
            )
        if op in _COMPARISONS:
            out[op] = _to_khora_value(key, operand)
        elif op in _LIST_OPS:
            if not isinstance(operand, (list, tuple)):
                raise _invalid(op_path, "invalid_operand", f"{op} takes a list, got {type(operand).__name__}")
            out[op] = [_to_khora_value(key, v) for v in operand]
        elif op == "$between":
            if not isinstance(operand, (list, tuple)) or len(operand) != 2:
                raise _invalid(op_path, "invalid_operand", "$between takes a [low, high] pair")
            if "$gte" in ops or "$lte" in ops:
                raise _invalid(op_path, "conflicting_operators", "$between cannot be combined with $gte/$lte")
            out["$gte"] = _to_khora_value(key, operand[0])
            out["$lte"] = _to_khora_value(key, operand[1])
        elif op == "$exists":
            if not isinstance(operand, bool):
                raise _invalid(op_path, "invalid_operand", "$exists takes true or false")
            out[op] = operand
        elif op == "$not":  # Khora's field-level $not: an operator object or an equality value
            if isinstance(operand, Mapping) and not _is_date_literal(operand):
                out[op] = _field_ops_to_khora(key, operand, op_path)
            else:
                out[op] = _to_khora_value(key, operand)
        else:
            raise _invalid(op_path, "unknown_operator", f"{op} is not a supported field operator")
    return out


def _node_to_khora(node: Any, path: str) -> dict[str, Any]:
    if isinstance(node, Mapping) and not isinstance(node, dict):
        node = dict(node)
    if not isinstance(node, dict):
        raise _invalid(path, "invalid_type", f"expected a filter object, got {type(node).__name__}")
    if not node:
        raise _invalid(path, "empty", "an empty filter object is not allowed here")
    fragments: list[dict[str, Any]] = []
    for key, value in node.items():
        key_path = _join(path, key) if isinstance(key, str) else path
        if key in _LOGICAL_LIST or key == "$not":
            fragments.append(_logical_to_khora(key, value, key_path))
            continue
        khora_key = _khora_key(key, key_path)
        if khora_key == "metadata":
            fragments.append({"metadata": value})  # whole-blob equality: Khora validates it
        elif isinstance(value, Mapping) and not _is_date_literal(value):
            fragments.append({khora_key: _field_ops_to_khora(khora_key, value, key_path)})
        else:
            fragments.append({khora_key: _to_khora_value(khora_key, value)})
    return _combine(fragments, field_keys=True)


def _logical_to_khora(op: str, value: Any, path: str) -> dict[str, Any]:
    if op == "$not":
        if isinstance(value, Mapping):
            return {"$not": _node_to_khora(value, path)}
        if isinstance(value, (list, tuple)) and value:
            # PGVector's list form negates each item: "none of them", which is $nor.
            return {"$nor": [_node_to_khora(v, _join(path, i)) for i, v in enumerate(value)]}
        raise _invalid(path, "invalid_operand", "$not takes a filter object or a non-empty list of them")
    if not isinstance(value, (list, tuple)) or not value:
        raise _invalid(path, "invalid_operand", f"{op} takes a non-empty list of filter objects")
    return {op: [_node_to_khora(v, _join(path, i)) for i, v in enumerate(value)]}


def pgvector_to_recall_filter(filter: Any) -> Any:
    """Translate a PGVector-dialect filter dict into a ``RecallFilter`` dict.

    Args:
        filter: a PGVector-style dict (see the module docstring), a Khora filter dict, a
            ``RecallFilter`` (returned unchanged) or ``None``/``{}`` (no filter).

    Returns:
        A dict for ``RecallFilter.parse``/``Khora.recall(filter=...)``, the ``RecallFilter``
        given, or ``None``.

    Raises:
        RecallFilterValidationError: the filter is malformed (``.errors`` locates it).
        RecallFilterUnsupportedError: an operator (``$like``, ``$ilike``) has no
            ``RecallFilter`` equivalent.
    """
    if filter is None or (isinstance(filter, Mapping) and not filter):
        return None
    if not isinstance(filter, Mapping):
        from khora_core.filters import RecallFilter

        if isinstance(filter, RecallFilter):
            return filter
    return _node_to_khora(filter, "")


# -- RecallFilter -> PGVector -------------------------------------------------------------


def _unsupported(path: str, message: str, key: str | None = None) -> RecallFilterUnsupportedError:
    return RecallFilterUnsupportedError(
        f"{path or '<root>'}: {message} in the PGVector filter dialect", key=key, backend="pgvector"
    )


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
    field = key[len(_METADATA_PREFIX) :] if key.startswith(_METADATA_PREFIX) else key
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

    The filter is validated first. Metadata fields drop their ``metadata.`` prefix (nested
    paths stay dotted), system keys keep their names, dates become ISO-8601 strings,
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
            express: whole-metadata equality, list/object equality, the ``null``
            shorthand, ``null``/``bool`` inside ``$in``/``$nin``.
    """
    from khora_core.filters import RecallFilter

    parsed = RecallFilter.parse(filter)
    source = filter if isinstance(filter, Mapping) else parsed.to_dict()
    return _node_to_pg(source, "") if source else None


# -- SelfQuery structured queries ----------------------------------------------------------


def _structured_value(value: Any) -> Any:
    # langchain's query constructor wraps dates as {"date": "YYYY-MM-DD", "type": "date"}.
    if isinstance(value, Mapping) and value.get("type") in ("date", "datetime"):
        return {"$date": str(value.get("date") or value.get("datetime"))}
    return value


class KhoraTranslator(Visitor):
    """Turn a ``langchain_core.structured_query`` tree into a ``RecallFilter`` dict.

    Attributes follow the same rules as ``pgvector_to_recall_filter`` (plain names are
    metadata fields unless they name a system key). ``contain`` and ``like`` are not
    allowed: ``RecallFilter`` has no pattern matching.
    """

    allowed_operators = (Operator.AND, Operator.OR, Operator.NOT)
    allowed_comparators = (
        Comparator.EQ,
        Comparator.NE,
        Comparator.GT,
        Comparator.GTE,
        Comparator.LT,
        Comparator.LTE,
        Comparator.IN,
        Comparator.NIN,
    )

    def visit_operation(self, operation: Operation) -> dict[str, Any]:
        self._validate_func(operation.operator)
        args = [arg.accept(self) for arg in operation.arguments]
        if operation.operator == Operator.NOT:
            return {"$not": args[0]} if len(args) == 1 else {"$nor": args}
        return {f"${operation.operator.value}": args}

    def visit_comparison(self, comparison: Comparison) -> dict[str, Any]:
        self._validate_func(comparison.comparator)
        value = comparison.value
        if isinstance(value, (list, tuple)):
            value = [_structured_value(v) for v in value]
        else:
            value = _structured_value(value)
        return _node_to_khora({comparison.attribute: {f"${comparison.comparator.value}": value}}, "")

    def visit_structured_query(self, structured_query: StructuredQuery) -> tuple[str, dict[str, Any]]:
        if structured_query.filter is None:
            return structured_query.query, {}
        return structured_query.query, {"filter": structured_query.filter.accept(self)}
