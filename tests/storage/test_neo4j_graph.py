"""Neo4jGraphStore against a real Neo4j 5 (``neo4j_driver`` / ``graph_namespace`` fixtures)."""

from __future__ import annotations

import itertools
import logging
import math
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from khora_core.errors import ConfigError, InvalidInputError, KhoraError, StorageUnavailableError
from khora_core.ingest.resolve import entity_id
from khora_core.models import Chunk, Document, Entity, Mention, Relationship, WriteBatch
from khora_core.storage.neo4j import Neo4jGraphStore, entity_vectors, open_driver
from khora_core.storage.protocols import GraphStore

pytestmark = pytest.mark.neo4j

DIM = 384
T0 = datetime(2024, 3, 10, 9, 30, tzinfo=timezone.utc)


@pytest.fixture
async def store(neo4j_driver: Any) -> Neo4jGraphStore:
    s = Neo4jGraphStore(neo4j_driver, embedding_dim=DIM)
    await s.ensure_schema()
    return s


def unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).normal(size=DIM)
    return (v / np.linalg.norm(v)).tolist()


def make_batch(
    ns: str,
    doc: str,
    texts: list[str],
    *,
    entities: dict[str, str] | None = None,
    mentions: list[tuple[str, int, int]] = (),  # (entity name, chunk index, count)
    relations: list[tuple[str, str, str, float]] = (),  # (source, target, type, weight)
    occurred: list[datetime | None] | None = None,
    source_name: str | None = "slack",
    metadata: dict[str, Any] | None = None,
    replaces: list[str] = (),
) -> WriteBatch:
    now = datetime.now(timezone.utc)
    document = Document(
        id=doc, namespace_id=ns, content=" ".join(texts), content_hash=uuid.uuid4().hex, created_at=now
    )
    chunks = [
        Chunk(
            id=f"{doc}-c{i}",
            namespace_id=ns,
            document_id=doc,
            index=i,
            content=text,
            start_char=i * 100,
            end_char=i * 100 + len(text),
            created_at=now,
            occurred_at=(occurred[i] if occurred else None),
            source_name=source_name,
            title=f"title {doc}",
            metadata=dict(metadata or {}, n=i),
            tags=["t1", f"i{i}"],
        )
        for i, text in enumerate(texts)
    ]
    ents = {
        name: Entity(id=entity_id(ns, name), namespace_id=ns, name=name, type=etype)
        for name, etype in (entities or {}).items()
    }
    return WriteBatch(
        document=document,
        chunks=chunks,
        entities=list(ents.values()),
        mentions=[
            Mention(entity_id=entity_id(ns, n), chunk_id=chunks[i].id, document_id=doc, count=c)
            for n, i, c in mentions
        ],
        relationships=[
            Relationship(
                id=f"{doc}-r{k}",
                namespace_id=ns,
                source_id=entity_id(ns, s),
                target_id=entity_id(ns, t),
                type=typ,
                weight=w,
                document_id=doc,
                chunk_id=chunks[0].id,
            )
            for k, (s, t, typ, w) in enumerate(relations)
        ],
        replaces=list(replaces),
    )


async def count_nodes(driver: Any, ns: str) -> dict[str, int]:
    out = {}
    for label in ("Chunk", "Entity", "TimeNode"):
        records, _, _ = await driver.execute_query(
            f"MATCH (n:{label} {{namespace_id: $ns}}) RETURN count(n) AS n", {"ns": ns}
        )
        out[label] = records[0]["n"]
    return out


async def test_write_batch_round_trip(store: Neo4jGraphStore, graph_namespace: str) -> None:
    ns = graph_namespace
    assert isinstance(store, GraphStore)
    batch = make_batch(
        ns,
        "d1",
        ["Alice met Bob at Acme.", "Bob works at Acme in Paris."],
        entities={"Alice": "PERSON", "Bob": "PERSON", "Acme": "ORG"},
        mentions=[("Alice", 0, 1), ("Bob", 0, 1), ("Acme", 0, 1), ("Bob", 1, 2), ("Acme", 1, 1)],
        relations=[("Alice", "Bob", "KNOWS", 0.5), ("Bob", "Acme", "WORKS_AT", 2.0)],
        occurred=[T0, T0 + timedelta(days=1)],
        metadata={"tier": "gold", "when": "2024-01-01T00:00:00+00:00"},
    )
    batch.entities[0].aliases = ["Al", "ALICE"]
    batch.entities[0].description = "a person"
    await store.write_batch(ns, batch)

    assert await store.count_entities(ns) == 3
    assert await store.count_relationships(ns) == 2
    bob = await store.get_entity(ns, entity_id(ns, "Bob"))
    assert bob is not None and bob.mention_count == 3 and bob.type == "PERSON"
    alice = (await store.find_entities_by_name(ns, ["al"]))[0]
    assert alice.name == "Alice" and alice.aliases == ["Al"] and alice.description == "a person"
    assert [e.name for e in await store.list_entities(ns)] == ["Bob", "Acme", "Alice"]
    assert [e.name for e in await store.list_entities(ns, type="ORG")] == ["Acme"]

    page = await store.chunks_for_entities(ns, [entity_id(ns, "Bob"), entity_id(ns, "Acme")], limit=10)
    assert [(h.chunk.id, h.score, h.rank) for h in page.hits] == [("d1-c1", 3.0, 1), ("d1-c0", 2.0, 2)]
    got, want = page.hits[1].chunk, batch.chunks[0]
    assert got.model_dump() == want.model_dump()  # content, offsets, dates, metadata, tags

    by_chunk = await store.entities_for_chunks(ns, ["d1-c1", "nope"])
    assert list(by_chunk) == ["d1-c1"] and [e.name for e in by_chunk["d1-c1"]] == ["Bob", "Acme"]
    assert await store.documents_for_entities(ns, [entity_id(ns, "Alice")]) == {
        entity_id(ns, "Alice"): ["d1"]
    }
    among = await store.relationships_among(ns, [entity_id(ns, n) for n in ("Alice", "Bob", "Acme")])
    assert [(r.type, r.weight, r.document_id, r.chunk_id) for r in among] == [
        ("WORKS_AT", 2.0, "d1", "d1-c0"),
        ("KNOWS", 0.5, "d1", "d1-c0"),
    ]
    knows = await store.list_relationships(ns, types=["KNOWS"])
    assert [(r.source_id, r.target_id) for r in knows] == [(entity_id(ns, "Alice"), entity_id(ns, "Bob"))]
    assert len(await store.list_relationships(ns, entity_ids=[entity_id(ns, "Acme")])) == 1


