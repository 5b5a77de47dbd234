"""What the recall tool hands an agent, and the tools' argument schemas."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from khora_core.models import DocumentProjection, RecallChunk, RecallResult
from khora_integrations.langchain.tools import RecallInput, RememberInput, format_recall

T = datetime(2026, 3, 1, tzinfo=timezone.utc)


def _result(n: int, *, abstain: bool) -> RecallResult:
    return RecallResult(
        query="q",
        namespace_id="ns",
        chunks=[
            RecallChunk(id=f"c{i}", document_id=f"d{i}", content=f"passage {i}", score=1.0 - i / 10)
            for i in range(n)
        ],
        documents=[
            DocumentProjection(id=f"d{i}", namespace_id="ns", title=f"T{i}", created_at=T, occurred_at=T)
            for i in range(n)
        ],
        engine_info={"abstention_signals": {"should_abstain": abstain}},
    )


def test_numbered_cited_passages_capped_at_k():
    text = format_recall(_result(3, abstain=False), max_chunks=2)
    assert text.startswith("[1] T0 (2026-03-01) doc:d0\npassage 0")
    assert "[2] T1" in text and "[3]" not in text


def test_abstention_and_empty_results_are_said_plainly():
    assert format_recall(_result(1, abstain=True), max_chunks=5).startswith("Memory has little on this")
    assert format_recall(_result(0, abstain=True), max_chunks=5) == "Nothing in memory matches that."


def test_argument_schemas():
    assert RecallInput(query="x").k == 5
    with pytest.raises(ValidationError):
        RecallInput(query="x", k=0)
    with pytest.raises(ValidationError):
        RememberInput()  # type: ignore[call-arg]
