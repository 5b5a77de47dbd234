"""The storage records of one remembered document: its ``Document`` and its ``Chunk`` rows.

Every chunk carries the document's system fields (times, source, title, metadata, tags) so
filters and recency work on chunks alone.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from khora_core.ingest.chunking import TextSpan
from khora_core.ingest.inputs import RememberInput
from khora_core.models import Chunk, Document

__all__ = ["document_records"]


def document_records(
    inp: RememberInput,
    *,
    namespace_id: str,
    document_id: str,
    content_hash: str,
    created_at: datetime,
    chunk_ids: Sequence[str],
    spans: Sequence[TextSpan],
    vectors: Sequence[list[float]],
    contexts: Sequence[str | None] = (),
    core: Collection[int],
    needs_extraction: Collection[str],
) -> tuple[Document, list[Chunk]]:
    """The document and its chunks (``core``: indexes of skeleton-core chunks;
    ``needs_extraction``: ids of chunks whose extraction failed)."""
    system: dict[str, Any] = {
        "occurred_at": inp.occurred_at,
        "created_at": created_at,
        "source_timestamp": inp.source_timestamp,
        "source_type": inp.source_type,
        "source_name": inp.source_name,
        "source_url": inp.source_url,
        "external_id": inp.external_id,
        "content_type": inp.content_type,
        "source": inp.source,
        "title": inp.title,
        "metadata": inp.metadata,
        "tags": inp.tags,
    }
    document = Document(
        id=document_id, namespace_id=namespace_id, content=inp.content, content_hash=content_hash, **system
    )
    chunks = [
        Chunk(
            id=cid,
            namespace_id=namespace_id,
            document_id=document_id,
            index=i,
            content=span.text,
            start_char=span.start,
            end_char=span.end,
            token_count=span.token_count,
            embedding=vectors[i],
            needs_extraction=cid in needs_extraction,
            is_core=i in core,
            context=_searched_context(inp.context, contexts[i] if i < len(contexts) else None),
            **{**system, "metadata": dict(inp.metadata), "tags": list(inp.tags)},
        )
        for i, (cid, span) in enumerate(zip(chunk_ids, spans, strict=True))
    ]
    return document, chunks


def _searched_context(given: str | None, derived: str | None) -> str | None:
    """A chunk's stored context: the caller's ``context`` (keyword search only), then the
    title and heading path (``chunking.chunk_context``, also embedded)."""
    return "\n".join(p for p in (given, derived) if p) or None
