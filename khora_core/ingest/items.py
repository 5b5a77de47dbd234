"""One ``remember`` item on its way through ``IngestPipeline``, and the batch plumbing
around it: windows of items, and the error an item ends with."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime

from khora_core.errors import KhoraError
from khora_core.ingest.chunking import TextSpan
from khora_core.ingest.extract_base import ChunkExtraction
from khora_core.ingest.graph_build import GraphParts
from khora_core.ingest.inputs import RememberInput
from khora_core.models import Entity, RememberResult

__all__ = ["BatchOutcome", "WorkItem", "as_khora_error", "windows"]

logger = logging.getLogger("khora.ingest")

#: One remember_batch result: what was stored, or why the item was not.
BatchOutcome = RememberResult | KhoraError


@dataclass
class WorkItem:
    """An item's state between the pipeline's stages (dropped once it is written)."""

    index: int
    inp: RememberInput
    hash: str
    document_id: str
    created_at: datetime
    spans: list[TextSpan] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)
    contexts: list[str | None] = field(default_factory=list)  # embedded and searched with each chunk
    vectors: list[list[float]] = field(default_factory=list)
    after: asyncio.Event | None = None  # an earlier item with the same external_id
    # Filled by the per-window stages, dropped once the item is written.
    core: list[int] | None = None  # set early when the skeleton spans the batch
    extractions: dict[str, ChunkExtraction] = field(default_factory=dict)
    candidates: list[str] = field(default_factory=list)
    stored: list[Entity] = field(default_factory=list)
    graph: GraphParts | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: BatchOutcome | None = None


def windows(works: list[WorkItem], chunks: int) -> list[list[WorkItem]]:
    """Consecutive items holding about ``chunks`` chunks each (an item is never split)."""
    out: list[list[WorkItem]] = []
    current: list[WorkItem] = []
    size = 0
    for work in works:
        if current and size + len(work.spans) > chunks:
            out.append(current)
            current, size = [], 0
        current.append(work)
        size += len(work.spans)
    if current:
        out.append(current)
    return out


def as_khora_error(exc: Exception, index: int) -> KhoraError:
    """The item's error as a KhoraError (unexpected exceptions are wrapped, cause kept)."""
    if isinstance(exc, KhoraError):
        return exc
    logger.error("remember failed for item %d", index, exc_info=exc)
    wrapped = KhoraError(f"remember failed: {type(exc).__name__}: {exc}")
    wrapped.__cause__ = exc
    return wrapped
