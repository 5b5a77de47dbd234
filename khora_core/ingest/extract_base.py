"""What an extractor returns, and the ``Extractor`` protocol both extractors implement."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = [
    "ChunkExtraction",
    "ExtractedEntity",
    "ExtractedRelation",
    "Extractor",
    "normalise_type",
]

_NON_WORD = re.compile(r"[^0-9A-Za-z]+")


def normalise_type(label: str) -> str:
    """``"works at"`` / ``"Works-At"`` -> ``"WORKS_AT"`` (entity and relationship types)."""
    return _NON_WORD.sub("_", label.strip()).strip("_").upper()


@dataclass
class ExtractedEntity:
    """An entity mention as the extractor saw it (not yet resolved)."""

    name: str
    type: str
    description: str | None = None


@dataclass
class ExtractedRelation:
    """A typed relation between two entity names found in the same chunk."""

    source: str
    target: str
    type: str
    description: str | None = None


@dataclass
class ChunkExtraction:
    """The extraction of one chunk.

    ``failed`` is True when the extractor gave up on the chunk (``error`` says why); the
    chunk is still stored and flagged ``needs_extraction``.
    """

    chunk_id: str
    entities: list[ExtractedEntity] = field(default_factory=list)
    relations: list[ExtractedRelation] = field(default_factory=list)
    failed: bool = False
    error: str | None = None


@runtime_checkable
class Extractor(Protocol):
    """Turns chunks into entities and relations."""

    async def extract(
        self,
        chunks: Sequence[tuple[str, str]],
        *,
        entity_types: Sequence[str] | None = None,
        relationship_types: Sequence[str] | None = None,
    ) -> list[ChunkExtraction]:
        """Extract from ``(chunk_id, text)`` pairs; one result per chunk, in order.

        Never raises for one bad chunk: that chunk comes back with ``failed=True``.
        ``entity_types`` / ``relationship_types`` restrict the vocabulary when given.
        """
        ...
