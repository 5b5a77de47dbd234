"""``RecallFilter``: the public, validated recall filter.

``RecallFilter.parse`` validates a filter dict (``parse.py``) into the tree of ``tree.py``;
``matches`` evaluates it in memory (``evaluate.py``); the backend compilers read its tree.
The tree's node types, operators and limits are re-exported here for callers that match on
them. The grammar, the type semantics and the limits are documented in ``docs/filters.md``
and in ``evaluate.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

from khora_core.filters.evaluate import evaluate
from khora_core.filters.parse import parse_node
from khora_core.filters.tree import (
    COMPARISON_OPERATORS,
    DATE_KEY_OPERATORS,
    LOGICAL_OPERATORS,
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_LEAVES,
    METADATA_OPERATORS,
    STRING_KEY_OPERATORS,
    And,
    DateValue,
    Leaf,
    Node,
    Nor,
    Not,
    Or,
    distinct_keys,
    iter_leaves,
    key_group,
    metadata_path,
    node_to_dict,
)

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
