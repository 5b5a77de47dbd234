"""``context_text``: a recall result as a flat, cited context string for an LLM prompt."""

from __future__ import annotations

from datetime import datetime

from khora_core.models import DocumentProjection, RecallResult

__all__ = ["context_text"]


def _date(value: datetime | None) -> str | None:
    return value.date().isoformat() if value else None


def context_text(result: RecallResult, max_chunks: int | None = None, *, max_chars: int | None = None) -> str:
    """Render a recall result as numbered, cited passages.

    Each chunk becomes one block::

        [1] Q1 Planning (2024-01-15) doc:7f3a...
        Meeting notes from Q1 planning with John

    The header holds the title (chunk's, else its document's, else "Untitled"), the event
    date (``occurred_at``, else the document's ``occurred_at``) and the document id, so an
    answer can cite ``[n]`` and the caller can map it back to ``result.documents``.

    Args:
        result: what ``recall()`` returned.
        max_chunks: at most this many chunks, best first (None: all).
        max_chars: stop before the text would exceed this many characters (None: no cap);
            the first block is always included.

    Returns:
        The context string; empty when the result has no chunks.
    """
    docs: dict[str, DocumentProjection] = {d.id: d for d in result.documents}
    chunks = result.chunks if max_chunks is None else result.chunks[: max(0, max_chunks)]
    blocks: list[str] = []
    size = 0
    for n, chunk in enumerate(chunks, start=1):
        doc = docs.get(chunk.document_id)
        title = chunk.title or (doc.title if doc else None) or "Untitled"
        when = _date(chunk.occurred_at) or _date(doc.occurred_at if doc else None)
        header = f"[{n}] {title}" + (f" ({when})" if when else "") + f" doc:{chunk.document_id}"
        block = f"{header}\n{chunk.content.strip()}"
        if max_chars is not None and blocks and size + len(block) + 2 > max_chars:
            break
        blocks.append(block)
        size += len(block) + 2
    return "\n\n".join(blocks)
