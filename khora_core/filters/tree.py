"""The recall-filter tree: operators, limits, node types and the helpers that walk them.

A filter parses (``parse.py``) into a small immutable tree:

* ``Leaf(key, op, value)``: one constraint on one key, ``op`` one of ``$eq $ne $gt $gte $lt
  $lte $in $nin $exists``;
* ``And`` / ``Or`` / ``Nor`` (tuples of children) and ``Not`` (one child).

Keys are a system date key, a system string key, ``"metadata"`` (the whole blob) or a dotted
metadata path such as ``"metadata.team.name"`` (a segment that is not ``[A-Za-z0-9_-]+`` is
written as a JSON string literal: ``'metadata."page label"'``). Date operands are ``DateValue`` (epoch
microseconds, UTC); every other operand is plain JSON data. This module imports no other
filter module except ``dates.py``, so the parser, the evaluator and the compilers all build
on it without cycles.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Union

from khora_core.filters.dates import us_to_datetime, us_to_iso
from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS

__all__ = [
    "BLOB_OPERATORS",
    "COMPARISON_OPERATORS",
    "DATE_KEY_OPERATORS",
    "LOGICAL_OPERATORS",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_LEAVES",
    "METADATA_OPERATORS",
    "RANGE_OPERATORS",
    "SIMPLE_SEGMENT",
    "STRING_KEY_OPERATORS",
    "And",
    "DateValue",
    "Leaf",
    "Node",
    "Nor",
    "Not",
    "Or",
    "PathSyntaxError",
    "distinct_keys",
    "iter_leaves",
    "key_group",
    "metadata_key",
    "metadata_path",
    "node_to_dict",
    "quote_segment",
    "split_metadata_path",
]

#: Nesting depth limit: objects and arrays nested inside each other, counted together.
MAX_DEPTH = 32
#: Limit on constraint leaves in one filter.
MAX_LEAVES = 1000
#: Limit on JSON items (object entries plus array elements) anywhere in one filter.
MAX_ITEMS = 10_000

LOGICAL_OPERATORS = ("$and", "$or", "$nor", "$not")
COMPARISON_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
RANGE_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
DATE_KEY_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$not")
STRING_KEY_OPERATORS = ("$eq", "$ne", "$in", "$nin", "$exists", "$not")
METADATA_OPERATORS = (*COMPARISON_OPERATORS, "$not")
#: Operators on the whole ``metadata`` blob: JSON equality only.
BLOB_OPERATORS = ("$eq", "$ne", "$not")


@dataclass(frozen=True)
class DateValue:
    """A date operand: microseconds since the Unix epoch, UTC."""

    us: int

    def to_datetime(self) -> datetime:
        """The aware UTC datetime (what PostgreSQL and Neo4j bind)."""
        return us_to_datetime(self.us)

    def to_json(self) -> dict[str, str]:
        """``{"$date": "<ISO-8601>Z"}``."""
        return {"$date": us_to_iso(self.us)}


@dataclass(frozen=True)
class Leaf:
    """One constraint: ``key`` compared by ``op`` with ``value``.

    ``value`` is JSON data or a ``DateValue`` for ``$eq``/``$ne``/range operators, a list
    of scalars for ``$in``/``$nin`` and a bool for ``$exists``.
    """

    key: str
    op: str
    value: Any

    @property
    def group(self) -> str:
        """``"date"``, ``"string"``, ``"blob"`` (whole metadata) or ``"metadata"``."""
        return key_group(self.key)

    @property
    def path(self) -> tuple[str, ...]:
        """Metadata path segments (empty for the whole blob and for system keys)."""
        return metadata_path(self.key)


@dataclass(frozen=True)
class And:
    """All children match (no children: matches everything)."""

    children: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """At least one child matches."""

    children: tuple[Node, ...]


@dataclass(frozen=True)
class Nor:
    """No child matches."""

    children: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    """The child does not match."""

    child: Node


Node = Union[Leaf, And, Or, Nor, Not]


def key_group(key: str) -> str:
    """Which key group a (valid) key belongs to: ``date``, ``string``, ``blob`` or ``metadata``."""
    if key in SYSTEM_DATE_KEYS:
        return "date"
    if key in SYSTEM_STRING_KEYS:
        return "string"
    return "blob" if key == "metadata" else "metadata"


#: A bare metadata path segment; any other key text is written as a quoted segment.
SIMPLE_SEGMENT = re.compile(r"[A-Za-z0-9_-]{1,128}", re.ASCII)
_DECODER = json.JSONDecoder()


class PathSyntaxError(ValueError):
    """A metadata path that does not follow the segment grammar (``parse.py`` reports it)."""


@functools.lru_cache(maxsize=4096)
def split_metadata_path(text: str) -> tuple[str, ...]:
    """The segments of a path written after ``metadata.``.

    A segment is bare (``team``) or a JSON string literal (``"page label"``, ``"a.b"``,
    ``"say \\"hi\\""``), so any key a user can store can be named; segments are joined by
    single dots.

    Raises:
        PathSyntaxError: an empty segment, an unterminated or invalid quoted segment, or
            text after a quoted segment other than a dot.
    """
    segments: list[str] = []
    i = 0
    while True:
        if text.startswith('"', i):
            try:
                segment, i = _DECODER.raw_decode(text, i)
            except json.JSONDecodeError as exc:
                raise PathSyntaxError(f"invalid quoted segment at character {i}: {exc.msg}") from None
            if not segment:
                raise PathSyntaxError("a quoted segment cannot be empty")
        else:
            end = text.find(".", i)
            end = len(text) if end < 0 else end
            segment = text[i:end]
            if not segment:
                raise PathSyntaxError("empty segment (two dots in a row, or a leading or trailing dot)")
            if not SIMPLE_SEGMENT.fullmatch(segment):
                raise PathSyntaxError(f"segment {segment!r} must be quoted as {quote_segment(segment)}")
            i = end
        segments.append(segment)
        if i == len(text):
            return tuple(segments)
        if text[i] != ".":
            raise PathSyntaxError(f"expected '.' after a quoted segment at character {i}")
        i += 1


def quote_segment(segment: str) -> str:
    """``segment`` as written in a key: bare when it is simple, else a JSON string literal."""
    if SIMPLE_SEGMENT.fullmatch(segment):
        return segment
    return json.dumps(segment, ensure_ascii=False)


def metadata_key(*segments: str) -> str:
    """The filter key for a metadata path: ``metadata_key("a.b")`` -> ``'metadata."a.b"'``."""
    return "metadata." + ".".join(quote_segment(s) for s in segments)


def metadata_path(key: str) -> tuple[str, ...]:
    """``"metadata.team.name"`` -> ``("team", "name")``; ``()`` for any other key.

    Quoted segments come back unquoted: ``'metadata."page label"'`` -> ``("page label",)``.
    The key must be valid (``parse.py`` checks it).
    """
    if not key.startswith("metadata."):
        return ()
    return split_metadata_path(key[len("metadata.") :])


def iter_leaves(node: Node) -> Iterator[Leaf]:
    """Leaves in document order (depth is bounded by ``MAX_DEPTH``, so recursion is safe)."""
    if isinstance(node, Leaf):
        yield node
    elif isinstance(node, Not):
        yield from iter_leaves(node.child)
    else:
        for child in node.children:
            yield from iter_leaves(child)


def distinct_keys(nodes: list[Node] | tuple[Node, ...]) -> list[str]:
    """Distinct leaf keys of ``nodes`` in first-appearance order."""
    seen: dict[str, None] = {}
    for node in nodes:
        for leaf in iter_leaves(node):
            seen.setdefault(leaf.key, None)
    return list(seen)


def _value_to_json(value: Any) -> Any:
    if isinstance(value, DateValue):
        return value.to_json()
    if isinstance(value, list):
        return [_value_to_json(v) for v in value]
    return value


def node_to_dict(node: Node) -> dict[str, Any]:
    """The canonical dict form of a node; ``RecallFilter.parse`` reads it back unchanged."""
    if isinstance(node, Leaf):
        return {node.key: {node.op: _value_to_json(node.value)}}
    if isinstance(node, Not):
        return {"$not": node_to_dict(node.child)}
    if isinstance(node, And) and not node.children:
        return {}
    name = {And: "$and", Or: "$or", Nor: "$nor"}[type(node)]
    return {name: [node_to_dict(c) for c in node.children]}
