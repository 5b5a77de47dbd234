"""AgenticSearchAgent over a scripted recall function (results built in memory)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from khora_core.errors import LLMError
from khora_core.models import DocumentProjection, EntityProjection, RecallChunk, RecallResult
from khora_core.retrieval.agentic import AgenticSearchAgent

T = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _result(query: str, chunk_ids: list[str], entities: list[str], top: float | None) -> RecallResult:
    return RecallResult(
        query=query,
        namespace_id="ns",
        chunks=[
            RecallChunk(id=c, document_id=f"d-{c}", content=f"text {c}", score=1.0 / (i + 1))
            for i, c in enumerate(chunk_ids)
        ],
        entities=[EntityProjection(id=f"e-{e}", name=e, type="PERSON") for e in entities],
        documents=[DocumentProjection(id=f"d-{c}", namespace_id="ns", created_at=T) for c in chunk_ids],
        engine_info={"max_raw_vector_score": top, "abstention_signals": {"should_abstain": False}},
    )


class Memory:
    """Answers each query with a fixed result; records the queries."""

    def __init__(self, answers: dict[str, RecallResult], default: RecallResult) -> None:
        self.answers, self.default, self.queries = answers, default, []

    async def __call__(self, query: str) -> RecallResult:
        self.queries.append(query)
        return self.answers.get(query, self.default)


async def test_confident_first_recall_stops() -> None:
    mem = Memory({}, _result("q", ["c1"], ["Bob"], 0.8))
    out = await AgenticSearchAgent(mem).run("Who is Alice?")
    assert mem.queries == ["Who is Alice?"]
    assert out.stopped_because == "confident_first_recall"
    assert [c.id for c in out.chunks] == ["c1"]


async def test_follows_entities_then_stops_on_no_new_evidence() -> None:
    q = "Which team does Alice's manager lead?"
    mem = Memory(
        {
            q: _result(q, ["c1"], ["Alice", "Bob"], 0.45),
            f"Bob {q}": _result("b", ["c2", "c1"], ["Bob", "Team Red"], 0.5),
        },
        default=_result("x", ["c2"], [], 0.4),
    )
    out = await AgenticSearchAgent(mem, max_steps=5).run(q)
    assert mem.queries[:2] == [q, f"Bob {q}"]
    assert mem.queries[2] == f"Team Red {q}"
    assert out.stopped_because == "no_new_evidence"
    assert [c.id for c in out.chunks] == ["c1", "c2"]
    assert {d.id for d in out.documents} == {"d-c1", "d-c2"}
    assert [s.new_chunks for s in out.trace] == [1, 1, 0]
    assert out.to_recall_result().chunks[0].id == "c1"


async def test_step_budget() -> None:
    counter = iter(range(100))

    async def recall(query: str) -> RecallResult:
        i = next(counter)
        return _result(query, [f"c{i}"], [f"E{i}"], 0.3)

    out = await AgenticSearchAgent(recall, max_steps=3).run("question")
    assert len(out.trace) == 3 and out.stopped_because == "step_budget"


class Planner:
    def __init__(self, plans: list[Any]) -> None:
        self.plans = plans

    async def complete_json(self, prompt: str, *, schema: dict[str, Any] | None = None) -> Any:
        plan = self.plans.pop(0)
        if isinstance(plan, Exception):
            raise plan
        return plan


async def test_llm_planner_search_then_stop() -> None:
    mem = Memory({}, _result("x", ["c1"], [], 0.3))
    mem.answers["sub question"] = _result("s", ["c9"], [], 0.3)
    llm = Planner([{"action": "search", "query": "sub question", "reason": "need more"}, {"action": "stop"}])
    out = await AgenticSearchAgent(mem, llm).run("main question")  # type: ignore[arg-type]
    assert mem.queries == ["main question", "sub question"]
    assert out.stopped_because.startswith("planner_stop")


async def test_llm_failure_falls_back_to_entities() -> None:
    mem = Memory({}, _result("x", ["c1"], ["Zed"], 0.3))
    out = await AgenticSearchAgent(mem, Planner([LLMError("down"), LLMError("down")]), max_steps=2).run("q?")  # type: ignore[arg-type]
    assert mem.queries == ["q?", "Zed q?"]
    assert out.stopped_because == "step_budget"
