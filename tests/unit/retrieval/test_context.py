"""context_text rendering."""

from __future__ import annotations

from datetime import datetime, timezone

from khora_core.models import DocumentProjection, RecallChunk, RecallResult
from khora_core.retrieval.context import context_text

T = datetime(2024, 1, 15, 10, tzinfo=timezone.utc)


def _result() -> RecallResult:
    docs = [
        DocumentProjection(id="d1", namespace_id="ns", title="Q1 Planning", created_at=T, occurred_at=T),
        DocumentProjection(id="d2", namespace_id="ns", created_at=T),
    ]
    chunks = [
        RecallChunk(id="c1", document_id="d1", content="Meeting notes with John. ", score=1.0),
        RecallChunk(id="c2", document_id="d2", content="Budget approved.", score=0.5, title="Budget"),
        RecallChunk(id="c3", document_id="d2", content="Untitled text.", score=0.2, occurred_at=T),
    ]
    return RecallResult(query="q", namespace_id="ns", chunks=chunks, documents=docs)


def test_numbered_citations() -> None:
    text = context_text(_result())
    assert text == (
        "[1] Q1 Planning (2024-01-15) doc:d1\nMeeting notes with John.\n\n"
        "[2] Budget doc:d2\nBudget approved.\n\n"
        "[3] Untitled (2024-01-15) doc:d2\nUntitled text."
    )


def test_max_chunks_and_chars() -> None:
    assert context_text(_result(), max_chunks=1).count("[") == 1
    assert context_text(_result(), max_chunks=0) == ""
    capped = context_text(_result(), max_chars=60)
    assert capped.startswith("[1]") and "[2]" not in capped


def test_empty_result() -> None:
    assert context_text(RecallResult(query="q", namespace_id="ns")) == ""
