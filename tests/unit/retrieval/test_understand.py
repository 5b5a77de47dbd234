"""Query understanding: heuristics, and the LLM path with its fallbacks.

The LLM here is a scripted stand-in object (no network): these tests check how the answer
is validated and when the heuristics take over, not what a model says.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from khora_core.errors import LLMError, RateLimitError
from khora_core.retrieval.router import QueryComplexity
from khora_core.retrieval.understand import extract_mentions, understand

NOW = datetime(2024, 6, 12, tzinfo=timezone.utc)


class ScriptedLLM:
    def __init__(self, answer: Any = None, error: Exception | None = None) -> None:
        self.answer, self.error, self.prompts = answer, error, []

    async def complete_json(self, prompt: str, *, schema: dict[str, Any] | None = None) -> Any:
        self.prompts.append(prompt)
        if self.error:
            raise self.error
        return self.answer


def test_mentions() -> None:
    assert extract_mentions("How are Alice and Bob connected?") == ["Alice", "Bob"]
    assert extract_mentions('Does Alice Chen work at "Globex Industries"?') == [
        "Alice Chen",
        "Globex Industries",
    ]
    assert extract_mentions("What did the NASA team say in March 2024?") == ["NASA"]
    assert extract_mentions("What is Alice's role?") == ["Alice"]
    assert extract_mentions("What is the company policy?") == []
    assert extract_mentions("Who is the CEO?") == []


async def test_heuristic_understanding() -> None:
    u = await understand("What changed at Acme since March?", now=NOW)
    assert u.source == "heuristic" and u.fallback_reason is None
    assert u.entity_mentions == ["Acme"]
    assert [r.kind for r in u.temporal_refs] == ["since"]
    assert u.is_temporal and not u.wants_recency
    assert u.complexity is QueryComplexity.SIMPLE and u.intent == "temporal"


async def test_llm_not_used_unless_asked() -> None:
    llm = ScriptedLLM({"intent": "lookup", "entities": [], "complexity": "simple"})
    await understand("Who is Alice?", llm=llm, use_llm=False, now=NOW)  # type: ignore[arg-type]
    assert llm.prompts == []


async def test_llm_answer_is_used() -> None:
    llm = ScriptedLLM(
        {
            "intent": "relationship",
            "entities": ["Alice", "Acme Corp"],
            "temporal": [{"text": "in 2023", "start": "2023-01-01T00:00:00Z", "end": "2024-01-01T00:00:00Z"}],
            "complexity": "moderate",
            "fusion_weights": {"vector": 0.5, "graph": 0.7, "bogus": 3},
        }
    )
    u = await understand("who did alice work with at acme in 2023", llm=llm, use_llm=True, now=NOW)  # type: ignore[arg-type]
    assert u.source == "llm"
    assert u.entity_mentions == ["Alice", "Acme Corp"]
    assert u.complexity is QueryComplexity.MODERATE
    assert u.fusion_weights == {"vector": 0.5, "graph": 0.7}
    (ref,) = u.temporal_refs
    assert ref.start == datetime(2023, 1, 1, tzinfo=timezone.utc) and ref.kind == "window"
    assert NOW.isoformat() in llm.prompts[0]


async def test_llm_error_falls_back() -> None:
    for err in (LLMError("boom"), RateLimitError("slow down")):
        u = await understand("Who works with Alice?", llm=ScriptedLLM(error=err), use_llm=True, now=NOW)  # type: ignore[arg-type]
        assert u.source == "heuristic"
        assert u.fallback_reason and u.fallback_reason.startswith("llm_error")
        assert u.complexity is QueryComplexity.MODERATE


async def test_bad_llm_output_falls_back() -> None:
    bad_answers = [
        "not json",
        {"intent": "lookup", "entities": "Alice", "complexity": "simple"},
        {"intent": "dance", "entities": [], "complexity": "simple"},
        {"intent": "lookup", "entities": [], "complexity": "extreme"},
        {
            "intent": "lookup",
            "entities": [],
            "complexity": "simple",
            "temporal": [{"start": "yesterday-ish"}],
        },
        {"entities": []},
    ]
    for answer in bad_answers:
        u = await understand("Who is Alice?", llm=ScriptedLLM(answer), use_llm=True, now=NOW)  # type: ignore[arg-type]
        assert u.source == "heuristic", answer
        assert u.fallback_reason and u.fallback_reason.startswith("bad_llm_output")
        assert u.entity_mentions == ["Alice"]