async def test_entity_merges_across_documents(store: Neo4jGraphStore, graph_namespace: str) -> None:
    ns = graph_namespace
    await store.write_batch(
        ns, make_batch(ns, "d1", ["Acme one"], entities={"Acme": "CONCEPT"}, mentions=[("Acme", 0, 2)])
    )
    second = make_batch(ns, "d2", ["ACME two"], entities={"Acme": "ORG"}, mentions=[("Acme", 0, 1)])
    second.entities[0].name = "ACME"
    second.entities[0].aliases = ["Acme Corp"]
    await store.write_batch(ns, second)
    acme = await store.get_entity(ns, entity_id(ns, "Acme"))
    assert acme is not None
    assert (acme.name, acme.type, acme.mention_count) == ("Acme", "ORG", 3)
    assert acme.aliases == ["Acme Corp"]  # the re-cased name is not an alias of itself
    assert await store.delete_document(ns, "d1")
    acme = await store.get_entity(ns, entity_id(ns, "Acme"))
    assert acme is not None and acme.mention_count == 1
    assert await store.documents_for_entities(ns, [acme.id]) == {acme.id: ["d2"]}


async def test_neighbourhood_depth_fanout_and_types(store: Neo4jGraphStore, graph_namespace: str) -> None:
    ns = graph_namespace
    chain = [f"N{i}" for i in range(7)]
    spokes = [f"S{i}" for i in range(6)]
    relations = [(a, b, "NEXT", 1.0) for a, b in itertools.pairwise(chain)]
    relations += [("N0", s, "SPOKE", float(i)) for i, s in enumerate(spokes)]
    batch = make_batch(
        ns, "d1", ["graph"], entities=dict.fromkeys(chain + spokes, "CONCEPT"), relations=relations
    )
    await store.write_batch(ns, batch)
    ids = {name: entity_id(ns, name) for name in chain + spokes}
    names = {v: k for k, v in ids.items()}

    hood = await store.neighbourhood(ns, [ids["N2"]], depth=2, relationship_types=["NEXT"])
    assert {names[e]: d for e, d in hood.distance.items()} == {"N2": 0, "N1": 1, "N3": 1, "N0": 2, "N4": 2}
    assert {e.id for e in hood.entities} == set(hood.distance)
    assert len(hood.relationships) == 4 and all(r.type == "NEXT" for r in hood.relationships)

    deep = await store.neighbourhood(ns, [ids["N0"]], depth=10, relationship_types=["NEXT"])
    assert max(deep.distance.values()) == 4 and names[max(deep.distance, key=deep.distance.get)] == "N4"

    fan = await store.neighbourhood(ns, [ids["N0"]], depth=1, max_fanout=3)
    # The three heaviest edges of N0: spokes with weights 5, 4, 3 (NEXT weighs 1).
    assert {names[e] for e, d in fan.distance.items() if d == 1} == {"S5", "S4", "S3"}
    none = await store.neighbourhood(ns, [ids["N0"]], depth=2, relationship_types=["NO_SUCH"])
    assert none.distance == {ids["N0"]: 0} and none.relationships == []
    assert (await store.neighbourhood(ns, ["missing"], depth=2)).entities == []
    # A seed that is not there walks nowhere and is not returned; the others walk as alone.
    mixed = await store.neighbourhood(ns, ["missing", ids["N2"]], depth=2, relationship_types=["NEXT"])
    assert mixed.distance == hood.distance and {r.id for r in mixed.relationships} == {
        r.id for r in hood.relationships
    }
    capped = await store.neighbourhood(ns, ["missing", ids["N0"]], depth=1, max_entities=2)
    assert len(capped.distance) == 3 and "missing" not in capped.distance  # N0 and two more


async def test_temporal_sort_and_time_nodes(
    store: Neo4jGraphStore, graph_namespace: str, neo4j_driver: Any
) -> None:
    ns = graph_namespace
    occurred = [T0, T0 + timedelta(days=3), None, T0 + timedelta(hours=2)]
    batch = make_batch(
        ns,
        "d1",
        ["a", "b", "c", "d"],
        entities={"X": "CONCEPT"},
        mentions=[("X", 0, 5), ("X", 1, 1), ("X", 2, 9), ("X", 3, 2)],
        occurred=occurred,
    )
    await store.write_batch(ns, batch)
    x = [entity_id(ns, "X")]
    by_mentions = await store.chunks_for_entities(ns, x, limit=10)
    assert [h.chunk.index for h in by_mentions.hits] == [2, 0, 3, 1]
    by_time = await store.chunks_for_entities(ns, x, limit=10, temporal_sort=True)
    expected = sorted(
        range(4), key=lambda i: (occurred[i] is None, -(occurred[i] or T0).timestamp(), -[5, 1, 9, 2][i])
    )
    assert [h.chunk.index for h in by_time.hits] == expected == [1, 3, 0, 2]
    assert by_time.hits[0].chunk.occurred_at == occurred[1]
    assert [
        h.chunk.index for h in (await store.chunks_for_entities(ns, x, limit=2, temporal_sort=True)).hits
    ] == [1, 3]

    assert await store.time_nodes_for_chunk(ns, "d1-c0") == ["2024-03-10"]
    assert await store.time_nodes_for_chunk(ns, "d1-c1") == ["2024-03-13"]
    assert await store.time_nodes_for_chunk(ns, "d1-c2") == []
    assert (await count_nodes(neo4j_driver, ns))["TimeNode"] == 2  # c0 and c3 share a day


