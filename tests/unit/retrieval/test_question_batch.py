"""Recall embeds the question and its entity mentions in one batch when the embedder is
symmetric and the graph channel will run; the answer is the same as with two calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from khora_core import Khora, KhoraConfig, SearchMode
from tests.fixtures.embedders import RecordingEmbedder


@pytest.fixture
def embedder() -> RecordingEmbedder:
    return RecordingEmbedder(symmetric=True)


@pytest.fixture
async def kb(tmp_path: Path, embedder: RecordingEmbedder) -> AsyncIterator[Khora]:
    config = KhoraConfig(storage={"data_dir": str(tmp_path / "data"), "database_url": None})
    k = await Khora(config=config, embedder=embedder).open()
    try:
        yield k
    finally:
        await k.aclose()


async def _recall(kb: Khora, embedder: RecordingEmbedder, ns: str, question: str, *, symmetric: bool):
    embedder.symmetric = symmetric
    embedder.calls.clear()
    result = await kb.recall(question, namespace=ns, mode=SearchMode.HYBRID)
    return result, list(embedder.calls)


async def test_a_graph_question_and_its_mentions_share_one_batch(
    kb: Khora, embedder: RecordingEmbedder
) -> None:
    ns = (await kb.create_namespace("q")).namespace_id
    await kb.remember_batch(
        [
            {"content": "Maya Chen founded Northwind Robotics in Lisbon."},
            {"content": "Omar Haddad joined Northwind Robotics as its first engineer."},
            {"content": "The Lisbon office grew quickly after Maya Chen hired Omar Haddad."},
        ],
        namespace=ns,
    )
    question = "How are Maya Chen and Omar Haddad connected?"
    together, calls = await _recall(kb, embedder, ns, question, symmetric=True)
    assert together.engine_info["routing"]["complexity"] == "complex"
    assert calls == [[question, "Maya Chen", "Omar Haddad"]]

    apart, calls = await _recall(kb, embedder, ns, question, symmetric=False)
    assert sorted(calls) == sorted([[question], ["Maya Chen", "Omar Haddad"]])
    assert [c.id for c in together.chunks] == [c.id for c in apart.chunks]
    assert together.engine_info["linked_entities"] == apart.engine_info["linked_entities"]
    assert {link["match"] for link in together.engine_info["linked_entities"]} == {"exact"}


async def test_a_vector_only_lookup_embeds_the_question_alone(kb: Khora, embedder: RecordingEmbedder) -> None:
    ns = (await kb.create_namespace("q")).namespace_id
    await kb.remember("Maya Chen founded Northwind Robotics in Lisbon.", namespace=ns)
    question = "What did Maya Chen found?"
    result, calls = await _recall(kb, embedder, ns, question, symmetric=True)
    assert result.engine_info["routing"]["complexity"] == "simple"
    assert calls == [[question]]
    # KEYWORD mode embeds nothing at all.
    embedder.calls.clear()
    await kb.recall(question, namespace=ns, mode=SearchMode.KEYWORD)
    assert embedder.calls == []
