"""Parse and validate a recall-filter dict into the tree of ``tree.py``.

Validation collects every problem it can find and raises one
``RecallFilterValidationError`` whose ``errors`` entries carry a ``path`` (where in the
filter, e.g. ``$and[1].metadata.tier.$in[2]``), a machine ``code`` and a ``message``:

================== ==============================================================
code               meaning
================== ==============================================================
unknown_key        not a system key, ``metadata`` or ``metadata.<path>``
bad_path           a metadata path segment is empty, too long, or an invalid quoted segment
bad_operator       an unknown ``$`` operator, or one used where it cannot stand
operator_not_allowed  a known operator this key group does not take
bad_operand        an operand of the wrong shape or type
mixed_operator_keys   ``$`` operator keys and plain keys in one object
nested_operator    a ``$`` key inside an equality value (use a dotted key)
too_deep           nesting deeper than ``MAX_DEPTH``
too_large          more than ``MAX_LEAVES`` leaves or ``MAX_ITEMS`` items
naive_datetime     a datetime without a UTC offset
bad_date           a ``$date`` operand that is not ISO-8601 in the accepted grammar
================== ==============================================================

The size and depth limits are checked first by an iterative scan, so hostile input (a
depth-10,000 dict, a self-referencing dict, a million leaves) is rejected without deep
recursion; the recursive parse that follows is bounded by ``MAX_DEPTH``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import date, datetime, timezone
from typing import Any

from khora_core.errors import RecallFilterValidationError
from khora_core.filters.dates import DateParseError, datetime_to_us, parse_iso_operand, us_to_datetime
from khora_core.filters.tree import (
    BLOB_OPERATORS,
    COMPARISON_OPERATORS,
    DATE_KEY_OPERATORS,
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_LEAVES,
    METADATA_OPERATORS,
    RANGE_OPERATORS,
    STRING_KEY_OPERATORS,
    And,
    DateValue,
    Leaf,
    Node,
    Nor,
    Not,
    Or,
    PathSyntaxError,
    key_group,
    split_metadata_path,
)
from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS

__all__ = ["MAX_INT", "MAX_PATH_SEGMENTS", "MAX_SEGMENT_CHARS", "parse_node"]

#: Integers beyond +-2**53 cannot be compared exactly on every backend, so they are refused.
MAX_INT = 2**53
MAX_PATH_SEGMENTS = 16
#: Longest metadata key (path segment) a filter may name.
MAX_SEGMENT_CHARS = 1024
_SEGMENT = re.compile(r"[A-Za-z0-9_-]{1,128}", re.ASCII)
_ALLOWED = {
    "date": DATE_KEY_OPERATORS,
    "string": STRING_KEY_OPERATORS,
    "metadata": METADATA_OPERATORS,
    "blob": BLOB_OPERATORS,
}
_KEYS_HINT = (
    "use a system key ("
    + ", ".join(SYSTEM_DATE_KEYS + SYSTEM_STRING_KEYS)
    + "), 'metadata', or a dotted metadata path such as 'metadata.team.name'"
)
_BAD = object()  # sentinel: the operand was invalid (the error is already recorded)


def parse_node(obj: Any) -> Node:
    """Validate ``obj`` and return its tree.

    Raises:
        RecallFilterValidationError: with every problem found.
    """
    _check_limits(obj)
    parser = _Parser()
    node = parser.filter(obj, "")
    if parser.leaf_count > MAX_LEAVES:
        raise RecallFilterValidationError(
            [
                _error(
                    "",
                    "too_large",
                    f"the filter has {parser.leaf_count} constraints; the limit is {MAX_LEAVES}.",
                )
            ]
        )
    if parser.errors:
        raise RecallFilterValidationError(parser.errors)
    return node


def _error(path: str, code: str, message: str) -> dict[str, str]:
    return {"path": path, "code": code, "message": message}


def _check_limits(obj: Any) -> None:
    """Iteratively reject input nested deeper than MAX_DEPTH or holding more than MAX_ITEMS."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    items = 0
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            children = list(value.values())
        elif isinstance(value, (list, tuple)):
            children = list(value)
        else:
            continue
        if depth + 1 > MAX_DEPTH:
            raise RecallFilterValidationError(
                [_error("", "too_deep", f"the filter nests deeper than {MAX_DEPTH} objects and arrays.")]
            )
        items += len(children)
        if items > MAX_ITEMS:
            raise RecallFilterValidationError(
                [_error("", "too_large", f"the filter holds more than {MAX_ITEMS} values.")]
            )
        stack.extend((child, depth + 1) for child in children)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_operator_object(value: Any) -> bool:
    return isinstance(value, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in value)