async def test_delete_document_leaves_no_orphans(
    store: Neo4jGraphStore, graph_namespace: str, neo4j_driver: Any
) -> None:
    ns = graph_namespace
    await store.write_batch(
        ns,
        make_batch(
            ns,
            "d1",
            ["Alice and Bob", "Bob"],
            entities={"Alice": "PERSON", "Bob": "PERSON"},
            mentions=[("Alice", 0, 1), ("Bob", 0, 1), ("Bob", 1, 1)],
            relations=[("Alice", "Bob", "KNOWS", 1.0)],
            occurred=[T0, T0 + timedelta(days=1)],
        ),
    )
    await store.write_batch(
        ns,
        make_batch(
            ns, "d2", ["Bob again"], entities={"Bob": "PERSON"}, mentions=[("Bob", 0, 1)], occurred=[T0]
        ),
    )
    # An entity added outside any document, with no mention and no edge, is left alone.
    await store.upsert_graph(ns, entities=[Entity(id="free", namespace_id=ns, name="Free")])
    assert await store.delete_document(ns, "d1") is True
    assert await store.delete_document(ns, "d1") is False
    assert await count_nodes(neo4j_driver, ns) == {"Chunk": 1, "Entity": 2, "TimeNode": 1}
    assert await store.get_entity(ns, entity_id(ns, "Alice")) is None
    bob = await store.get_entity(ns, entity_id(ns, "Bob"))
    assert bob is not None and bob.mention_count == 1
    assert await store.count_relationships(ns) == 0
    assert await store.time_nodes_for_chunk(ns, "d2-c0") == ["2024-03-10"]
    assert await store.get_entity(ns, "free") is not None


async def test_replaces_and_atomic_failure(
    store: Neo4jGraphStore, graph_namespace: str, neo4j_driver: Any
) -> None:
    ns = graph_namespace
    await store.write_batch(
        ns,
        make_batch(ns, "d1", ["old"], entities={"Old": "CONCEPT"}, mentions=[("Old", 0, 1)], occurred=[T0]),
    )
    newer = make_batch(
        ns, "d2", ["new"], entities={"New": "CONCEPT"}, mentions=[("New", 0, 1)], replaces=["d1"]
    )
    await store.write_batch(ns, newer)
    assert [e.name for e in await store.list_entities(ns)] == ["New"]
    assert await count_nodes(neo4j_driver, ns) == {"Chunk": 1, "Entity": 1, "TimeNode": 0}

    broken = make_batch(ns, "d3", ["x"], entities={"Y": "CONCEPT"}, mentions=[("Y", 0, 1)], replaces=["d2"])
    broken.mentions.append(Mention(entity_id="ghost", chunk_id="d3-c0", document_id="d3"))
    with pytest.raises(InvalidInputError, match="ghost"):
        await store.write_batch(ns, broken)
    # A mention of a chunk neither written here nor stored is refused too.
    stray = make_batch(ns, "d4", ["x"], entities={"Y": "CONCEPT"}, mentions=[("Y", 0, 1)], replaces=["d2"])
    stray.mentions.append(stray.mentions[0].model_copy(update={"chunk_id": "ghost-chunk"}))
    with pytest.raises(InvalidInputError, match="ghost-chunk"):
        await store.write_batch(ns, stray)
    # Nothing of the failed writes landed, and the replaced document is still there.
    assert [e.name for e in await store.list_entities(ns)] == ["New"]
    assert await count_nodes(neo4j_driver, ns) == {"Chunk": 1, "Entity": 1, "TimeNode": 0}


async def test_namespace_isolation(store: Neo4jGraphStore, neo4j_driver: Any) -> None:
    ns1, ns2 = f"test-{uuid.uuid4().hex[:12]}", f"test-{uuid.uuid4().hex[:12]}"
    try:
        for ns in (ns1, ns2):
            batch = make_batch(
                ns,
                "d1",  # same document and chunk ids in both namespaces
                ["Alice and Bob"],
                entities={"Alice": "PERSON", "Bob": "PERSON"},
                mentions=[("Alice", 0, 1), ("Bob", 0, 1)],
                relations=[("Alice", "Bob", "KNOWS", 1.0)],
                occurred=[T0],
            )
            for e in batch.entities:  # force identical entity ids too
                e.id = f"shared-{e.name}"
            for m in batch.mentions:
                m.entity_id = f"shared-{'Alice' if m.entity_id == entity_id(ns, 'Alice') else 'Bob'}"
            rel = batch.relationships[0]
            rel.source_id, rel.target_id = "shared-Alice", "shared-Bob"
            await store.write_batch(ns, batch)
        for ns in (ns1, ns2):
            assert await count_nodes(neo4j_driver, ns) == {"Chunk": 1, "Entity": 2, "TimeNode": 1}
            page = await store.chunks_for_entities(ns, ["shared-Alice"], limit=5)
            assert [h.chunk.namespace_id for h in page.hits] == [ns]
            hood = await store.neighbourhood(ns, ["shared-Alice"], depth=2)
            assert {r.namespace_id for r in hood.relationships} == {ns}
        assert await store.delete_document(ns2, "d1")
        assert await count_nodes(neo4j_driver, ns2) == {"Chunk": 0, "Entity": 0, "TimeNode": 0}
        assert await count_nodes(neo4j_driver, ns1) == {"Chunk": 1, "Entity": 2, "TimeNode": 1}
        assert await store.delete_entities(ns2, ["shared-Alice"]) == 0
        assert await store.delete_namespace(ns2) is False
        assert await store.count_relationships(ns1) == 1
        assert await store.delete_namespace(ns1) is True
        assert await count_nodes(neo4j_driver, ns1) == {"Chunk": 0, "Entity": 0, "TimeNode": 0}
    finally:
        for ns in (ns1, ns2):
            await store.delete_namespace(ns)


