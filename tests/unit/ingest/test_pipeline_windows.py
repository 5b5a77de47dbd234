"""``remember_batch`` in windows, on the real embedded store (SQLite + LanceDB in a temp folder).

The embedder is deterministic and records every call, so the tests can say exactly which
texts were embedded: chunk texts once, each entity name at most once per batch, no dates.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from khora_core import Khora, KhoraConfig, SearchMode
from khora_core.errors import InvalidInputError, KhoraError
from khora_core.ingest.extract_base import ChunkExtraction
from khora_core.ingest.extract_offline import OfflineExtractor
from khora_core.models import RememberResult
from tests.fixtures.embedders import RecordingEmbedder

Recording = RecordingEmbedder


class FailsOn(OfflineExtractor):
    """The offline extractor, except that it raises for chunks containing ``marker``."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker

    async def extract(self, chunks: Sequence[tuple[str, str]], **kwargs: Any) -> list[ChunkExtraction]:
        if any(self.marker in text for _, text in chunks):
            raise RuntimeError("extractor down")
        return await super().extract(chunks, **kwargs)


@pytest.fixture
def embedder() -> Recording:
    return Recording()


async def _open(
    tmp_path: Path, embedder: Recording, *, ingest: dict[str, Any] | None = None, **engine_kwargs: Any
) -> Khora:
    config = KhoraConfig(
        storage={"data_dir": str(tmp_path / "data"), "database_url": None}, ingest=ingest or {}
    )
    return await Khora(config=config, embedder=embedder, engine_kwargs=engine_kwargs).open()


@pytest.fixture
async def kb(tmp_path: Path, embedder: Recording) -> AsyncIterator[Khora]:
    k = await _open(tmp_path, embedder)
    try:
        yield k
    finally:
        await k.aclose()


def _passage(i: int) -> str:
    return f"Report {i}. Maya Chen met Omar Haddad at Northwind Robotics in Lisbon on 3 March 2024."


async def test_names_are_embedded_once_across_documents_and_windows(kb: Khora, embedder: Recording) -> None:
    ns = (await kb.create_namespace("w")).namespace_id
    items = [{"content": _passage(i)} for i in range(600)]  # one chunk each: 2+ windows of 256+
    outcomes = await kb.remember_batch(items, namespace=ns)
    assert all(isinstance(o, RememberResult) and not o.duplicate for o in outcomes)
    texts = embedder.texts()
    chunk_texts = [t for t in texts if t.startswith("Report ")]
    names = [t for t in texts if not t.startswith("Report ")]
    assert sorted(chunk_texts) == sorted(it["content"] for it in items)
    assert len(names) == len(set(names)), "a name was embedded twice in one batch"
    assert {"Maya Chen", "Omar Haddad", "Northwind Robotics", "Lisbon"} <= set(names)
    assert not any("2024" in n or "March" in n for n in names), "dates get no vector"
    # Chunks went in window-sized calls, and names in a handful of calls, not one per document.
    assert max(len(c) for c in embedder.calls) >= 256
    assert len(embedder.calls) <= 10

    by_name = {
        e.name: e
        for e in await kb.engine.stack.graph.find_entities_by_name(ns, ["Maya Chen", "3 March 2024"])
    }
    assert by_name["Maya Chen"].embedding is not None and by_name["Maya Chen"].mention_count == 600
    date = by_name["3 March 2024"]
    assert date.type == "DATE" and date.embedding is None


async def test_a_second_batch_reuses_stored_entity_vectors(kb: Khora, embedder: Recording) -> None:
    ns = (await kb.create_namespace("w")).namespace_id
    await kb.remember_batch([{"content": _passage(0)}, {"content": _passage(1)}], namespace=ns)
    embedder.calls.clear()
    await kb.remember_batch([{"content": _passage(2)}], namespace=ns)
    assert embedder.texts() == [_passage(2)]  # the names' vectors came from the store


@pytest.mark.parametrize("setting", ["all", "repeated"])
async def test_entity_vectors_all_or_once_a_second_chunk_mentions_the_entity(
    tmp_path: Path, embedder: Recording, setting: str
) -> None:
    kb = await _open(tmp_path, embedder, ingest={"entity_vectors": setting})
    try:
        ns = (await kb.create_namespace("w")).namespace_id

        async def vectors() -> dict[str, bool]:
            found = await kb.engine.stack.graph.find_entities_by_name(
                ns, ["Maya Chen", "Lisbon", "Omar Haddad"]
            )
            return {e.name: e.embedding is not None for e in found}

        first = "Maya Chen flew to Lisbon."
        await kb.remember(first, namespace=ns)
        if setting == "all":
            assert await vectors() == {"Maya Chen": True, "Lisbon": True}
            return
        assert await vectors() == {"Maya Chen": False, "Lisbon": False}
        assert embedder.texts() == [first]  # no name was embedded
        embedder.calls.clear()
        second = "Maya Chen met Omar Haddad. Omar Haddad stayed."  # Omar: twice, but in one chunk
        await kb.remember(second, namespace=ns)
        assert await vectors() == {"Maya Chen": True, "Lisbon": False, "Omar Haddad": False}
        assert embedder.texts() == [second, "Maya Chen"]
        # Linking by name still reaches an entity without a vector.
        result = await kb.recall("Where did Maya Chen fly, Lisbon?", namespace=ns, mode=SearchMode.GRAPH)
        assert any(first == c.content for c in result.chunks)
    finally:
        await kb.aclose()


