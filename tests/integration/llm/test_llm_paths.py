"""Every LLM path of the engine, on real model output replayed from cassettes.

The cassettes were recorded by ``make cassettes`` from Gemma 3 270M behind llama.cpp's
OpenAI-compatible server (see ``tools/cassettes.py``). A 270M base model writes valid but
unreliable content, so these tests assert on what Khora does with the output: parsing,
validation, retries, storage and fallbacks. Truncated and wrong-shaped answers are real
recorded responses, provoked by a tiny token budget and by asking without a schema.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from khora_core import Khora, KhoraConfig, SearchMode
from khora_core.config import LLMConfig
from khora_core.ingest.extract_llm import LLMExtractor
from khora_core.llm.client import LLMClient
from khora_core.retrieval.agentic import AgenticSearchAgent
from tests.llm_settings import llm_config_dict

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


@pytest.fixture
async def llm_kb(tmp_path: Path, embedder: Any) -> AsyncIterator[Khora]:
    async with Khora(config=_config(tmp_path), embedder=embedder) as kb:
        await kb.create_namespace(namespace_id="llm")
        yield kb


async def test_llm_extraction_is_parsed_validated_and_stored(llm_kb: Khora) -> None:
    allowed = ["PERSON", "ORGANIZATION", "PROJECT"]
    result = await llm_kb.remember(
        TEXTS[0][0], namespace="llm", occurred_at=TEXTS[0][1], entity_types=allowed
    )
    assert result.chunk_ids, "the document is stored whatever the model says"
    entities = await llm_kb.list_entities(namespace_id="llm", limit=100)
    # Whatever the model proposed, only the allowed types survive validation.
    assert all(e.type in allowed for e in entities), [(e.name, e.type) for e in entities]
    assert result.entity_count == len(entities) or result.extraction_failed_chunk_ids
    stats = await llm_kb.stats("llm")
    assert stats.documents == 1 and stats.chunks == len(result.chunk_ids)


async def test_truncated_output_keeps_the_document_and_flags_the_chunk(tmp_path: Path, embedder: Any) -> None:
    # A 4-token budget cuts the JSON before any item is complete: a real truncated answer,
    # retried once, then given up on: the chunk is stored and flagged for re-extraction.
    cfg = _config(tmp_path, llm={"max_tokens": 4, "max_retries": 1})
    async with Khora(config=cfg, embedder=embedder) as kb:
        ns = (await kb.create_namespace(namespace_id="trunc")).namespace_id
        result = await kb.remember(TEXTS[1][0], namespace=ns, occurred_at=TEXTS[1][1])
        assert result.chunk_ids
        stored = await kb.engine.stack.documents.get_chunks(ns, result.chunk_ids)
        flagged = {c.id for c in stored if c.needs_extraction}
        assert result.extraction_failed_chunk_ids, "a truncated answer cannot be a successful extraction"
        assert flagged == set(result.extraction_failed_chunk_ids)
        hits = await kb.recall("Who acquired Kestrel Dynamics?", namespace=ns, mode=SearchMode.VECTOR)
        assert hits.chunks and hits.chunks[0].document_id == result.document_id


async def test_wrong_shaped_json_is_rejected_per_chunk(tmp_path: Path) -> None:
    # Asked without a schema, the base model answers JSON of its own shape: Khora must not crash
    # and must report each chunk as extracted or failed, never lose one.
    client = LLMClient(LLMConfig(**llm_config_dict(max_retries=0)), structured_mode="json_object")
    extractor = LLMExtractor(client, concurrency=1)
    out = await extractor.extract([(f"c{i}", text) for i, (text, _) in enumerate(TEXTS)])
    assert [x.chunk_id for x in out] == ["c0", "c1", "c2"]
    for x in out:
        if x.failed:
            assert x.error and not x.entities
        else:
            assert all(e.name.strip() for e in x.entities)


async def _load(kb: Khora, ns: str) -> None:
    for text, when in TEXTS:
        await kb.remember(text, namespace=ns, occurred_at=when)


async def test_query_understanding_by_llm_or_recorded_fallback(tmp_path: Path, embedder: Any) -> None:
    cfg = _config(tmp_path, vectorcypher={"routing_use_llm": True}, query={"enable_hyde": "never"})
    async with Khora(config=cfg, embedder=embedder) as kb:
        ns = (await kb.create_namespace(namespace_id="understand")).namespace_id
        await _load(kb, ns)
        res = await kb.recall("Which company did Northwind Robotics acquire in May 2023?", namespace=ns)
        u = res.engine_info["understanding"]
        assert u["source"] in ("llm", "heuristic")
        if u["source"] == "heuristic":
            assert u["fallback_reason"], "a fallback must say why"
        assert u["complexity"] in ("simple", "moderate", "complex")
        assert res.chunks


async def test_hyde_always_adds_a_hypothetical_passage_channel(tmp_path: Path, embedder: Any) -> None:
    cfg = _config(tmp_path, query={"enable_hyde": "always"})
    async with Khora(config=cfg, embedder=embedder) as kb:
        ns = (await kb.create_namespace(namespace_id="hyde")).namespace_id
        await _load(kb, ns)
        res = await kb.recall("What does Project Sparrow do?", namespace=ns)
        assert res.engine_info["hyde"]["setting"] == "always"
        hyde = res.engine_info["channels"].get("hyde")
        assert hyde is not None
        assert res.engine_info["hyde"]["applied"] == bool(hyde.get("count"))


async def test_llm_reranking_on_a_temporal_question(tmp_path: Path, embedder: Any) -> None:
    cfg = _config(tmp_path, query={"enable_llm_reranking": True, "enable_hyde": "never"})
    async with Khora(config=cfg, embedder=embedder) as kb:
        ns = (await kb.create_namespace(namespace_id="rerank")).namespace_id
        await _load(kb, ns)
        res = await kb.recall("What happened most recently at Northwind Robotics?", namespace=ns, limit=3)
        info = res.engine_info["rerank"]
        assert "llm" in info
        ids = [c.id for c in res.chunks]
        assert len(ids) == len(set(ids)) and ids


async def test_agentic_search_merges_steps_and_stops(tmp_path: Path, embedder: Any) -> None:
    cfg = _config(tmp_path, query={"enable_hyde": "never"})
    async with Khora(config=cfg, embedder=embedder) as kb:
        ns = (await kb.create_namespace(namespace_id="agentic")).namespace_id
        await _load(kb, ns)

        async def recall(q: str) -> Any:
            return await kb.recall(q, namespace=ns, limit=3)

        agent = AgenticSearchAgent(recall, kb.engine.llm, max_steps=3)
        out = await agent.run("Who founded the startup that Northwind Robotics acquired?")
        assert 1 <= len(out.trace) <= 3
        assert out.stopped_because
        assert out.chunks and len({c.id for c in out.chunks}) == len(out.chunks)


async def test_lcel_rag_chain_cites_only_retrieved_chunks(tmp_path: Path, embedder: Any) -> None:
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough
    from langchain_litellm import ChatLiteLLM

    from khora_core import KhoraSync
    from khora_integrations.langchain import KhoraRetriever
    from tests.llm_settings import LLM_API_BASE, LLM_API_KEY, LLM_MODEL

    kb = KhoraSync(config=_config(tmp_path), embedder=embedder).open()
    try:
        ns = kb.create_namespace(namespace_id="rag").namespace_id
        for text, when in TEXTS:
            kb.remember(text, namespace=ns, occurred_at=when)
        retriever = KhoraRetriever(kb=kb, namespace=ns, k=3)
        model = ChatLiteLLM(
            model=LLM_MODEL, api_base=LLM_API_BASE, api_key=LLM_API_KEY, temperature=0, max_tokens=64
        )
        prompt = ChatPromptTemplate.from_messages(
            [
                (
                    "human",
                    "Answer using the sources and cite them like [1].\n\n{context}\n\nQuestion: {question}\nAnswer:",
                )
            ]
        )
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
        assert isinstance(answer, str) and answer.strip()
        assert retrieved and "Maya Chen" in retrieved[0].page_content
        cited = {int(n) for n in re.findall(r"\[(\d+)\]", answer)}
        assert cited <= set(range(1, len(retrieved) + 1)), (
            f"the answer cites sources that were not retrieved: {answer!r}"
        )
    finally:
        kb.close()