async def test_vector_entity_search(store: Neo4jGraphStore, graph_namespace: str, neo4j_driver: Any) -> None:
    ns, other = graph_namespace, f"test-{uuid.uuid4().hex[:12]}"
    query = np.array(unit(0))
    try:
        # The other namespace holds 300 entities much closer to the query than any of ours,
        # so the namespace post-filter must over-fetch past them.
        crowd = [
            Entity(
                id=f"o{i}",
                namespace_id=other,
                name=f"o{i}",
                embedding=(query + 0.05 * np.array(unit(1000 + i))).tolist(),
            )
            for i in range(300)
        ]
        await store.upsert_graph(other, entities=crowd)
        ours = [Entity(id=f"e{i}", namespace_id=ns, name=f"e{i}", embedding=unit(i + 1)) for i in range(20)]
        ours.append(
            Entity(
                id="close",
                namespace_id=ns,
                name="close",
                embedding=(query + 0.5 * np.array(unit(99))).tolist(),
            )
        )
        ours.append(Entity(id="bare", namespace_id=ns, name="bare"))  # no embedding: never a hit
        await store.upsert_graph(ns, entities=ours)

        hits = await store.search_entities_by_vector(ns, query.tolist(), limit=5)
        vectors = {e.id: np.array(e.embedding) for e in ours if e.embedding}
        cos = {i: float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query))) for i, v in vectors.items()}
        expected = sorted(cos, key=lambda i: -cos[i])[:5]
        assert [h.entity.id for h in hits] == expected and expected[0] == "close"
        for h in hits:
            assert h.entity.namespace_id == ns
            assert math.isclose(h.score, cos[h.entity.id], abs_tol=1e-4)
            assert h.entity.embedding is None  # hits carry no vector (get_entities reads it)
        stored = await store.get_entities(ns, [hits[0].entity.id])
        assert stored[0].embedding is not None and len(stored[0].embedding) == DIM
        # Asked for more than the index could find among the crowd (first_k None): every
        # vector is answered by an exact scan of the namespace, in one statement.
        other_query = np.array(unit(5))
        both = await store.search_entities_by_vectors(ns, [query.tolist(), other_query.tolist()], limit=100)
        for q, got in zip([query, other_query], both, strict=True):
            exact = {i: float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q))) for i, v in vectors.items()}
            kept = [i for i in exact if exact[i] >= 0.0]  # min_similarity 0 drops the rest
            assert [h.entity.id for h in got] == sorted(kept, key=lambda i: (-exact[i], i))
            assert all(math.isclose(h.score, exact[h.entity.id], abs_tol=1e-4) for h in got)
        strict = await store.search_entities_by_vector(ns, query.tolist(), limit=5, min_similarity=0.5)
        assert [h.entity.id for h in strict] == [i for i in expected if cos[i] >= 0.5] == ["close"]
        with pytest.raises(InvalidInputError):
            await store.search_entities_by_vector(ns, [1.0, 0.0], limit=3)
        with pytest.raises(InvalidInputError):
            await store.upsert_graph(
                ns, entities=[Entity(id="bad", namespace_id=ns, name="bad", embedding=[1.0])]
            )
    finally:
        await store.delete_namespace(other)


