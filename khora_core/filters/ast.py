"""The recall-filter tree and the public ``RecallFilter`` wrapper.

A filter parses (``parse.py``) into a small immutable tree:

* ``Leaf(key, op, value)``: one constraint on one key, ``op`` one of ``$eq $ne $gt $gte $lt
  $lte $in $nin $exists``;
* ``And`` / ``Or`` / ``Nor`` (tuples of children) and ``Not`` (one child).

Keys are a system date key, a system string key, ``"metadata"`` (the whole blob) or a dotted
metadata path such as ``"metadata.team.name"``. Date operands are ``DateValue`` (epoch
microseconds, UTC); every other operand is plain JSON data. The grammar, the type semantics
and the limits are documented in ``docs/filters.md`` and in ``evaluate.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Union, overload

from khora_core.filters.dates import us_to_datetime, us_to_iso
from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
    from pydantic_core import CoreSchema

__all__ = [
    "COMPARISON_OPERATORS",
    "DATE_KEY_OPERATORS",
    "LOGICAL_OPERATORS",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_LEAVES",
    "METADATA_OPERATORS",
    "STRING_KEY_OPERATORS",
    "And",
    "DateValue",
    "Leaf",
    "Node",
    "Nor",
    "Not",
    "Or",
    "RecallFilter",
    "key_group",
    "metadata_path",
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


def metadata_path(key: str) -> tuple[str, ...]:
    """``"metadata.team.name"`` -> ``("team", "name")``; ``()`` for any other key."""
    return tuple(key.split(".")[1:]) if key.startswith("metadata.") else ()


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


class RecallFilter:
    """A validated recall filter.

    Build one with ``RecallFilter.parse(dict)`` or with the helpers in
    ``khora_core.filters.builders`` (``eq("source_name", "linear") & gte(...)``). A
    ``RecallFilter`` is immutable; ``&``, ``|`` and ``~`` return new filters.

    Example:
        >>> f = RecallFilter.parse({"source_name": "linear", "metadata.tier": {"$in": ["gold"]}})
        >>> f.leaf_keys()
        ['source_name', 'metadata.tier']
    """

    __slots__ = ("_root",)

    def __init__(self, root: Node) -> None:
        """Wrap an already-validated tree. Use ``parse`` for user input."""
        self._root = root

    @overload
    @classmethod
    def parse(cls, obj: None) -> None: ...

    @overload
    @classmethod
    def parse(cls, obj: RecallFilter | Mapping[str, Any]) -> RecallFilter: ...

    @classmethod
    def parse(cls, obj: RecallFilter | Mapping[str, Any] | None) -> RecallFilter | None:
        """Validate a filter.

        Args:
            obj: a filter dict, a ``RecallFilter`` (returned as is) or ``None`` (no filter).

        Returns:
            The filter, or ``None`` for ``None``.

        Raises:
            RecallFilterValidationError: the filter is malformed; ``.errors`` lists every
                problem found as ``{"path", "code", "message"}``.
        """
        if obj is None:
            return None
        if isinstance(obj, RecallFilter):
            return obj
        from khora_core.filters.parse import parse_node

        return cls(parse_node(obj))

    @property
    def root(self) -> Node:
        """The parsed tree."""
        return self._root

    def leaves(self) -> list[Leaf]:
        """Every constraint leaf, in document order."""
        return list(iter_leaves(self._root))

    def leaf_keys(self) -> list[str]:
        """Distinct keys of the constraint leaves, in first-appearance order."""
        return distinct_keys([self._root])

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether a record satisfies the filter (see ``evaluate.py`` for the semantics).

        Args:
            record: ``Chunk.filter_record()``: system keys plus ``"metadata"``.
        """
        from khora_core.filters.evaluate import evaluate

        return evaluate(self._root, record)

    def to_dict(self) -> dict[str, Any]:
        """Canonical, JSON-serialisable dict form (dates as ``{"$date": ...}``)."""
        return node_to_dict(self._root)

    def _combine(self, other: object, kind: type[And] | type[Or]) -> RecallFilter:
        if not isinstance(other, RecallFilter):
            return NotImplemented
        children: list[Node] = []
        for root in (self._root, other._root):
            children.extend(root.children if isinstance(root, kind) else (root,))
        # Re-parse so the combined filter is checked against the size and depth limits.
        return RecallFilter.parse(node_to_dict(kind(tuple(children))))

    def __and__(self, other: object) -> RecallFilter:
        return self._combine(other, And)

    def __or__(self, other: object) -> RecallFilter:
        return self._combine(other, Or)

    def __invert__(self) -> RecallFilter:
        return RecallFilter.parse({"$not": self.to_dict()})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RecallFilter) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True, default=str))

    def __repr__(self) -> str:
        return f"RecallFilter({json.dumps(self.to_dict(), ensure_ascii=False)})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """Let pydantic models hold a ``RecallFilter`` field (dicts are parsed)."""
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            cls.parse,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda f: f.to_dict()),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        """A filter is a JSON object (its grammar is validated by ``parse``, not the schema)."""
        return {"type": "object", "description": "A Khora recall filter (see docs/filters.md)."}
