"""What recall embeds: the question alone, then only the entity mentions that no stored
name matched, exactly or by a close spelling of a name sharing one of their words (a
mention batched with the question is padded to its length)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from khora_core import Khora, KhoraConfig, SearchMode
from tests.fixtures.embedders import RecordingEmbedder


@pytest.fixture
def embedder() -> RecordingEmbedder:
    return RecordingEmbedder()


@pytest.fixture
async def kb(tmp_path: Path, embedder: RecordingEmbedder) -> AsyncIterator[Khora]:
    config = KhoraConfig(storage={"data_dir": str(tmp_path / "data"), "database_url": None})
    k = await Khora(config=config, embedder=embedder).open()
    try:
        yield k
    finally:
        await k.aclose()


async def _remember_team(kb: Khora) -> str:
    ns = (await kb.create_namespace("q")).namespace_id
    await kb.remember_batch(
        [
            {"content": "Maya Chen founded Northwind Robotics in Lisbon."},
            {"content": "Omar Haddad joined Northwind Robotics as its first engineer."},
            {"content": "The Lisbon office grew quickly after Maya Chen hired Omar Haddad."},
        ],
        namespace=ns,
    )
    return ns


async def test_mentions_that_match_a_name_are_not_embedded(kb: Khora, embedder: RecordingEmbedder) -> None:
    ns = await _remember_team(kb)
    question = "How are Maya Chen and Omar Haddad connected?"
    embedder.calls.clear()
    result = await kb.recall(question, namespace=ns, mode=SearchMode.HYBRID)
    assert result.engine_info["routing"]["complexity"] == "complex"
    assert embedder.calls == [[question]]
    links = {link["mention"]: link["match"] for link in result.engine_info["linked_entities"]}
    assert links == {"Maya Chen": "exact", "Omar Haddad": "exact"}


async def test_a_close_spelling_is_linked_without_an_embedding(
    kb: Khora, embedder: RecordingEmbedder
) -> None:
    ns = await _remember_team(kb)
    question = "How are Maya Chenn and Omar Haddad connected?"
    embedder.calls.clear()
    result = await kb.recall(question, namespace=ns, mode=SearchMode.HYBRID)
    assert embedder.calls == [[question]]
    links = {link["mention"]: (link["name"], link["match"]) for link in result.engine_info["linked_entities"]}
    assert links["Omar Haddad"] == ("Omar Haddad", "exact")
    assert links["Maya Chenn"] == ("Maya Chen", "fuzzy")  # found through the name word "Maya"


async def test_only_the_unlinked_mention_is_embedded(kb: Khora, embedder: RecordingEmbedder) -> None:
    ns = await _remember_team(kb)
    question = "How are Omar Haddad and Quentin Blake connected?"
    embedder.calls.clear()
    result = await kb.recall(question, namespace=ns, mode=SearchMode.HYBRID)
    assert result.engine_info["understanding"]["entity_mentions"] == ["Omar Haddad", "Quentin Blake"]
    assert embedder.calls == [[question], ["Quentin Blake"]]
    links = {link["mention"]: (link["name"], link["match"]) for link in result.engine_info["linked_entities"]}
    assert links["Omar Haddad"] == ("Omar Haddad", "exact")


async def test_a_vector_only_lookup_embeds_the_question_alone(kb: Khora, embedder: RecordingEmbedder) -> None:
    ns = (await kb.create_namespace("q")).namespace_id
    await kb.remember("Maya Chen founded Northwind Robotics in Lisbon.", namespace=ns)
    question = "What did Maya Chen found?"
    embedder.calls.clear()
    result = await kb.recall(question, namespace=ns)
    assert result.engine_info["routing"]["complexity"] == "simple"
    assert embedder.calls == [[question]]
    # KEYWORD mode embeds nothing at all.
    embedder.calls.clear()
    await kb.recall(question, namespace=ns, mode=SearchMode.KEYWORD)
    assert embedder.calls == []