def spy_on_statements(store: Neo4jGraphStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the store's session calls (``fetch``, ``fetch_rows``, ``read``), in order."""
    calls: list[str] = []
    for name in ("fetch", "fetch_rows", "read"):
        real = getattr(store._db, name)

        async def spy(*args: Any, __real: Any = real, __name: str = name, **kwargs: Any) -> Any:
            calls.append(__name)
            return await __real(*args, **kwargs)

        monkeypatch.setattr(store._db, name, spy)
    return calls


async def test_vector_search_is_one_statement_when_the_index_holds_enough(
    store: Neo4jGraphStore, graph_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common case costs one auto-commit statement (the counts that size ``k`` are
    kept between searches), and the store's own writes make it count again."""
    ns = graph_namespace
    # The index is shared by every namespace on the server: ask it for all of them, so that
    # other tests' (or a developer's) entities cannot push this namespace's out of the first k.
    monkeypatch.setattr(entity_vectors, "first_k", lambda limit, total, own: max(total, own) + 1)
    ents = [Entity(id=f"e{i}", namespace_id=ns, name=f"e{i}", embedding=unit(i + 1)) for i in range(30)]
    await store.upsert_graph(ns, entities=ents)
    calls = spy_on_statements(store, monkeypatch)
    query = unit(3)
    first = await store.search_entities_by_vector(ns, query, limit=5)
    assert calls == ["fetch", "fetch_rows"]  # the counts, then the search
    calls.clear()
    again = await store.search_entities_by_vectors(ns, [query, unit(4)], limit=5)
    assert calls == ["fetch_rows"]  # both vectors in one statement, the counts kept
    assert [h.entity.id for h in again[0]] == [h.entity.id for h in first]
    assert again[0][0].entity.id == "e2" and math.isclose(again[0][0].score, 1.0, abs_tol=1e-4)
    assert again[1][0].entity.id == "e3"
    await store.upsert_graph(ns, entities=[Entity(id="new", namespace_id=ns, name="new", embedding=query)])
    calls.clear()
    hits = await store.search_entities_by_vector(ns, query, limit=5)
    assert calls == ["fetch", "fetch_rows"]  # counted again after the write
    assert {h.entity.id for h in hits[:2]} == {"new", "e2"}


async def test_vector_search_stops_growing_below_the_callers_floor(
    store: Neo4jGraphStore, graph_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another namespace's entities fill the first ``k`` candidates, nearer the question than
    ours yet all below the caller's ``min_similarity``: the search ends there, in one
    statement, instead of asking the index for ever more (down to an exact scan)."""
    ns, other = graph_namespace, f"test-{uuid.uuid4().hex[:12]}"
    query = np.array(unit(4242))

    def at_cosine(c: float, seed: int) -> list[float]:
        r = np.array(unit(seed))
        r -= (r @ query) * query
        return (c * query + math.sqrt(1 - c * c) * r / np.linalg.norm(r)).tolist()

    monkeypatch.setattr(entity_vectors, "first_k", lambda limit, total, own: 10)
    try:
        crowd = [
            Entity(id=f"o{i}", namespace_id=other, name=f"o{i}", embedding=at_cosine(0.3, 7000 + i))
            for i in range(40)
        ]
        await store.upsert_graph(other, entities=crowd)
        ours = [
            Entity(id=f"e{i}", namespace_id=ns, name=f"e{i}", embedding=at_cosine(0.1, 8000 + i))
            for i in range(20)
        ]
        await store.upsert_graph(ns, entities=ours)
        calls = spy_on_statements(store, monkeypatch)
        strict = await store.search_entities_by_vector(ns, query.tolist(), limit=5, min_similarity=0.5)
        assert strict == [] and calls == ["fetch", "fetch_rows"]  # the counts, then one search
        # With a floor the crowd passes, the same search grows past it and finds ours.
        calls.clear()
        loose = await store.search_entities_by_vector(ns, query.tolist(), limit=5, min_similarity=0.0)
        assert "read" in calls
        assert len(loose) == 5 and all(h.entity.namespace_id == ns for h in loose)
        assert all(math.isclose(h.score, 0.1, abs_tol=1e-3) for h in loose)
    finally:
        await store.delete_namespace(other)


async def test_filter_pushdown_and_recheck(store: Neo4jGraphStore, graph_namespace: str) -> None:
    ns = graph_namespace
    await store.write_batch(
        ns,
        make_batch(
            ns,
            "d1",
            ["a", "b"],
            entities={"X": "CONCEPT"},
            mentions=[("X", 0, 2), ("X", 1, 1)],
            occurred=[T0, T0 + timedelta(days=10)],
            source_name="slack",
            metadata={"tier": "gold"},
        ),
    )
    await store.write_batch(
        ns,
        make_batch(
            ns,
            "d2",
            ["c"],
            entities={"X": "CONCEPT"},
            mentions=[("X", 0, 5)],
            occurred=[T0],
            source_name="email",
            metadata={"tier": "silver"},
        ),
    )
    x = [entity_id(ns, "X")]
    page = await store.chunks_for_entities(ns, x, limit=10, filter={"source_name": "slack"})
    assert [h.chunk.id for h in page.hits] == ["d1-c0", "d1-c1"]
    assert page.pushed_keys == ["source_name"] and page.post_filtered_keys == []
    page = await store.chunks_for_entities(
        ns, x, limit=10, filter={"metadata.tier": "silver", "occurred_at": {"$lt": T0 + timedelta(days=1)}}
    )
    assert [h.chunk.id for h in page.hits] == ["d2-c0"]
    assert page.pushed_keys == ["occurred_at"] and page.post_filtered_keys == ["metadata.tier"]
    page = await store.chunks_for_entities(ns, x, limit=1, filter={"metadata.tier": "gold"})
    assert [h.chunk.id for h in page.hits] == ["d1-c0"]


async def test_entity_groups_page_like_single_reads_when_the_recheck_drops_a_whole_page(
    store: Neo4jGraphStore, graph_namespace: str
) -> None:
    """A residual filter (re-checked in memory) that drops every row of a group's first
    page sends that group to the paged read; the other groups keep their one-statement page."""
    ns = graph_namespace
    texts = [f"bronze {i}" for i in range(12)]
    await store.write_batch(
        ns,
        make_batch(
            ns,
            "many",
            texts,
            entities={"X": "CONCEPT", "Y": "CONCEPT"},
            mentions=[("X", i, 9) for i in range(12)] + [("Y", 0, 1)],
            occurred=[T0] * 12,
            metadata={"tier": "bronze"},
        ),
    )
    await store.write_batch(
        ns,
        make_batch(
            ns,
            "gold",
            ["gold"],
            entities={"X": "CONCEPT"},
            mentions=[("X", 0, 1)],
            occurred=[T0],
            metadata={"tier": "gold"},
        ),
    )
    x, y = entity_id(ns, "X"), entity_id(ns, "Y")
    groups = [[x], [y], [], [x, y]]
    for options in ({"filter": {"metadata.tier": "gold"}}, {"filter": {"metadata.tier": "bronze"}}, {}):
        for limit in (1, 2, 20):
            grouped = await store.chunks_for_entity_groups(ns, groups, limit=limit, **options)
            single = [await store.chunks_for_entities(ns, g, limit=limit, **options) for g in groups]
            assert [[(h.chunk.id, h.score, h.rank) for h in p.hits] for p in grouped] == [
                [(h.chunk.id, h.score, h.rank) for h in p.hits] for p in single
            ], (options, limit)
    gold = await store.chunks_for_entity_groups(ns, groups, limit=1, filter={"metadata.tier": "gold"})
    assert [[h.chunk.id for h in p.hits] for p in gold] == [["gold-c0"], [], [], ["gold-c0"]]
    assert gold[0].post_filtered_keys == ["metadata.tier"]


async def test_upsert_graph_and_delete_entities(
    store: Neo4jGraphStore, graph_namespace: str, neo4j_driver: Any
) -> None:
    ns = graph_namespace
    a = Entity(id="a", namespace_id=ns, name="A", aliases=["alpha"])
    b = Entity(id="b", namespace_id=ns, name="B")
    rel = Relationship(
        id="r1", namespace_id=ns, source_id="a", target_id="b", type="LINKS", document_id="manual"
    )
    await store.upsert_graph(ns, entities=[a, b], relationships=[rel])
    moved = rel.model_copy(update={"source_id": "b", "target_id": "a", "weight": 3.0})
    await store.upsert_graph(ns, relationships=[moved])
    rels = await store.list_relationships(ns)
    assert [(r.id, r.source_id, r.target_id, r.weight) for r in rels] == [("r1", "b", "a", 3.0)]
    other = rel.model_copy(update={"id": "r-other", "type": "NEAR"})
    await store.upsert_graph(ns, relationships=[other])
    assert await store.delete_relationships(ns, ["r-other", "nope"]) == 1
    assert [r.id for r in await store.list_relationships(ns)] == ["r1"]
    assert await store.count_entities(ns) == 2  # the ends stay
    with pytest.raises(InvalidInputError, match="ghost"):
        await store.upsert_graph(
            ns, relationships=[rel.model_copy(update={"id": "r2", "target_id": "ghost"})]
        )
    assert [e.id for e in await store.find_entities_by_name(ns, ["ALPHA", "b"])] == ["a", "b"]
    assert await store.delete_entities(ns, ["a", "nope"]) == 1
    assert await store.count_relationships(ns) == 0 and await store.count_entities(ns) == 1
    assert await store.find_entities_by_name(ns, ["alpha"]) == []
    records, _, _ = await neo4j_driver.execute_query(
        "MATCH (a:EntityAlias {namespace_id: $ns}) RETURN count(a) AS n", {"ns": ns}
    )
    assert records[0]["n"] == 0  # the alias node went with its entity


async def test_vectors_reach_the_server_whole_and_stay_out_of_the_driver_log(
    store: Neo4jGraphStore, graph_namespace: str, neo4j_driver: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver writes every statement's parameters into its debug line; Khora's statement
    parameters name their lists' lengths there (``params.quiet``), and the server still gets
    every float."""
    ns = graph_namespace
    vectors = {f"v{i}": unit(500 + i) for i in range(3)}
    with caplog.at_level(logging.DEBUG, logger="neo4j"):
        await store.upsert_graph(
            ns, entities=[Entity(id=k, namespace_id=ns, name=k, embedding=v) for k, v in vectors.items()]
        )
        hits = await store.search_entities_by_vector(ns, vectors["v1"], limit=1)
    runs = [r.getMessage() for r in caplog.records if " C: RUN " in r.getMessage()]
    assert any("'rows': <list of 3>" in m for m in runs)  # the entity rows
    assert any("'vectors': <list of 1>" in m for m in runs)  # the question's vector
    assert not any(repr(v[0]) in m for m in runs for v in vectors.values())
    records, _, _ = await neo4j_driver.execute_query(
        "MATCH (e:Entity {namespace_id: $ns}) RETURN e.id AS id, e.embedding AS v", {"ns": ns}
    )
    assert {r["id"]: r["v"] for r in records} == vectors
    assert [h.entity.id for h in hits] == ["v1"] and math.isclose(hits[0].score, 1.0, abs_tol=1e-4)


def _operators(plan: Any) -> list[tuple[str, str]]:
    """(operator type, details) of every operator of an EXPLAIN plan."""
    details = str((plan.get("args") or {}).get("Details", ""))
    return [(plan["operatorType"], details)] + [
        op for child in plan.get("children", []) for op in _operators(child)
    ]


async def _rekeyed_on_open(
    store: Neo4jGraphStore, driver: Any, ns: str, edge: str, keys: list[str], index: str
) -> None:
    """Leave the namespace's ``edge`` edges as a store written before ``keys`` existed did
    (no keys, no ``index``), open the store again, and check that every edge has them back.
    ``edge``, ``keys`` and ``index`` are the test's own constants."""
    await driver.execute_query(
        f"MATCH (:Entity {{namespace_id: $ns}})-[x:{edge}]->() REMOVE " + ", ".join(f"x.{k}" for k in keys),
        {"ns": ns},
    )
    await driver.execute_query(f"DROP INDEX {index}")
    await store.ensure_schema()
    missing = " OR ".join(f"x.{k} IS NULL" for k in keys)
    records, _, _ = await driver.execute_query(
        f"MATCH (:Entity {{namespace_id: $ns}})-[x:{edge}]->() WHERE {missing} RETURN count(x) AS n",
        {"ns": ns},
    )
    assert records[0]["n"] == 0


async def test_mention_rank_reads_each_entity_by_an_index_seek(
    store: Neo4jGraphStore, graph_namespace: str, neo4j_driver: Any
) -> None:
    """``chunk_mentions`` reads an entity's best mentions by a seek on the rank index, not
    its whole degree, and takes each mention's count and chunk id from the index; an entity or namespace whose id starts another's reads only its own;
    edges written before the rank existed get theirs when the store is opened."""
    from khora_core.storage.neo4j.lookups import CHUNK_MENTIONS
    from khora_core.storage.neo4j.mention_rank import MENTION_RANK_INDEX

    ns, longer, astral = graph_namespace, graph_namespace + "9", graph_namespace + "\U0001f600"
    ids = ["e", "e9", "e99"]  # a ten-digit count that counts down starts with 9

    def batch(space: str, counts: dict[str, list[tuple[int, int]]]) -> WriteBatch:
        b = make_batch(space, "d", [f"text {i}" for i in range(4)])
        b.entities = [Entity(id=e, namespace_id=space, name=f"name {e}") for e in ids]
        b.mentions = [
            Mention(entity_id=e, chunk_id=f"d-c{i}", document_id="d", count=n)
            for e, pairs in counts.items()
            for i, n in pairs
        ]
        return b

    want = {"e": {"d-c1": 3, "d-c0": 1}, "e9": {"d-c2": 2}, "e99": {"d-c3": 1, "d-c0": 1}}
    await store.write_batch(ns, batch(ns, {"e": [(0, 1), (1, 3)], "e9": [(2, 2)], "e99": [(3, 1), (0, 1)]}))
    await store.write_batch(longer, batch(longer, {"e": [(2, 5)], "e9": [(0, 4), (1, 1)]}))
    try:
        assert await store.chunk_mentions(ns, ids, per_entity=5) == want
        assert await store.chunk_mentions(ns, ids, per_entity=1) == {
            "e": {"d-c1": 3},
            "e9": {"d-c2": 2},
            "e99": {"d-c0": 1},  # equal counts: the smaller chunk id first
        }
        assert await store.chunk_mentions(longer, ids, per_entity=5) == {
            "e": {"d-c2": 5},
            "e9": {"d-c0": 4, "d-c1": 1},
        }
        # A namespace id outside the Basic Multilingual Plane: the key's prefix is measured
        # and cut in the same units.
        await store.write_batch(astral, batch(astral, {"e": [(3, 7)]}))
        assert await store.chunk_mentions(astral, ids, per_entity=5) == {"e": {"d-c3": 7}}
        _, summary, _ = await neo4j_driver.execute_query(
            "EXPLAIN " + CHUNK_MENTIONS, {"ns": ns, "ids": ids, "per": 5}
        )
        seeks = [d for op, d in _operators(summary.plan) if "IndexSeekByRange" in op]
        assert any("MENTIONED_IN(rank)" in d for d in seeks), _operators(summary.plan)
        # Count and chunk id come from the index's key: no edge property, no chunk node read.
        details = " ".join(d for _, d in _operators(summary.plan))
        assert "cache[m.rank]" in details and "Chunk" not in details, _operators(summary.plan)

        # A graph written before the rank: no rank on its edges and no index.
        await _rekeyed_on_open(store, neo4j_driver, ns, "MENTIONED_IN", ["rank"], MENTION_RANK_INDEX)
        assert await store.chunk_mentions(ns, ids, per_entity=5) == want
    finally:
        await store.ensure_schema()  # the index back for the tests after this one, whatever happened
        await store.delete_namespace(longer)
        await store.delete_namespace(astral)


async def test_pair_rank_reads_a_busy_pair_by_an_index_seek(
    store: Neo4jGraphStore, graph_namespace: str, neo4j_driver: Any
) -> None:
    """Between two entities with more than ``DENSE_DEGREE`` edges, ``chunk_graph`` reads a
    pair's heaviest relationships by a seek on the pair rank index, ``per_pair`` deep, sorting
    on the index's values; a
    namespace whose id starts another's reads only its own; re-writing a relationship
    re-keys it; edges written before the rank existed get theirs when the store is opened."""
    from khora_core.storage.neo4j.lookups import CHUNK_GRAPH
    from khora_core.storage.neo4j.pair_rank import DENSE_DEGREE, PAIR_RANK_INDEX

    ns, longer = graph_namespace, graph_namespace + "9"
    n = DENSE_DEGREE + 20
    names = {"Ann": "PERSON", "Bea": "PERSON"}

    def batch(space: str, doc: str, weights: list[float]) -> WriteBatch:
        relations = [("Ann", "Bea", "KNOWS", w) for w in weights]
        return make_batch(
            space,
            doc,
            ["Ann and Bea"],
            entities=names,
            mentions=[("Ann", 0, 1), ("Bea", 0, 1)],
            relations=relations,
        )

    weights = [float(k % 5) for k in range(n)]
    await store.write_batch(ns, batch(ns, "d", weights))
    await store.write_batch(longer, batch(longer, "d", [100.0] * 3))

    def heaviest(k: int) -> list[str]:
        return [rid for _, rid in sorted((-w, f"d-r{i}") for i, w in enumerate(weights))][:k]

    async def read(space: str) -> list[str]:
        graph = await store.chunk_graph(space, ["d-c0"], per_pair=3)
        return [r.id for r in graph.relationships]

    try:
        assert await read(ns) == heaviest(3)
        assert await read(longer) == ["d-r0", "d-r1", "d-r2"]
        _, summary, _ = await neo4j_driver.execute_query(
            "EXPLAIN " + CHUNK_GRAPH,
            {"ns": ns, "ids": ["d-c0"], "scores": {}, "max_entities": 30, "max_relationships": 100,
             "per_pair": 3, "dense": DENSE_DEGREE},
        )  # fmt: skip
        seeks = [d for op, d in _operators(summary.plan) if "RelationshipIndexSeek" in op]
        assert any("RELATES(pair, rank_weight, id)" in d for d in seeks), _operators(summary.plan)
        # The seek hands on the weight and id it sorts by from the index itself.
        assert any("cache[r.rank_weight]" in d and "cache[r.id]" in d for d in seeks), seeks

        # Re-writing one relationship heavier moves it to the front.
        top = Relationship(id="d-r7", namespace_id=ns, source_id=entity_id(ns, "Ann"),
                           target_id=entity_id(ns, "Bea"), type="KNOWS", weight=50.0, document_id="d")  # fmt: skip
        await store.upsert_graph(ns, relationships=[top])
        weights[7] = 50.0
        assert await read(ns) == heaviest(3) and heaviest(1) == ["d-r7"]

        # A graph written before the rank: no rank on its edges and no index.
        await _rekeyed_on_open(store, neo4j_driver, ns, "RELATES", ["pair", "rank_weight"], PAIR_RANK_INDEX)
        assert await read(ns) == heaviest(3)
    finally:
        await store.ensure_schema()  # the index back for the tests after this one, whatever happened
        await store.delete_namespace(longer)


async def test_schema_is_idempotent_and_checks_dimension(store: Neo4jGraphStore, neo4j_driver: Any) -> None:
    await store.ensure_schema()
    with pytest.raises(ConfigError, match="384"):
        await Neo4jGraphStore(neo4j_driver, embedding_dim=8).ensure_schema()


async def test_driver_errors_are_translated(neo4j_settings: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as bad_pw:
        await open_driver(neo4j_settings["uri"], neo4j_settings["user"], "not-the-password")
    assert bad_pw.value.setting == "KHORA_STORAGE_NEO4J_PASSWORD"
    assert "KHORA_STORAGE_NEO4J_PASSWORD" in str(bad_pw.value)
    with pytest.raises(StorageUnavailableError):
        await open_driver("bolt://127.0.0.1:1", "neo4j", "whatever-pw", timeout=2.0)
    user, password = neo4j_settings["user"], neo4j_settings["password"]
    host = neo4j_settings["uri"].split("://", 1)[1]
    driver = await open_driver(f"bolt://{user}:{password}@{host}", "ignored", None)
    await driver.close()


async def test_lost_server_is_storage_unavailable() -> None:
    import neo4j

    # Nothing listens on port 1; short timeouts keep the retries (managed transactions and
    # the one-statement reads' own) brief.
    driver = neo4j.AsyncGraphDatabase.driver(
        "bolt://127.0.0.1:1", auth=("neo4j", "x"), connection_timeout=1.0, max_transaction_retry_time=0.5
    )
    try:
        with pytest.raises(StorageUnavailableError) as lost:
            await Neo4jGraphStore(driver).count_entities("ns")
        assert lost.value.setting == "KHORA_NEO4J_URL"
    finally:
        await driver.close()


async def test_one_statement_reads_retry_what_the_driver_calls_retryable(
    store: Neo4jGraphStore, graph_namespace: str
) -> None:
    """One-statement reads run in auto-commit transactions: a transient failure is retried
    (as a managed transaction would be) and the read still answers; a client error is not."""
    from neo4j import exceptions as nx

    from khora_core.storage.neo4j.search import records_of

    calls: list[str] = []

    async def flaky(session: Any, query: str, **params: Any) -> list[dict[str, Any]]:
        calls.append(query)
        if len(calls) == 1:
            raise nx.TransientError("the lock client was stopped")
        return await records_of(session, query, **params)

    rows = await store._db.statement(flaky, "RETURN $ns AS ns", {"ns": graph_namespace})
    assert rows == [{"ns": graph_namespace}] and len(calls) == 2

    async def refused(session: Any, query: str, **params: Any) -> list[dict[str, Any]]:
        calls.append(query)
        raise nx.ClientError("a malformed statement")

    calls.clear()
    with pytest.raises(KhoraError) as failed:
        await store._db.statement(refused, "RETURN 1", {})
    assert isinstance(failed.value.__cause__, nx.ClientError) and len(calls) == 1


def test_url_credentials_and_error_mapping() -> None:
    from neo4j import exceptions as nx

    from khora_core.storage.neo4j.errors import split_credentials, translate_error

    assert split_credentials("bolt://neo4j:p%40ss@db:7688") == ("bolt://db:7688", "neo4j", "p@ss")
    assert split_credentials("neo4j://db") == ("neo4j://db", None, None)
    assert isinstance(translate_error(nx.SessionExpired("gone")), StorageUnavailableError)
    assert translate_error(nx.AuthError("no")).setting == "KHORA_STORAGE_NEO4J_PASSWORD"  # type: ignore[attr-defined]
    plain = ValueError("not a driver error")
    assert translate_error(plain) is plain


def test_first_k_sizes_the_index_search_by_the_namespace_share() -> None:
    """The first ``k`` should hold ``4 * limit`` of the namespace's entities; a namespace
    too small for that within ``_MAX_VECTOR_K`` is scanned exactly (None)."""
    from khora_core.storage.neo4j.entity_vectors import _COUNT_CAP, _MAX_VECTOR_K, first_k

    assert first_k(10, 1_000, 1_000) == 50  # alone: the base k
    assert first_k(10, 10_000, 1_000) == 400  # a tenth of the index
    assert first_k(10, 52_000, 600) == 3_467  # one LoCoMo conversation beside a corpus
    assert first_k(25, 52_000, 600) is None  # 8,667 > _MAX_VECTOR_K: scan exactly
    assert math.ceil(100 * 52_000 / 600) > _MAX_VECTOR_K
    assert first_k(10, 10**6, _COUNT_CAP) == 50  # a large namespace: the base k, then grow


async def test_the_jvm_says_how_long_it_has_compiled(neo4j_driver: Any) -> None:
    from khora_core.storage.neo4j.settle import jvm_compilation

    async def compilation_ms() -> float | None:
        reading = await jvm_compilation(neo4j_driver, database="neo4j")
        return None if reading is None else reading[0]

    first = await compilation_ms()
    assert first is not None and first > 0  # a server that has answered queries has compiled
    for _ in range(20):  # work that the JIT may compile meanwhile
        await neo4j_driver.execute_query(
            "UNWIND range(1, 2000) AS i RETURN sum(i * i) AS s", database_="neo4j"
        )
    later = await compilation_ms()
    assert later is not None and later >= first  # a running total