async def test_outcomes_stay_at_their_index_through_failures(tmp_path: Path, embedder: Recording) -> None:
    kb = await _open(tmp_path, embedder, extractor=FailsOn("BROKEN"))
    try:
        ns = (await kb.create_namespace("w")).namespace_id
        items: list[Any] = [{"content": _passage(i)} for i in range(300)]
        items[3] = {"title": "no content"}
        items[5] = {"content": "A BROKEN report about Maya Chen in Lisbon."}
        items[290] = {"content": _passage(7)}  # same content as item 7: a follower
        items[295] = {"content": "Fine text.", "bogus_key": 1}
        outcomes = await kb.remember_batch(items, namespace=ns)
    finally:
        await kb.aclose()
    assert len(outcomes) == len(items)
    assert isinstance(outcomes[3], InvalidInputError)
    assert isinstance(outcomes[295], InvalidInputError) and "bogus_key" in str(outcomes[295])
    broken = outcomes[5]
    assert isinstance(broken, RememberResult) and broken.extraction_failed_chunk_ids == broken.chunk_ids
    assert isinstance(outcomes[290], RememberResult) and outcomes[290].duplicate
    assert outcomes[290].document_id == outcomes[7].document_id
    for i in set(range(300)) - {3, 5, 290, 295}:
        assert isinstance(outcomes[i], RememberResult) and outcomes[i].chunk_ids, i
        assert not outcomes[i].duplicate and not outcomes[i].extraction_failed_chunk_ids


async def test_same_external_id_replaces_in_input_order_across_windows(kb: Khora) -> None:
    ns = (await kb.create_namespace("w")).namespace_id
    items = [{"content": _passage(i)} for i in range(600)]
    items[1] = {"content": "Version one of the Kestrel plan.", "external_id": "plan"}
    items[2] = {"content": "Version two of the Kestrel plan.", "external_id": "plan"}
    items[550] = {"content": "Version three of the Kestrel plan.", "external_id": "plan"}
    outcomes = await kb.remember_batch(items, namespace=ns)
    one, two, three = outcomes[1], outcomes[2], outcomes[550]
    assert (
        isinstance(one, RememberResult)
        and isinstance(two, RememberResult)
        and isinstance(three, RememberResult)
    )
    assert one.replaced_document_ids == []
    assert two.replaced_document_ids == [one.document_id]
    assert three.replaced_document_ids == [two.document_id]
    stored = await kb.engine.stack.documents.find_documents_by_external_id(ns, "plan")
    assert [d.id for d in stored] == [three.document_id]


async def test_entities_built_earlier_in_the_batch_resolve_like_stored_ones(kb: Khora) -> None:
    ns = (await kb.create_namespace("w")).namespace_id
    items = [
        {
            "content": "Acme Corp hired Maya Chen. Acme Corp grew fast. Later, Acme opened an office in Lisbon."
        },
        # Alone, this would make a new entity "Acme"; item 0 (same window, so not yet
        # written when this item is looked up) made "Acme" an alias of "Acme Corp".
        {"content": "Omar Haddad joined Acme in Lisbon."},
    ]
    first, second = await kb.remember_batch(items, namespace=ns)
    assert isinstance(first, RememberResult) and isinstance(second, RememberResult)
    found = await kb.engine.stack.graph.find_entities_by_name(ns, ["Acme"])
    assert [(e.name, e.aliases) for e in found] == [("Acme Corp", ["Acme"])]
    assert found[0].mention_count == 4


def _varied(i: int) -> str:
    people = ["Maya Chen", "Omar Haddad", "Lena Ortiz", "Ravi Patel", "Ana Sousa"]
    places = ["Lisbon", "Porto", "Oslo", "Kyoto"]
    return (
        f"Memo {i}. {people[i % 5]} of Northwind Robotics met {people[(i * 3 + 1) % 5]} in "
        f"{places[i % 4]}. Later, Northwind opened an office in {places[(i + 1) % 4]}."
    )


async def _graph_of(kb: Khora, ns: str) -> list[tuple[str, tuple[str, ...], int, str]]:
    entities = await kb.engine.stack.graph.list_entities(ns, limit=10_000)
    return sorted((e.name, tuple(sorted(e.aliases)), e.mention_count, e.type) for e in entities)


