"""``AgenticSearchAgent``: several recalls planned step by step, for multi-step questions.

Not exposed on ``recall()``; use it directly::

    agent = AgenticSearchAgent(lambda q: kb.recall(q, namespace=ns), llm, max_steps=4)
    found = await agent.run("Which team does the person who wrote the Q3 memo lead?")
    context_text(found.to_recall_result())

Each step runs one recall and merges its chunks. Then a planner decides the next step:

* with an LLM, one JSON call ``{"action": "search" | "stop", "query": ..., "reason": ...}``
  sees the question, the queries so far, the best passages and the entities found;
* without one (or when the call fails), it follows entities: the best-ranked entity found
  so far that the question does not name and no query has used becomes the next query.

It stops when the planner says so, when the first recall is already confident (raw top
cosine >= ``confident_score``), when a step finds nothing new, or at ``max_steps``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from khora_core.errors import ConfigError, LLMError
from khora_core.models import DocumentProjection, EntityProjection, RecallChunk, RecallResult

if TYPE_CHECKING:
    from khora_core.llm.client import LLMClient

__all__ = ["AgenticResult", "AgenticSearchAgent", "AgenticStep"]

RecallFn = Callable[[str], Awaitable[RecallResult]]


@dataclass
class AgenticStep:
    """One recall the agent made and why."""

    query: str
    reason: str
    new_chunks: int = 0
    max_raw_vector_score: float | None = None
    should_abstain: bool = False
    entities: list[str] = field(default_factory=list)


@dataclass
class AgenticResult:
    """The merged evidence of every step, best first, and the trace."""

    question: str
    namespace_id: str
    chunks: list[RecallChunk] = field(default_factory=list)
    entities: list[EntityProjection] = field(default_factory=list)
    documents: list[DocumentProjection] = field(default_factory=list)
    trace: list[AgenticStep] = field(default_factory=list)
    stopped_because: str = ""

    def to_recall_result(self) -> RecallResult:
        """The merged evidence as a ``RecallResult`` (for ``context_text``)."""
        return RecallResult(
            query=self.question,
            namespace_id=self.namespace_id,
            chunks=list(self.chunks),
            entities=list(self.entities),
            documents=list(self.documents),
            engine_info={
                "agentic": {"steps": [s.__dict__ for s in self.trace], "stopped": self.stopped_because}
            },
        )


_PLAN_PROMPT = """You search a memory store step by step to answer a question.
Question: {question}
Searches so far: {queries}
Entities found: {entities}
Best passages:
{passages}

If the passages answer the question, return {{"action": "stop", "reason": "..."}}.
Otherwise return {{"action": "search", "query": "<next search, different from the earlier ones>",
"reason": "..."}}, usually about an entity or fact the passages point to."""

_PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["search", "stop"]},
        "query": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["action"],
}


class AgenticSearchAgent:
    """Plan and run several recalls for one question.

    Args:
        recall_fn: ``async (query) -> RecallResult``, bound to a namespace.
        llm: an ``LLMClient`` for planning; None plans by following entities.
        max_steps: the most recalls per question.
        max_chunks: the most merged chunks returned.
        confident_score: a first recall whose raw top cosine reaches this ends the search.
    """

    def __init__(
        self,
        recall_fn: RecallFn,
        llm: LLMClient | None = None,
        *,
        max_steps: int = 4,
        max_chunks: int = 20,
        confident_score: float = 0.6,
    ) -> None:
        self.recall_fn = recall_fn
        self.llm = llm
        self.max_steps = max(1, max_steps)
        self.max_chunks = max_chunks
        self.confident_score = confident_score

    async def run(self, question: str) -> AgenticResult:
        """Search until the evidence suffices or the step budget is spent."""
        chunks: dict[str, tuple[float, int, RecallChunk]] = {}  # id -> (score, discovery, chunk)
        entities: dict[str, EntityProjection] = {}
        documents: dict[str, DocumentProjection] = {}
        trace: list[AgenticStep] = []
        result = AgenticResult(question=question, namespace_id="")
        query, reason = question, "the question itself"
        while True:
            found = await self.recall_fn(query)
            result.namespace_id = result.namespace_id or found.namespace_id
            new = 0
            for rc in found.chunks:
                # Later steps answer narrower sub-questions: discount them slightly.
                score = rc.score * (0.9 ** len(trace))
                if rc.id not in chunks:
                    new += 1
                    chunks[rc.id] = (score, len(chunks), rc)
                elif score > chunks[rc.id][0]:
                    chunks[rc.id] = (score, chunks[rc.id][1], rc)
            for e in found.entities:
                entities.setdefault(e.id, e)
            for d in found.documents:
                documents.setdefault(d.id, d)
            top = found.engine_info.get("max_raw_vector_score")
            trace.append(
                AgenticStep(
                    query, reason, new, top, found.should_abstain, [e.name for e in found.entities[:10]]
                )
            )
            stop = self._should_stop(trace, top, new)
            if stop is None:
                ranked = sorted(chunks.values(), key=lambda v: (-v[0], v[1]))
                next_query, why = await self._plan(
                    question, trace, [v[2] for v in ranked[:8]], list(entities.values())
                )
                if next_query is None:
                    stop = why
                else:
                    query, reason = next_query, why
            if stop is not None:
                result.stopped_because = stop
                break
        ranked = sorted(chunks.values(), key=lambda v: (-v[0], v[1]))[: self.max_chunks]
        result.chunks = [v[2] for v in ranked]
        result.entities = list(entities.values())
        keep_docs = {c.document_id for c in result.chunks} | {
            d for e in result.entities for d in e.document_ids
        }
        result.documents = [d for d in documents.values() if d.id in keep_docs]
        result.trace = trace
        return result

    def _should_stop(self, trace: list[AgenticStep], top: float | None, new: int) -> str | None:
        if len(trace) >= self.max_steps:
            return "step_budget"
        if (
            len(trace) == 1
            and top is not None
            and top >= self.confident_score
            and not trace[0].should_abstain
        ):
            return "confident_first_recall"
        if len(trace) > 1 and new == 0:
            return "no_new_evidence"
        return None

    async def _plan(
        self,
        question: str,
        trace: list[AgenticStep],
        best: list[RecallChunk],
        entities: list[EntityProjection],
    ) -> tuple[str | None, str]:
        """The next (query, reason), or (None, why we stop)."""
        asked = {s.query.casefold() for s in trace}
        if self.llm is not None:
            prompt = _PLAN_PROMPT.format(
                question=question,
                queries="; ".join(s.query for s in trace),
                entities=", ".join(e.name for e in entities[:30]) or "none",
                passages="\n".join(f"- {c.content[:300]}" for c in best) or "none",
            )
            try:
                plan = await self.llm.complete_json(prompt, schema=_PLAN_SCHEMA)
                action = str(plan.get("action", "")).lower()
                if action == "stop":
                    return None, "planner_stop: " + str(plan.get("reason", ""))[:200]
                nxt = str(plan.get("query", "")).strip()
                if action == "search" and nxt and nxt.casefold() not in asked:
                    return nxt, "planner: " + str(plan.get("reason", ""))[:200]
            except (LLMError, ConfigError, AttributeError, TypeError, ValueError):
                pass  # plan by entities instead
        q = question.casefold()
        for e in entities:
            if e.name.casefold() in q:
                continue
            nxt = f"{e.name} {question}"
            if nxt.casefold() not in asked:
                return nxt, f"follow entity {e.name!r}"
        return None, "no_entities_to_follow"
