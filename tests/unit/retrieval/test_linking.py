"""Entity linking (``retrieval.linking``) on the real embedded store (SQLite + LanceDB in a
temp folder), with a deterministic embedder: exact, fuzzy and embedding matches, and the
question's nearest entities when its vector is still being computed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import ClassVar

import pytest

from khora_core import Khora, KhoraConfig
from khora_core.models import Entity
from khora_core.retrieval.linking import link_entities
from tests.fixtures.embedders import RecordingEmbedder


class HashEmbedder(RecordingEmbedder):
    """Unit vectors from a hash of the lower-cased text (a phrase in ``SAME`` gets the vector
    of the name it stands for); records the texts it embeds."""

    SAME: ClassVar[dict[str, str]] = {"the portuguese capital": "lisbon"}

    def vector(self, text: str) -> list[float]:
        return super().vector(self.SAME.get(text.lower(), text.lower()))


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[Khora, str, HashEmbedder]]:
    embedder = HashEmbedder()
    config = KhoraConfig(storage={"data_dir": str(tmp_path / "data"), "database_url": None})
    kb = await Khora(config=config, embedder=embedder).open()
    try:
        ns = (await kb.create_namespace("link")).namespace_id
        names = [("maya", "Maya Chen", "PERSON"), ("nw", "Northwind Robotics", "ORGANIZATION")]
        names += [("lis", "Lisbon", "LOCATION")]
        entities = [
            Entity(id=i, namespace_id=ns, name=n, type=t, embedding=embedder.vector(n)) for i, n, t in names
        ]
        await kb.engine.stack.graph.upsert_graph(ns, entities=entities)
        yield kb, ns, embedder
    finally:
        await kb.aclose()


async def test_exact_fuzzy_and_embedding_matches(setup: tuple[Khora, str, HashEmbedder]) -> None:
    kb, ns, embedder = setup
    linking = await link_entities(
        kb.engine.stack.graph,
        ns,
        ["maya chen", "Northwnd Robotics", "the Portuguese capital", "  "],
        embedder=embedder,
        min_similarity=0.9,
    )
    by_id = {link.entity.id: link for link in linking.links}
    assert set(by_id) == {"maya", "nw", "lis"}
    assert (by_id["maya"].match, by_id["maya"].score) == ("exact", 1.0)
    assert by_id["nw"].match == "fuzzy" and 0.85 <= by_id["nw"].score < 1.0
    assert by_id["lis"].match == "embedding" and by_id["lis"].score == pytest.approx(1.0, abs=1e-5)
    assert by_id["lis"].mention == "the Portuguese capital"
    assert [link.score for link in linking.links] == sorted(
        (link.score for link in linking.links), reverse=True
    )
    assert "  " not in embedder.texts() and "" not in embedder.texts()  # blank mentions are dropped


async def test_embedding_match_needs_min_similarity(setup: tuple[Khora, str, HashEmbedder]) -> None:
    kb, ns, embedder = setup
    # A phrase that is no name, no close spelling and no near vector links to nothing.
    linking = await link_entities(
        kb.engine.stack.graph, ns, ["quarterly revenue"], embedder=embedder, min_similarity=0.9
    )
    assert linking.links == []


async def test_pending_question_vector_gives_the_same_nearest_entities(
    setup: tuple[Khora, str, HashEmbedder],
) -> None:
    kb, ns, embedder = setup
    qvec = embedder.vector("Northwind Robotics")
    mention = "the Portuguese capital"  # no name shares its words: it is embedded
    direct = await link_entities(
        kb.engine.stack.graph, ns, [mention], embedder=embedder, query_vector=qvec, query_limit=2
    )
    pending: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(
        link_entities(
            kb.engine.stack.graph, ns, [mention], embedder=embedder, query_vector=pending, query_limit=2
        )
    )
    # The exact lookup and the unmatched mention's embedding go ahead while the vector is pending.
    for _ in range(500):
        await asyncio.sleep(0.01)
        if embedder.texts().count(mention) == 2:
            break
    assert embedder.texts().count(mention) == 2 and not task.done()
    pending.set_result(qvec)
    linked = await task
    assert [h.entity.id for h in linked.nearest] == [h.entity.id for h in direct.nearest]
    assert linked.nearest[0].entity.id == "nw" and linked.nearest[0].score == pytest.approx(1.0, abs=1e-5)
    assert [(link.entity.id, link.match) for link in linked.links] == [("lis", "embedding")]


async def test_a_close_spelling_of_a_name_word_links_without_an_embedding(
    setup: tuple[Khora, str, HashEmbedder],
) -> None:
    """A mention that an exact or name-word fuzzy match links is never embedded; one that
    neither links is, and only that one."""
    kb, ns, embedder = setup
    embedder.calls.clear()
    linking = await link_entities(
        kb.engine.stack.graph,
        ns,
        ["Maya Chenn", "Northwind Robotics", "the Portuguese capital"],
        embedder=embedder,
        min_similarity=0.9,
    )
    assert embedder.calls == [["the Portuguese capital"]]
    got = {link.mention: (link.entity.id, link.match) for link in linking.links}
    assert got == {
        "Maya Chenn": ("maya", "fuzzy"),
        "Northwind Robotics": ("nw", "exact"),
        "the Portuguese capital": ("lis", "embedding"),
    }


async def test_no_vector_no_nearest(setup: tuple[Khora, str, HashEmbedder]) -> None:
    kb, ns, embedder = setup
    pending: asyncio.Future[list[float] | None] = asyncio.get_running_loop().create_future()
    pending.set_result(None)  # KEYWORD-like: the question has no vector
    linking = await link_entities(
        kb.engine.stack.graph, ns, [], embedder=embedder, query_vector=pending, query_limit=3
    )
    assert linking.links == [] and linking.nearest == []


async def test_fuzzy_match_reaches_an_entity_without_a_vector_through_its_name_words(
    setup: tuple[Khora, str, HashEmbedder],
) -> None:
    """The entity vector search cannot return an entity stored without a vector; the
    entities sharing a word with the mention still get scored by edit distance."""
    kb, ns, embedder = setup
    silent = Entity(id="film", namespace_id=ns, name="Can No Longer Remain Silent", type="WORK")
    await kb.engine.stack.graph.upsert_graph(ns, entities=[silent])
    linking = await link_entities(
        kb.engine.stack.graph, ns, ["You Can No Longer Remain Silent"], embedder=embedder, min_similarity=0.9
    )
    assert [(link.entity.id, link.match) for link in linking.links] == [("film", "fuzzy")]
    assert 0.85 <= linking.links[0].score < 1.0