async def test_a_window_looks_up_stored_entities_only_after_the_previous_window_landed(
    kb: Khora, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow store must not change what a batch builds: window N resolves against the
    entities of windows before it as stored, never against a write still in flight."""
    items = [{"content": _varied(i)} for i in range(600)]  # one chunk each: several windows
    n_windows = -(-len(items) // kb.engine.ingest._slice_size())
    assert n_windows >= 2
    fast_ns = (await kb.create_namespace("fast")).namespace_id
    await kb.remember_batch(items, namespace=fast_ns)

    stack = kb.engine.stack
    writing = 0
    seen_while_writing: list[int] = []
    real_write_many, real_find = stack.write_many, stack.graph.find_entities_by_name

    async def slow_write_many(namespace_id: str, batches: Any) -> None:
        nonlocal writing
        writing += 1
        try:
            await asyncio.sleep(0.3)  # much longer than embedding a window with hash vectors
            await real_write_many(namespace_id, batches)
        finally:
            writing -= 1

    async def find(namespace_id: str, names: Sequence[str]) -> Any:
        seen_while_writing.append(writing)
        return await real_find(namespace_id, names)

    monkeypatch.setattr(stack, "write_many", slow_write_many)
    monkeypatch.setattr(stack.graph, "find_entities_by_name", find)
    slow_ns = (await kb.create_namespace("slow")).namespace_id
    outcomes = await kb.remember_batch(items, namespace=slow_ns)
    assert all(isinstance(o, RememberResult) for o in outcomes)
    assert seen_while_writing and max(seen_while_writing) == 0
    assert len(seen_while_writing) == n_windows  # one lookup per window, not one per item
    assert await _graph_of(kb, slow_ns) == await _graph_of(kb, fast_ns)


async def test_an_embedder_failure_is_reported_on_every_item_it_stopped(tmp_path: Path) -> None:
    class Broken(Recording):
        async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
            if any("Omar" in t and not t.startswith("Report") for t in texts):
                raise RuntimeError("name embedding down")
            return await super().embed_documents(texts)

    kb = await _open(tmp_path, Broken())
    try:
        ns = (await kb.create_namespace("w")).namespace_id
        outcomes = await kb.remember_batch([{"content": _passage(i)} for i in range(3)], namespace=ns)
        assert all(isinstance(o, KhoraError) and "name embedding down" in str(o) for o in outcomes)
        assert (await kb.stats(ns)).documents == 0
    finally:
        await kb.aclose()


async def test_a_batch_scoped_skeleton_picks_the_core_among_all_chunks(
    tmp_path: Path, embedder: Recording
) -> None:
    from khora_core import VectorCypherConfig

    kb = await _open(tmp_path, embedder, vectorcypher_config=VectorCypherConfig(skeleton_scope="batch"))
    try:
        ns = (await kb.create_namespace("w")).namespace_id
        outcomes = await kb.remember_batch([{"content": _passage(i)} for i in range(10)], namespace=ns)
        single = await kb.remember(_passage(99), namespace=ns)
    finally:
        await kb.aclose()
    results = [o for o in outcomes if isinstance(o, RememberResult)]
    # Half of ten one-chunk passages are core.
    assert len(results) == 10 and sum(r.core_chunk_count for r in results) == 5
    assert {r.core_chunk_count for r in results} == {0, 1}
    # A non-core passage still links to the names the batch knows (keyword links).
    assert all(r.entity_count > 0 for r in results)
    assert single.core_chunk_count == 1  # one document: its own core, as before


async def test_a_window_lands_in_one_write_and_a_rejected_item_costs_only_itself(
    kb: Khora, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window is written with one ``write_many``; when the store rejects one document of
    it, the others are written one by one and only that item reports the error."""
    stack = getattr(kb.engine.stack, "shared", kb.engine.stack)  # the store behind a shared lease
    groups: list[int] = []
    write_many = stack.write_many

    async def counting(namespace_id: str, batches: Sequence[Any]) -> None:
        groups.append(len(batches))
        await write_many(namespace_id, batches)

    check = stack._check_batch

    def rejecting(namespace_id: str, batch: Any) -> None:
        if "REJECT" in batch.document.content:
            raise InvalidInputError("the store rejects this document")
        check(namespace_id, batch)

    monkeypatch.setattr(stack, "write_many", counting)
    monkeypatch.setattr(stack, "_check_batch", rejecting)
    ns = (await kb.create_namespace("w")).namespace_id
    items: list[Any] = [{"content": _passage(i)} for i in range(40)]
    outcomes = await kb.remember_batch(items, namespace=ns)
    assert all(isinstance(o, RememberResult) for o in outcomes)
    assert groups == [40]

    groups.clear()
    items = [{"content": f"Batch two, report {i}. Maya Chen visited Lisbon."} for i in range(10)]
    items[4] = {"content": "REJECT this report about Maya Chen."}
    outcomes = await kb.remember_batch(items, namespace=ns)
    assert groups == [10] + [1] * 10  # tried as one group, then one by one
    assert isinstance(outcomes[4], InvalidInputError) and "rejects" in str(outcomes[4])
    assert all(isinstance(o, RememberResult) for i, o in enumerate(outcomes) if i != 4)
    stats = await kb.stats(ns)
    assert stats.documents == 49
    (maya,) = await stack.graph.find_entities_by_name(ns, ["Maya Chen"])
    assert maya.mention_count == 49
