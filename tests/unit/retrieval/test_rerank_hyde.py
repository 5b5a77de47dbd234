"""Reranking and HyDE switches (no model downloads, no network)."""

from __future__ import annotations

from typing import Any

import pytest

from khora_core.errors import ConfigError, LLMError
from khora_core.retrieval import rerank
from khora_core.retrieval.hyde import hypothetical_passage, should_use_hyde
from khora_core.retrieval.router import QueryComplexity


async def test_cross_encoder_skipped_under_five() -> None:
    # Skipped before any model is touched, so a bogus name is fine here.
    assert await rerank.cross_encoder_scores("q", ["a", "b", "c", "d"], model_name="no/such-model") is None


@pytest.mark.slow  # imports sentence-transformers (~10 s on a small machine)
async def test_unloadable_reranker_names_the_setting(tmp_path: Any) -> None:
    missing = str(tmp_path / "no-such-cross-encoder")
    with pytest.raises(ConfigError) as err:
        await rerank.cross_encoder_scores("q", ["a"] * 5, model_name=missing)
    assert err.value.setting == "KHORA_QUERY_RERANKER_MODEL"
    assert "KHORA_QUERY_RERANKER_MODEL" in str(err.value)


class ScriptedLLM:
    def __init__(self, answer: Any = None, error: Exception | None = None) -> None:
        self.answer, self.error = answer, error
        self.schema: dict[str, Any] | None = None

    async def complete_json(self, prompt: str, *, schema: dict[str, Any] | None = None) -> Any:
        self.schema = schema
        if self.error:
            raise self.error
        return self.answer

    async def complete_text(self, prompt: str, *, max_tokens: int | None = None) -> str:
        if self.error:
            raise self.error
        return self.answer


async def test_llm_rerank_orders_and_completes() -> None:
    order = await rerank.llm_rerank("q", ["a", "b", "c"], ScriptedLLM({"ranking": [3, 1, 3, 9]}))  # type: ignore[arg-type]
    assert order == [2, 0, 1]
    assert await rerank.llm_rerank("q", ["a", "b"], ScriptedLLM(error=LLMError("x"))) is None  # type: ignore[arg-type]
    assert await rerank.llm_rerank("q", ["a", "b"], ScriptedLLM({"oops": 1})) is None  # type: ignore[arg-type]


async def test_llm_rerank_schema_asks_for_every_passage_number_once() -> None:
    llm = ScriptedLLM({"ranking": [2, 1, 3]})
    assert await rerank.llm_rerank("q", ["a", "b", "c"], llm) == [1, 0, 2]  # type: ignore[arg-type]
    assert llm.schema is not None
    ranking = llm.schema["properties"]["ranking"]
    assert ranking["items"]["enum"] == [1, 2, 3]
    assert ranking["minItems"] == ranking["maxItems"] == 3


@pytest.mark.parametrize(
    ("setting", "complexity", "temporal", "has_llm", "expected"),
    [
        ("auto", QueryComplexity.COMPLEX, False, True, True),
        ("auto", QueryComplexity.SIMPLE, True, True, True),
        ("auto", QueryComplexity.SIMPLE, False, True, False),
        ("auto", QueryComplexity.COMPLEX, True, False, False),
        ("always", QueryComplexity.SIMPLE, False, True, True),
        ("never", QueryComplexity.COMPLEX, True, True, False),
    ],
)
def test_should_use_hyde(
    setting: str, complexity: QueryComplexity, temporal: bool, has_llm: bool, expected: bool
) -> None:
    assert should_use_hyde(setting, complexity=complexity, is_temporal=temporal, has_llm=has_llm) is expected


async def test_hypothetical_passage() -> None:
    assert await hypothetical_passage("q", ScriptedLLM("  A passage.  ")) == "A passage."  # type: ignore[arg-type]
    assert await hypothetical_passage("q", ScriptedLLM("   ")) is None  # type: ignore[arg-type]
    assert await hypothetical_passage("q", ScriptedLLM(error=LLMError("down"))) is None  # type: ignore[arg-type]


async def test_hypothetical_passage_rejects_the_prompt_echoed_back() -> None:
    echo = "Write a short passage (3-5 sentences) that would answer the question below, as it might"
    assert await hypothetical_passage("Who?", ScriptedLLM(echo + " appear in notes.")) is None  # type: ignore[arg-type]
    assert await hypothetical_passage("Who?", ScriptedLLM("Sure.\nQuestion: Who?\nPassage: x")) is None  # type: ignore[arg-type]
    kept = "Ana wrote the question: who owns it? Nobody knows."
    assert await hypothetical_passage("Who?", ScriptedLLM(kept)) == kept  # type: ignore[arg-type]