class _Parser:
    def __init__(self) -> None:
        self.errors: list[dict[str, str]] = []
        self.leaf_count = 0

    def err(self, path: str, code: str, message: str) -> None:
        self.errors.append(_error(path, code, message))

    # -- filter level ------------------------------------------------------------------
    def filter(self, obj: Any, path: str) -> Node:
        if not isinstance(obj, Mapping):
            self.err(path, "bad_operand", f"a filter must be an object (dict), not {type(obj).__name__}.")
            return And(())
        children: list[Node] = []
        for key, value in obj.items():
            if not isinstance(key, str):
                self.err(path, "unknown_key", f"filter keys must be strings, not {type(key).__name__}.")
                continue
            kpath = _join(path, key)
            if key in ("$and", "$or", "$nor"):
                children.append(self.logical(key, value, kpath))
            elif key == "$not":
                children.append(Not(self.filter(value, kpath)))
            elif key.startswith("$"):
                self.operator_at_filter_level(key, kpath)
            else:
                node = self.field(key, value, kpath)
                if node is not None:
                    children.append(node)
        return children[0] if len(children) == 1 else And(tuple(children))

    def operator_at_filter_level(self, key: str, path: str) -> None:
        if key in COMPARISON_OPERATORS or key == "$date":
            self.err(
                path,
                "bad_operator",
                f"{key} compares one field; put it under a key, e.g. {{'metadata.score': {{'{key}': ...}}}}.",
            )
        else:
            self.err(
                path, "bad_operator", f"unknown operator {key}; filters combine with $and, $or, $nor, $not."
            )

    def logical(self, op: str, value: Any, path: str) -> Node:
        if not isinstance(value, (list, tuple)) or not value:
            self.err(path, "bad_operand", f"{op} takes a non-empty list of filters.")
            return And(())
        children = tuple(self.filter(item, f"{path}[{i}]") for i, item in enumerate(value))
        kinds: dict[str, type[And | Or | Nor]] = {"$and": And, "$or": Or, "$nor": Nor}
        return kinds[op](children)

    # -- field level -------------------------------------------------------------------
    def field(self, key: str, value: Any, path: str) -> Node | None:
        if not self.valid_key(key, path):
            return None
        return self.condition(key, value, path)

    def valid_key(self, key: str, path: str) -> bool:
        if key in SYSTEM_DATE_KEYS or key in SYSTEM_STRING_KEYS or key == "metadata":
            return True
        if not key.startswith("metadata."):
            hint = f" (did you mean 'metadata.{key}'?)" if _SEGMENT.fullmatch(key) else ""
            self.err(path, "unknown_key", f"unknown key {key!r}{hint}; {_KEYS_HINT}.")
            return False
        try:
            segments = split_metadata_path(key[len("metadata.") :])
        except PathSyntaxError as exc:
            self.err(
                path,
                "bad_path",
                f"metadata path {key!r} is invalid: {exc}; segments are 1-128 characters of "
                "A-Z, a-z, 0-9, '_' or '-', or any key as a JSON string such as \"page label\", "
                "joined by single dots.",
            )
            return False
        if len(segments) > MAX_PATH_SEGMENTS:
            self.err(path, "bad_path", f"metadata paths have at most {MAX_PATH_SEGMENTS} segments.")
            return False
        for segment in segments:
            if len(segment) > MAX_SEGMENT_CHARS:
                self.err(
                    path, "bad_path", f"metadata path segments have at most {MAX_SEGMENT_CHARS} characters."
                )
                return False
            if not self.safe_text(segment, path):
                return False
        return True

    def condition(self, key: str, value: Any, path: str) -> Node:
        """A field condition: an operator object, a ``$date`` literal or an equality value."""
        if not _is_operator_object(value) or set(value) == {"$date"}:
            return self.leaf(key, "$eq", value, path)
        if not all(isinstance(k, str) and k.startswith("$") for k in value):
            self.err(
                path,
                "mixed_operator_keys",
                "an object holds either $ operators or plain keys, not both; reach nested fields "
                "with a dotted key such as 'metadata.team.name'.",
            )
            return And(())
        allowed = _ALLOWED[key_group(key)]
        nodes: list[Node] = []
        for op, operand in value.items():
            opath = f"{path}.{op}"
            if op not in COMPARISON_OPERATORS and op != "$not":
                detail = {
                    "$and": "combines filters; use it at filter level",
                    "$or": "combines filters; use it at filter level",
                    "$nor": "combines filters; use it at filter level",
                    "$date": "is a date literal; use it as an operand, e.g. {'$gte': {'$date': ...}}",
                }.get(op, "is unknown")
                self.err(opath, "bad_operator", f"{op} {detail}; {key!r} takes {', '.join(allowed)}.")
            elif op not in allowed:
                self.err(
                    opath,
                    "operator_not_allowed",
                    f"{key!r} does not take {op}; it takes {', '.join(allowed)}.",
                )
            elif op == "$not":
                nodes.append(Not(self.condition(key, operand, opath)))
            else:
                nodes.append(self.leaf(key, op, operand, opath))
        return nodes[0] if len(nodes) == 1 else And(tuple(nodes))

    def leaf(self, key: str, op: str, operand: Any, path: str) -> Node:
        self.leaf_count += 1
        group = key_group(key)
        if op == "$exists":
            if not isinstance(operand, bool):
                self.err(path, "bad_operand", "$exists takes true or false.")
                return And(())
            return Leaf(key, op, operand)
        if op in ("$in", "$nin"):
            if not isinstance(operand, (list, tuple)):
                self.err(path, "bad_operand", f"{op} takes a list of values.")
                return And(())
            values = [self.operand(group, item, f"{path}[{i}]", "member") for i, item in enumerate(operand)]
            return Leaf(key, op, values) if _BAD not in values else And(())
        kind = "range" if op in RANGE_OPERATORS else "equality"
        value = self.operand(group, operand, path, kind)
        return Leaf(key, op, value) if value is not _BAD else And(())

    # -- operands ----------------------------------------------------------------------
    def operand(self, group: str, value: Any, path: str, kind: str) -> Any:
        """Convert and type-check one operand; ``kind`` is equality, range or member."""
        if isinstance(value, Mapping) and "$date" in value:
            if len(value) != 1:
                self.err(path, "bad_operand", "{'$date': ...} takes no other keys.")
                return _BAD
            converted: Any = self.date_text(value["$date"], path)
        elif isinstance(value, (datetime, date)):
            converted = self.date_object(value, path)
        else:
            converted = self.literal(value, path)
        if converted is _BAD:
            return _BAD
        problem = _type_problem(group, converted, kind)
        if problem:
            self.err(path, "bad_operand", problem)
            return _BAD
        return converted

    def date_text(self, text: Any, path: str) -> Any:
        if not isinstance(text, str):
            self.err(path, "bad_date", "$date takes an ISO-8601 string such as '2026-01-01T00:00:00Z'.")
            return _BAD
        try:
            return DateValue(parse_iso_operand(text))
        except DateParseError as exc:
            self.err(path, exc.code, str(exc))
            return _BAD

    def date_object(self, value: date, path: str) -> Any:
        if not isinstance(value, datetime):
            value = datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
        if value.tzinfo is None or value.utcoffset() is None:
            self.err(
                path,
                "naive_datetime",
                f"{value.isoformat()} has no timezone; pass an aware datetime such as "
                "datetime(2026, 1, 1, tzinfo=timezone.utc).",
            )
            return _BAD
        us = datetime_to_us(value)
        try:
            us_to_datetime(us)
        except OverflowError:
            self.err(path, "bad_date", f"{value.isoformat()} is outside years 0001-9999 in UTC.")
            return _BAD
        return DateValue(us)

    def literal(self, value: Any, path: str) -> Any:
        """Copy a JSON literal, rejecting operators, non-JSON types and unsafe strings."""
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            if abs(value) > MAX_INT:
                self.err(path, "bad_operand", f"integers must lie within +-{MAX_INT} to compare exactly.")
                return _BAD
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                self.err(path, "bad_operand", "numbers must be finite (no NaN or infinity).")
                return _BAD
            return value
        if isinstance(value, str):
            return value if self.safe_text(value, path) else _BAD
        if isinstance(value, (list, tuple)):
            items = [self.literal(v, f"{path}[{i}]") for i, v in enumerate(value)]
            return _BAD if _BAD in items else items
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            ok = True
            for k, v in value.items():
                if not isinstance(k, str) or not self.safe_text(k, path):
                    if not isinstance(k, str):
                        self.err(path, "bad_operand", "object keys inside a value must be strings.")
                    ok = False
                elif k.startswith("$"):
                    self.err(
                        _join(path, k),
                        "nested_operator",
                        f"{k} inside an equality value is not allowed; put operators directly under "
                        "a key and reach nested fields with a dotted key such as 'metadata.team.name'.",
                    )
                    ok = False
                else:
                    item = self.literal(v, _join(path, k))
                    ok = ok and item is not _BAD
                    out[k] = item
            return out if ok else _BAD
        if isinstance(value, (datetime, date)):
            self.err(
                path, "bad_operand", "a date inside a list or object; store and compare it as an ISO string."
            )
            return _BAD
        self.err(path, "bad_operand", f"{type(value).__name__} is not a JSON value.")
        return _BAD

    def safe_text(self, text: str, path: str) -> bool:
        if "\x00" in text:
            self.err(path, "bad_operand", "strings cannot contain the NUL character.")
            return False
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            self.err(path, "bad_operand", "strings must be valid Unicode (no lone surrogates).")
            return False
        return True


def _type_problem(group: str, value: Any, kind: str) -> str | None:
    """Why ``value`` cannot be an operand of ``kind`` for ``group``, or None when it can."""
    is_container = isinstance(value, (list, dict))
    if kind == "range" and (value is None or isinstance(value, bool) or is_container):
        return "range operators compare a number, a string or a date."
    if kind == "member" and is_container:
        return "$in/$nin members are scalars (null, booleans, numbers, strings or dates)."
    if group == "string":
        if isinstance(value, (str, list)) or value is None:
            return None
        return "string keys compare with strings (or null)."
    if group == "date":
        if isinstance(value, (DateValue, list)) or value is None:
            return None
        return "date keys compare with aware datetimes or {'$date': '<ISO-8601>'} (or null)."
    if group == "blob" and isinstance(value, DateValue):
        return "the whole metadata object compares with a JSON object."
    return None
