"""The embedded ``sqlite_lance`` stack against real SQLite + LanceDB files in ``tmp_path``."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from khora_core.config import StorageConfig
from khora_core.errors import InvalidInputError, NamespaceNotFoundError, StorageError
from khora_core.models import Chunk, Document, Entity, Mention, Namespace, Relationship, WriteBatch
from khora_core.storage.protocols import DocumentStore, GraphStore, KeywordIndex, VectorIndex
from khora_core.storage.sqlite_lance import SqliteLanceStack
from khora_core.storage.sqlite_lance import graph_traversal as graph_traversal_module
from khora_core.storage.sqlite_lance import vectors as vectors_module
from khora_core.storage.sqlite_lance.keywords import match_expression
from khora_core.storage.sqlite_lance.lance import LanceVectors

DIM = 8
UTC = timezone.utc
T0 = datetime(2024, 1, 15, 10, 0, tzinfo=UTC)


def vec(*xs: float) -> list[float]:
    return [float(x) for x in xs] + [0.0] * (DIM - len(xs))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def batch(
    ns: str,
    doc_id: str,
    texts: Sequence[str],
    vectors: Sequence[list[float] | None] | None = None,
    *,
    occurred: Sequence[datetime | None] | None = None,
    entities: Sequence[Entity] = (),
    mentions: Sequence[tuple[str, int, int]] = (),
    relationships: Sequence[tuple[str, str, str, float]] = (),
    replaces: Sequence[str] = (),
    **system: Any,
) -> WriteBatch:
    """A document of ``texts`` chunks; mentions are ``(entity_id, chunk_index, count)``,
    relationships ``(source_id, target_id, type, weight)``."""
    created = system.pop("created_at", T0)
    doc = Document(
        id=doc_id,
        namespace_id=ns,
        content=" ".join(texts),
        content_hash=f"hash-{doc_id}",
        created_at=created,
        occurred_at=(occurred or [None])[0],
        **system,
    )
    chunks = [
        Chunk(
            id=f"{doc_id}-c{i}",
            namespace_id=ns,
            document_id=doc_id,
            index=i,
            content=text,
            start_char=0,
            end_char=len(text),
            token_count=len(text.split()),
            embedding=(vectors[i] if vectors else vec(1.0, float(i))),
            created_at=created,
            occurred_at=occurred[i] if occurred else None,
            **system,
        )
        for i, text in enumerate(texts)
    ]
    return WriteBatch(
        document=doc,
        chunks=chunks,
        entities=list(entities),
        mentions=[
            Mention(entity_id=e, chunk_id=f"{doc_id}-c{i}", document_id=doc_id, count=n)
            for e, i, n in mentions
        ],
        relationships=[
            Relationship(
                id=f"{doc_id}-r{k}",
                namespace_id=ns,
                source_id=s,
                target_id=t,
                type=ty,
                weight=w,
                document_id=doc_id,
                chunk_id=f"{doc_id}-c0",
            )
            for k, (s, t, ty, w) in enumerate(relationships)
        ],
        replaces=list(replaces),
    )


def ent(
    ns: str, name: str, *, aliases: Sequence[str] = (), type: str = "PERSON", embedding: Any = None
) -> Entity:
    return Entity(
        id=f"e-{name.lower()}",
        namespace_id=ns,
        name=name,
        type=type,
        aliases=list(aliases),
        embedding=embedding,
    )


@pytest.fixture
def config(tmp_path: Path) -> StorageConfig:
    return StorageConfig(data_dir=tmp_path / "khora-data")


@pytest.fixture
async def stack(config: StorageConfig) -> AsyncIterator[SqliteLanceStack]:
    s = SqliteLanceStack(config, dim=DIM)
    await s.open()
    yield s
    await s.aclose()


async def new_ns(stack: SqliteLanceStack, ns: str | None = None) -> str:
    ns = ns or f"ns-{uuid.uuid4().hex[:8]}"
    await stack.documents.create_namespace(
        Namespace(namespace_id=ns, name="t", created_at=T0, metadata={"k": 1})
    )
    return ns


def raw_rows(config: StorageConfig, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(Path(config.data_dir) / "khora.sqlite3")
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def fts_terms(config: StorageConfig) -> set[str]:
    """Terms in the FTS5 index itself (not the content table), after an integrity check."""
    conn = sqlite3.connect(Path(config.data_dir) / "khora.sqlite3")
    try:
        conn.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, chunks_fts, 'row')")
        return {r[0] for r in conn.execute("SELECT term FROM temp.vocab")}
    finally:
        conn.close()


def lance_ids(config: StorageConfig, ns: str) -> list[str]:
    lance = LanceVectors(Path(config.data_dir) / "lance", dim=DIM)
    lance.open()
    return lance.chunk_ids(ns)


# -- basics ----------------------------------------------------------------------------------


async def test_protocols_and_no_io_in_constructor(tmp_path: Path) -> None:
    s = SqliteLanceStack(StorageConfig(data_dir=tmp_path / "nothing-yet"), dim=DIM)
    assert not (tmp_path / "nothing-yet").exists()
    assert s.name == "sqlite_lance"
    assert isinstance(s.documents, DocumentStore)
    assert isinstance(s.vectors, VectorIndex)
    assert isinstance(s.keywords, KeywordIndex)
    assert isinstance(s.graph, GraphStore)
    with pytest.raises(StorageError, match="open"):
        await s.documents.list_namespaces()


async def test_round_trip(stack: SqliteLanceStack) -> None:
    ns = await new_ns(stack)
    assert (await stack.documents.get_namespace(ns)).metadata == {"k": 1}
    assert ns in [n.namespace_id for n in await stack.documents.list_namespaces()]
    with pytest.raises(InvalidInputError):
        await new_ns(stack, ns)
    meta = {"tier": "gold", "n": 3, "when": datetime(2024, 2, 1, tzinfo=UTC), "nested": {"a": [1, 2]}}
    b = batch(
        ns,
        "d1",
        ["alpha beta", "gamma delta"],
        occurred=[T0, T0 + timedelta(days=2)],
        source_name="linear",
        source_type="ticket",
        external_id="ext-1",
        title="Title",
        metadata=meta,
        tags=["x", "y"],
        source_timestamp=T0 - timedelta(hours=1),
    )
    await stack.write(ns, b)
    (doc,) = await stack.documents.get_documents(ns, ["d1", "missing"])
    assert doc.content == "alpha beta gamma delta" and doc.title == "Title" and doc.tags == ["x", "y"]
    assert doc.metadata == {**meta, "when": "2024-02-01T00:00:00+00:00"}
    assert doc.source_timestamp == T0 - timedelta(hours=1) and doc.created_at.tzinfo is not None
    assert (await stack.documents.find_document_by_hash(ns, "hash-d1")).id == "d1"
    assert [d.id for d in await stack.documents.find_documents_by_external_id(ns, "ext-1")] == ["d1"]
    chunks = await stack.documents.get_chunks(ns, ["d1-c1", "d1-c0"])
    assert [c.id for c in chunks] == ["d1-c1", "d1-c0"]
    c1 = chunks[0]
    assert (c1.index, c1.content, c1.occurred_at, c1.source_name, c1.metadata["tier"]) == (
        1,
        "gamma delta",
        T0 + timedelta(days=2),
        "linear",
        "gold",
    )
    assert c1.filter_record()["source_type"] == "ticket"
    assert await stack.documents.newest_occurred_at(ns) == T0 + timedelta(days=2)
    assert await stack.graph.time_nodes_for_chunk(ns, "d1-c1") == ["2024-01-17"]
    stats = await stack.stats(ns)
    assert (stats.documents, stats.chunks, stats.entities, stats.relationships) == (1, 2, 0, 0)
    with pytest.raises(InvalidInputError, match="already exists"):
        await stack.write(ns, batch(ns, "d1", ["again"]))
    with pytest.raises(NamespaceNotFoundError):
        await stack.write("nope", batch("nope", "d9", ["x"]))
    with pytest.raises(InvalidInputError, match="dimensional"):
        await stack.write(ns, batch(ns, "d2", ["x"], [[1.0, 2.0]]))


async def test_survives_restart(config: StorageConfig) -> None:
    s = SqliteLanceStack(config, dim=DIM)
    await s.open()
    ns = await new_ns(s)
    await s.write(
        ns,
        batch(
            ns,
            "d1",
            ["restart me please"],
            [vec(0, 1)],
            entities=[ent(ns, "Ann")],
            mentions=[("e-ann", 0, 1)],
        ),
    )
    await s.aclose()
    await s.aclose()  # idempotent

    s2 = SqliteLanceStack(config, dim=DIM)
    await s2.open()
    try:
        page = await s2.vectors.search(ns, vec(0, 1), limit=5)
        assert [h.chunk.id for h in page.hits] == ["d1-c0"]
        assert (await s2.keywords.search(ns, "restart", limit=5)).hits[0].chunk.id == "d1-c0"
        assert (await s2.graph.get_entity(ns, "e-ann")).mention_count == 1
        await s2.write(ns, batch(ns, "d2", ["after restart"], [vec(0, 1, 1)]))
        assert (await s2.stats(ns)).chunks == 2
    finally:
        await s2.aclose()
    with pytest.raises(Exception, match="dimension"):
        other = SqliteLanceStack(config, dim=DIM + 1)
        await other.open()


# -- vector channel --------------------------------------------------------------------------


async def test_vector_search_order_scores_and_threshold(stack: SqliteLanceStack) -> None:
    ns = await new_ns(stack)
    vectors = [vec(1, 0), vec(1, 1), vec(0, 1), vec(-1, 0), vec(2, 0.1)]
    await stack.write(ns, batch(ns, "d1", [f"chunk {i}" for i in range(5)], vectors))
    q = vec(1, 0.2)
    page = await stack.vectors.search(ns, q, limit=3)
    expected = sorted(range(5), key=lambda i: -cosine(vectors[i], q))[:3]
    assert [h.chunk.id for h in page.hits] == [f"d1-c{i}" for i in expected]
    assert [h.rank for h in page.hits] == [1, 2, 3]
    for h, i in zip(page.hits, expected, strict=True):
        assert h.score == pytest.approx(cosine(vectors[i], q), abs=1e-5)
        assert h.chunk.embedding is not None and len(h.chunk.embedding) == DIM
    page = await stack.vectors.search(ns, q, limit=10, min_similarity=0.5)
    assert all(h.score >= 0.5 for h in page.hits)
    assert {h.chunk.id for h in page.hits} == {f"d1-c{i}" for i in range(5) if cosine(vectors[i], q) >= 0.5}
    assert (await stack.vectors.search(ns, q, limit=0)).hits == []
    assert (await stack.vectors.search("no-such-ns", q, limit=3)).hits == []
    with pytest.raises(InvalidInputError):
        await stack.vectors.search(ns, [1.0, 2.0], limit=3)


async def test_vector_exact_against_numpy_on_many_rows(stack: SqliteLanceStack) -> None:
    """Many small writes (cache patched in place) and a restart-free reload agree with brute force."""
    ns = await new_ns(stack)
    rng = np.random.default_rng(7)
    all_vecs: dict[str, np.ndarray] = {}
    for d in range(30):
        vs = rng.standard_normal((10, DIM)).astype(np.float32)
        await stack.write(ns, batch(ns, f"d{d}", [f"t{d}-{i}" for i in range(10)], [v.tolist() for v in vs]))
        all_vecs.update({f"d{d}-c{i}": vs[i] for i in range(10)})
        if d == 5:  # load the cache early so later writes patch it
            await stack.vectors.search(ns, vs[0].tolist(), limit=1)
    for d in range(0, 30, 3):
        assert await stack.delete_document(ns, f"d{d}")
        for i in range(10):
            all_vecs.pop(f"d{d}-c{i}")
    ids = list(all_vecs)
    m = np.stack([all_vecs[i] for i in ids])
    m = m / np.linalg.norm(m, axis=1, keepdims=True)
    for _ in range(5):
        q = rng.standard_normal(DIM).astype(np.float32)
        truth = [ids[i] for i in np.argsort(-(m @ (q / np.linalg.norm(q))))[:10]]
        page = await stack.vectors.search(ns, q.tolist(), limit=10)
        assert [h.chunk.id for h in page.hits] == truth
    # a second stack instance (another "reader") loads the same answer from disk
    reader = SqliteLanceStack(stack.config, dim=DIM, read_only=True)
    await reader.open()
    try:
        page2 = await reader.vectors.search(ns, q.tolist(), limit=10)
        assert [h.chunk.id for h in page2.hits] == truth
        # the reader notices later writes (version counter) without reopening
        target = (-q).tolist()
        await stack.write(ns, batch(ns, "late", ["late"], [target]))
        assert (await reader.vectors.search(ns, target, limit=1)).hits[0].chunk.id == "late-c0"
        with pytest.raises(StorageError, match="read_only"):
            await reader.write(ns, batch(ns, "x", ["x"]))
    finally:
        await reader.aclose()


async def test_concurrent_reads_and_writes(stack: SqliteLanceStack) -> None:
    ns = await new_ns(stack)
    rng = np.random.default_rng(11)
    vs = rng.standard_normal((40, DIM)).astype(np.float32)

    async def writer(d: int) -> None:
        await stack.write(ns, batch(ns, f"d{d}", [f"word{d}"], [vs[d].tolist()]))

    async def reader(d: int) -> None:
        page = await stack.vectors.search(ns, vs[d].tolist(), limit=3)
        assert all(h.chunk.namespace_id == ns for h in page.hits)
        await stack.keywords.search(ns, f"word{d}", limit=3)

    await asyncio.gather(*(f(d) for d in range(40) for f in (writer, reader)))
    for d in range(40):
        assert (await stack.vectors.search(ns, vs[d].tolist(), limit=1)).hits[0].chunk.id == f"d{d}-c0"
    assert (await stack.stats(ns)).chunks == 40


# -- keyword channel -------------------------------------------------------------------------


async def test_bm25_ranking_sanity(stack: SqliteLanceStack) -> None:
    ns = await new_ns(stack)
    texts = [
        "the quarterly budget review for the pricing team",
        "pricing pricing pricing changes announced",
        "lunch menu for friday",
        "runners were running a long run",
    ]
    await stack.write(ns, batch(ns, "d1", texts))
    hits = (await stack.keywords.search(ns, "pricing", limit=10)).hits
    assert [h.chunk.id for h in hits] == ["d1-c1", "d1-c0"]
    assert hits[0].score > hits[1].score > 0
    # stemming: "runs" finds "running"/"run"; stop words alone still search
    assert [h.chunk.id for h in (await stack.keywords.search(ns, "runs", limit=5)).hits] == ["d1-c3"]
    assert (await stack.keywords.search(ns, "friday lunch", limit=1)).hits[0].chunk.id == "d1-c2"
    assert (await stack.keywords.search(ns, "nothing-matches-zzz", limit=5)).hits == []


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""" unbalanced "quote',
        "pricing*",
        "NEAR(pricing budget, 2)",
        "AND OR NOT",
        "content: pricing",
        "-pricing +budget ^start",
        "(((",
        "pric'ing; DROP TABLE chunks; --",
        "☃ ünïcödé 東京 🤖 pricing",
        "\x00\n\t",
        "",
        "_ _ _",
        "x" * 5000,
        " ".join(f"w{i}" for i in range(500)),
    ],
)
async def test_hostile_keyword_queries_never_raise(stack: SqliteLanceStack, query: str) -> None:
    ns = await new_ns(stack)
    await stack.write(ns, batch(ns, "d1", ["pricing and budget notes", "Tokyo 東京 ünïcödé notes"]))
    page = await stack.keywords.search(ns, query, limit=5)
    assert all(h.chunk.namespace_id == ns for h in page.hits)
    if "pricing" in query:
        assert "d1-c0" in [h.chunk.id for h in page.hits]
    assert (await stack.stats(ns)).chunks == 2


def test_match_expression_quotes_every_token() -> None:
    assert match_expression('say "hi" OR *x*') == '"say" OR "hi" OR "x"'
    assert match_expression("the of and") == '"the" OR "of" OR "and"'
    assert match_expression("the budget") == '"budget"'
    assert match_expression("!!! ***") is None


# -- graph -----------------------------------------------------------------------------------


async def graph_fixture(stack: SqliteLanceStack) -> str:
    """A-B-C-D chain plus a star around A (A-S1..S4, weights 1..4)."""
    ns = await new_ns(stack)
    names = ["A", "B", "C", "D", "S1", "S2", "S3", "S4"]
    es = [ent(ns, n, embedding=vec(*([0.0] * i + [1.0]))) for i, n in enumerate(names)]
    rels = [("e-a", "e-b", "KNOWS", 1.0), ("e-b", "e-c", "KNOWS", 1.0), ("e-c", "e-d", "WORKS_WITH", 1.0)]
    rels += [(f"e-s{i}", "e-a", "FAN", float(i)) for i in range(1, 5)]
    await stack.write(
        ns, batch(ns, "g", ["graph chunk"], entities=es, relationships=rels, mentions=[("e-a", 0, 2)])
    )
    return ns


async def test_neighbourhood_depth_fanout_and_types(stack: SqliteLanceStack) -> None:
    ns = await graph_fixture(stack)
    h1 = await stack.graph.neighbourhood(ns, ["e-a"], depth=1)
    assert h1.distance == {"e-a": 0, "e-b": 1, "e-s1": 1, "e-s2": 1, "e-s3": 1, "e-s4": 1}
    h3 = await stack.graph.neighbourhood(ns, ["e-a"], depth=3)
    assert h3.distance["e-c"] == 2 and h3.distance["e-d"] == 3
    assert {r.type for r in h3.relationships} == {"KNOWS", "WORKS_WITH", "FAN"}
    fan = await stack.graph.neighbourhood(ns, ["e-a"], depth=1, max_fanout=2)
    assert set(fan.distance) == {"e-a", "e-s4", "e-s3"}  # the two heaviest edges
    typed = await stack.graph.neighbourhood(ns, ["e-a"], depth=3, relationship_types=["KNOWS"])
    assert set(typed.distance) == {"e-a", "e-b", "e-c"}
    assert (await stack.graph.neighbourhood(ns, ["e-a"], depth=0)).distance == {"e-a": 0}
    assert (await stack.graph.neighbourhood(ns, ["unknown"], depth=2)).entities == []
    among = await stack.graph.relationships_among(ns, ["e-a", "e-b", "e-c"])
    assert {(r.source_id, r.target_id) for r in among} == {("e-a", "e-b"), ("e-b", "e-c")}
    assert len(await stack.graph.list_relationships(ns)) == 7
    assert len(await stack.graph.list_relationships(ns, entity_ids=["e-a"], types=["FAN"])) == 4


async def test_entity_lookups(stack: SqliteLanceStack) -> None:
    ns = await new_ns(stack)
    alice = ent(ns, "Alice Smith", aliases=["Ali", "ASmith"], embedding=vec(1, 0))
    bob = ent(ns, "Bob", type="CONCEPT", embedding=vec(0, 1))
    await stack.write(
        ns,
        batch(
            ns,
            "d1",
            ["Alice met Bob"],
            entities=[alice, bob],
            mentions=[("e-alice smith", 0, 3), ("e-bob", 0, 1)],
        ),
    )
    found = await stack.graph.find_entities_by_name(ns, ["alice SMITH", "ali", "nobody"])
    assert [e.id for e in found] == ["e-alice smith"] and found[0].embedding is not None
    assert [e.id for e in await stack.graph.find_entities_by_name(ns, ["asmith"])] == ["e-alice smith"]
    hits = await stack.graph.search_entities_by_vector(ns, vec(1, 0.1), limit=2)
    assert [h.entity.id for h in hits] == ["e-alice smith", "e-bob"]
    assert hits[0].score == pytest.approx(cosine(vec(1, 0), vec(1, 0.1)), abs=1e-5)
    assert len(await stack.graph.search_entities_by_vector(ns, vec(1, 0.1), limit=2, min_similarity=0.5)) == 1
    listed = await stack.graph.list_entities(ns)
    assert [e.id for e in listed] == ["e-alice smith", "e-bob"] and listed[0].mention_count == 3
    assert [e.id for e in await stack.graph.list_entities(ns, type="CONCEPT")] == ["e-bob"]
    assert [e.id for e in await stack.graph.list_entities(ns, offset=1, limit=5)] == ["e-bob"]
    by_chunk = await stack.graph.entities_for_chunks(ns, ["d1-c0"])
    assert [e.id for e in by_chunk["d1-c0"]] == ["e-alice smith", "e-bob"]
    assert await stack.graph.documents_for_entities(ns, ["e-bob"]) == {"e-bob": ["d1"]}
    # a later document merges into the same entity: aliases united, type upgraded, count summed
    bob2 = Entity(id="e-bob", namespace_id=ns, name="bob", type="PERSON", aliases=["Robert"])
    await stack.write(ns, batch(ns, "d2", ["Robert again"], entities=[bob2], mentions=[("e-bob", 0, 2)]))
    merged = await stack.graph.get_entity(ns, "e-bob")
    assert (merged.name, merged.type, merged.aliases, merged.mention_count) == (
        "Bob",
        "PERSON",
        ["Robert"],
        3,
    )
    assert merged.embedding == pytest.approx(vec(0, 1))
    assert [e.id for e in await stack.graph.find_entities_by_name(ns, ["ROBERT"])] == ["e-bob"]
    # upsert_graph / delete_entities
    carol = ent(ns, "Carol", embedding=vec(0, 0, 1))
    rel = Relationship(
        id="r-x", namespace_id=ns, source_id="e-carol", target_id="e-bob", type="KNOWS", document_id="manual"
    )
    await stack.graph.upsert_graph(ns, entities=[carol], relationships=[rel])
    assert [r.id for r in await stack.graph.list_relationships(ns, entity_ids=["e-carol"])] == ["r-x"]
    near = rel.model_copy(update={"id": "r-near", "type": "NEAR"})
    await stack.graph.upsert_graph(ns, relationships=[near])
    assert await stack.graph.delete_relationships(ns, ["r-near", "r-ghost"]) == 1
    assert [r.id for r in await stack.graph.list_relationships(ns, entity_ids=["e-carol"])] == ["r-x"]
    assert await stack.graph.get_entity(ns, "e-bob") is not None  # the ends stay
    assert (await stack.graph.search_entities_by_vector(ns, vec(0, 0, 1), limit=1))[0].entity.id == "e-carol"
    bad = rel.model_copy(update={"id": "r-y", "target_id": "e-ghost"})
    with pytest.raises(InvalidInputError, match="unknown entities"):
        await stack.graph.upsert_graph(ns, relationships=[bad])
    assert await stack.graph.delete_entities(ns, ["e-carol", "e-ghost"]) == 1
    assert await stack.graph.list_relationships(ns, entity_ids=["e-carol"]) == []
    assert await stack.graph.get_entity(ns, "e-carol") is None
    assert [h.entity.id for h in await stack.graph.search_entities_by_vector(ns, vec(0, 0, 1), limit=5)] != [
        "e-carol"
    ]


async def test_chunks_for_entities_and_temporal_sort(stack: SqliteLanceStack) -> None:
    ns = await new_ns(stack)
    es = [ent(ns, "X"), ent(ns, "Y")]
    occurred = [T0, T0 + timedelta(days=5), None, T0 + timedelta(days=1)]
    await stack.write(
        ns,
        batch(
            ns,
            "d1",
            ["c0", "c1", "c2", "c3"],
            occurred=occurred,
            entities=es,
            mentions=[("e-x", 0, 5), ("e-y", 0, 1), ("e-x", 1, 1), ("e-x", 2, 9), ("e-y", 3, 2)],
        ),
    )
    page = await stack.graph.chunks_for_entities(ns, ["e-x", "e-y"], limit=10)
    assert [(h.chunk.id, h.score) for h in page.hits] == [
        ("d1-c2", 9),
        ("d1-c0", 6),
        ("d1-c3", 2),
        ("d1-c1", 1),
    ]
    page = await stack.graph.chunks_for_entities(ns, ["e-x", "e-y"], limit=10, temporal_sort=True)
    assert [h.chunk.id for h in page.hits] == ["d1-c1", "d1-c3", "d1-c0", "d1-c2"]
    page = await stack.graph.chunks_for_entities(ns, ["e-y"], limit=1)
    assert [h.chunk.id for h in page.hits] == ["d1-c3"] and page.hits[0].rank == 1


# -- filters ---------------------------------------------------------------------------------


async def test_filters_push_down_and_recheck(stack: SqliteLanceStack) -> None:
    ns = await new_ns(stack)
    await stack.write(
        ns,
        batch(
            ns,
            "a",
            ["pricing alpha", "pricing beta"],
            [vec(1, 0), vec(1, 0.1)],
            source_name="linear",
            metadata={"tier": "gold"},
            occurred=[T0, T0 + timedelta(days=40)],
            entities=[ent(ns, "P")],
            mentions=[("e-p", 0, 1), ("e-p", 1, 1)],
        ),
    )
    await stack.write(
        ns,
        batch(
            ns,
            "b",
            ["pricing gamma"],
            [vec(1, 0.05)],
            source_name="slack",
            metadata={"tier": "silver"},
            occurred=[T0],
            entities=[ent(ns, "P")],
            mentions=[("e-p", 0, 3)],
        ),
    )
    f = {
        "source_name": "linear",
        "metadata.tier": {"$in": ["gold"]},
        "occurred_at": {"$lt": T0 + timedelta(days=10)},
    }
    pages = [
        await stack.vectors.search(ns, vec(1, 0.05), limit=5, filter=f),
        await stack.keywords.search(ns, "pricing", limit=5, filter=f),
        await stack.graph.chunks_for_entities(ns, ["e-p"], limit=5, filter=f),
    ]
    for page in pages:
        assert [h.chunk.id for h in page.hits] == ["a-c0"]
        assert set(page.pushed_keys) | set(page.post_filtered_keys) == {
            "source_name",
            "metadata.tier",
            "occurred_at",
        }
    unfiltered = await stack.vectors.search(ns, vec(1, 0.05), limit=5)
    assert len(unfiltered.hits) == 3 and unfiltered.pushed_keys == []
    empty = await stack.vectors.search(ns, vec(1, 0.05), limit=5, filter={"source_name": "nowhere"})
    assert empty.hits == []


@pytest.mark.parametrize("prepass_at", [16, 1_000_000])
async def test_filtered_vector_search_is_exact(
    stack: SqliteLanceStack, monkeypatch: pytest.MonkeyPatch, prepass_at: int
) -> None:
    """Both strategies (walk the global ranking / rank SQLite's matches) give the exact answer."""
    monkeypatch.setattr(vectors_module, "_PREPASS_AT", prepass_at)
    ns = await new_ns(stack)
    rng = np.random.default_rng(3)
    vs = rng.standard_normal((400, DIM)).astype(np.float32)
    for d in range(4):
        part = vs[d * 100 : (d + 1) * 100]
        await stack.write(
            ns,
            batch(
                ns,
                f"d{d}",
                [f"t{i}" for i in range(100)],
                [v.tolist() for v in part],
                source_name=f"s{d}",
                metadata={"bucket": d},
            ),
        )
    q = rng.standard_normal(DIM).astype(np.float32)
    scores = (vs / np.linalg.norm(vs, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
    for f, docs in [({"source_name": "s2"}, [2]), ({"metadata.bucket": {"$in": [0, 3]}}, [0, 3])]:
        allowed = [d * 100 + i for d in docs for i in range(100)]
        truth = [f"d{j // 100}-c{j % 100}" for j in sorted(allowed, key=lambda j: -scores[j])[:7]]
        page = await stack.vectors.search(ns, q.tolist(), limit=7, filter=f)
        assert [h.chunk.id for h in page.hits] == truth
        assert [h.score for h in page.hits] == pytest.approx(
            sorted((scores[j] for j in allowed), reverse=True)[:7], abs=1e-5
        )


async def test_writer_patches_its_cache_instead_of_reloading(
    stack: SqliteLanceStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = await new_ns(stack)
    loads: list[str] = []
    real_load = LanceVectors.load
    monkeypatch.setattr(LanceVectors, "load", lambda self, n: loads.append(n) or real_load(self, n))
    await stack.write(ns, batch(ns, "d0", ["a", "b"], [vec(1, 0), vec(0, 1)]))
    await stack.vectors.search(ns, vec(1, 0), limit=1)
    for d in range(1, 6):
        await stack.write(ns, batch(ns, f"d{d}", ["x"], [vec(1, d)]))
        await stack.delete_document(ns, f"d{d - 1}") if d % 2 == 0 else None
        hits = (await stack.vectors.search(ns, vec(1, d), limit=1)).hits
        assert hits[0].chunk.id == f"d{d}-c0"
    assert loads == [ns]


# -- deletes, replaces, failures -------------------------------------------------------------


async def test_delete_document_leaves_no_orphans(stack: SqliteLanceStack, config: StorageConfig) -> None:
    ns = await new_ns(stack)
    shared, only1, only2 = ent(ns, "Shared"), ent(ns, "Only1"), ent(ns, "Only2")
    await stack.write(
        ns,
        batch(
            ns,
            "d1",
            ["one a", "one b"],
            occurred=[T0, T0 + timedelta(days=3)],
            entities=[shared, only1],
            mentions=[("e-shared", 0, 1), ("e-only1", 1, 1)],
            relationships=[("e-only1", "e-shared", "R", 1.0)],
        ),
    )
    await stack.write(
        ns,
        batch(
            ns,
            "d2",
            ["two a"],
            occurred=[T0],
            entities=[shared, only2],
            mentions=[("e-shared", 0, 1), ("e-only2", 0, 1)],
        ),
    )
    assert (await stack.graph.get_entity(ns, "e-shared")).mention_count == 2
    assert await stack.delete_document(ns, "d1") is True
    assert await stack.delete_document(ns, "d1") is False
    assert await stack.documents.get_documents(ns, ["d1"]) == []
    assert await stack.documents.get_chunks(ns, ["d1-c0", "d1-c1"]) == []
    assert await stack.graph.get_entity(ns, "e-only1") is None
    assert (await stack.graph.get_entity(ns, "e-shared")).mention_count == 1
    assert await stack.graph.list_relationships(ns) == []
    for table in ("mentions", "relationships", "chunk_time", "chunks", "documents"):
        col = (
            "document_id"
            if table in ("mentions", "relationships", "chunks")
            else ("chunk_id" if table == "chunk_time" else "id")
        )
        like = "d1%" if table == "chunk_time" else "d1"
        op = "LIKE" if table == "chunk_time" else "="
        assert raw_rows(config, f"SELECT COUNT(*) FROM {table} WHERE {col} {op} ?", like) == [(0,)], table
    assert raw_rows(config, "SELECT COUNT(*) FROM entity_aliases WHERE entity_id = 'e-only1'") == [(0,)]
    assert raw_rows(config, "SELECT key FROM time_nodes WHERE namespace_id = ?", ns) == [("2024-01-15",)]
    assert raw_rows(config, "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'one'") == [(0,)]
    assert fts_terms(config) == {"two", "a"}
    assert raw_rows(config, "SELECT COUNT(*) FROM lance_journal") == [(0,)]
    assert sorted(lance_ids(config, ns)) == ["d2-c0"]
    assert (await stack.keywords.search(ns, "one", limit=5)).hits == []
    assert [h.chunk.id for h in (await stack.vectors.search(ns, vec(1, 0), limit=5)).hits] == ["d2-c0"]
    s = await stack.stats(ns)
    assert (s.documents, s.chunks, s.entities, s.relationships) == (1, 1, 2, 0)


async def test_replaces_in_one_write(stack: SqliteLanceStack, config: StorageConfig) -> None:
    ns = await new_ns(stack)
    await stack.write(
        ns,
        batch(
            ns,
            "v1",
            ["old text"],
            [vec(1, 0)],
            external_id="E",
            entities=[ent(ns, "Old")],
            mentions=[("e-old", 0, 1)],
        ),
    )
    await stack.vectors.search(ns, vec(1, 0), limit=1)  # warm the cache so the write patches it
    await stack.write(ns, batch(ns, "v2", ["new text"], [vec(1, 0)], external_id="E", replaces=["v1"]))
    assert [d.id for d in await stack.documents.find_documents_by_external_id(ns, "E")] == ["v2"]
    assert [h.chunk.id for h in (await stack.vectors.search(ns, vec(1, 0), limit=5)).hits] == ["v2-c0"]
    assert await stack.graph.get_entity(ns, "e-old") is None
    assert lance_ids(config, ns) == ["v2-c0"]
    # replacing a document by one with the same id (and chunk ids) keeps the new vectors
    await stack.write(ns, batch(ns, "v2", ["newest text"], [vec(0, 1)], external_id="E", replaces=["v2"]))
    hits = (await stack.vectors.search(ns, vec(0, 1), limit=5)).hits
    assert [(h.chunk.id, h.chunk.content) for h in hits] == [("v2-c0", "newest text")]
    assert hits[0].score == pytest.approx(1.0)
    assert lance_ids(config, ns) == ["v2-c0"]
    # and so does deleting then re-writing the same id
    assert await stack.delete_document(ns, "v2")
    await stack.write(ns, batch(ns, "v2", ["again"], [vec(1, 1)]))
    assert lance_ids(config, ns) == ["v2-c0"]
    assert (await stack.vectors.search(ns, vec(1, 1), limit=5)).hits[0].score == pytest.approx(1.0)


async def test_failed_write_is_invisible_and_compensated(
    stack: SqliteLanceStack, config: StorageConfig
) -> None:
    ns = await new_ns(stack)
    await stack.write(ns, batch(ns, "ok", ["fine chunk"], [vec(1, 0)]))
    await stack.vectors.search(ns, vec(1, 0), limit=1)
    bad = batch(ns, "bad", ["broken chunk"], [vec(1, 0)], mentions=[("e-ghost", 0, 1)])
    with pytest.raises(InvalidInputError, match="unknown entities"):
        await stack.write(ns, bad)
    assert [h.chunk.id for h in (await stack.vectors.search(ns, vec(1, 0), limit=5)).hits] == ["ok-c0"]
    assert (await stack.keywords.search(ns, "broken", limit=5)).hits == []
    assert await stack.documents.get_documents(ns, ["bad"]) == []
    assert lance_ids(config, ns) == ["ok-c0"]
    assert raw_rows(config, "SELECT COUNT(*) FROM lance_journal") == [(0,)]


async def test_crash_between_lance_and_sqlite_is_repaired_on_open(config: StorageConfig) -> None:
    s = SqliteLanceStack(config, dim=DIM)
    await s.open()
    ns = await new_ns(s)

    # Simulate a process that died after the vectors landed but before SQLite committed.
    def half_write() -> None:
        s._db.transaction_sync(
            lambda c: c.execute(
                "INSERT INTO lance_journal (namespace_id, op, ref) VALUES (?, 'add', 'w1')", (ns,)
            )
        )
        s._lance.add(ns, [("ghost-c0", "ghost")], np.ones((1, DIM), dtype=np.float32), "w1")

    await s._db.on_writer(half_write)
    assert (await s.vectors.search(ns, vec(1, 1), limit=5)).hits == []  # never visible
    await s.aclose()
    s2 = SqliteLanceStack(config, dim=DIM)
    await s2.open()
    await s2.aclose()
    assert lance_ids(config, ns) == []
    assert raw_rows(config, "SELECT COUNT(*) FROM lance_journal") == [(0,)]


# -- namespaces ------------------------------------------------------------------------------


async def test_namespace_isolation_through_every_method(
    stack: SqliteLanceStack, config: StorageConfig
) -> None:
    a, b = await new_ns(stack, "ns-a"), await new_ns(stack, "ns-b")
    for ns in (a, b):
        await stack.write(
            ns,
            batch(
                ns,
                f"{ns}-doc",
                ["shared words here"],
                [vec(1, 0)],
                external_id="same",
                entities=[ent(ns, "Same", embedding=vec(1, 0))],
                mentions=[("e-same", 0, 1)],
                occurred=[T0],
            ),
        )
    # the same entity id exists in both namespaces (ids are only unique per namespace here)
    await stack.write(
        a,
        batch(
            a,
            "a-only",
            ["alpha only"],
            [vec(0, 1)],
            occurred=[T0 + timedelta(days=9)],
            entities=[ent(a, "Same"), ent(a, "Lonely")],
            mentions=[("e-lonely", 0, 1)],
            relationships=[("e-same", "e-lonely", "KNOWS", 1.0)],
        ),
    )
    g = stack.graph
    assert (await g.get_entity(b, "e-same")).namespace_id == b
    assert await g.get_entity(b, "e-lonely") is None and await g.get_entities(b, ["e-lonely"]) == []
    assert [e.id for e in await g.list_entities(b)] == ["e-same"]
    hood = await g.neighbourhood(b, ["e-same", "e-lonely"], depth=3)
    assert hood.distance == {"e-same": 0} and hood.relationships == []
    assert (await g.neighbourhood(a, ["e-same"], depth=1)).distance == {"e-same": 0, "e-lonely": 1}
    assert await g.relationships_among(b, ["e-same", "e-lonely"]) == []
    assert await g.list_relationships(b) == [] and len(await g.list_relationships(a)) == 1
    assert await stack.documents.newest_occurred_at(b) == T0
    assert await stack.documents.newest_occurred_at(a) == T0 + timedelta(days=9)
    with pytest.raises(InvalidInputError, match="unknown entities"):
        rel = Relationship(
            id="r", namespace_id=b, source_id="e-same", target_id="e-lonely", type="X", document_id="m"
        )
        await g.upsert_graph(b, relationships=[rel])
    with pytest.raises(InvalidInputError, match="another namespace"):
        await g.upsert_graph(b, entities=[ent(a, "Sneaky")])
    with pytest.raises(InvalidInputError, match="another namespace"):
        await stack.write(b, batch(b, "x", ["x"], entities=[ent(a, "Sneaky")]))
    assert await g.delete_entities(b, ["e-lonely"]) == 0
    assert await g.get_entity(a, "e-lonely") is not None
    assert [h.chunk.namespace_id for h in (await stack.vectors.search(b, vec(1, 0), limit=10)).hits] == [b]
    assert [
        h.chunk.namespace_id for h in (await stack.keywords.search(b, "shared alpha", limit=10)).hits
    ] == [b]
    assert await stack.documents.get_documents(b, ["ns-a-doc", "a-only"]) == []
    assert await stack.documents.get_chunks(b, ["ns-a-doc-c0"]) == []
    assert [d.id for d in await stack.documents.find_documents_by_external_id(b, "same")] == ["ns-b-doc"]
    assert (await stack.documents.find_document_by_hash(b, "hash-a-only")) is None
    assert [e.namespace_id for e in await g.find_entities_by_name(b, ["same"])] == [b]
    assert [h.entity.namespace_id for h in await g.search_entities_by_vector(b, vec(1, 0), limit=5)] == [b]
    assert [h.chunk.id for h in (await g.chunks_for_entities(b, ["e-same"], limit=5)).hits] == ["ns-b-doc-c0"]
    assert await g.entities_for_chunks(b, ["ns-a-doc-c0"]) == {}
    assert await g.documents_for_entities(b, ["e-same"]) == {"e-same": ["ns-b-doc"]}
    assert await g.time_nodes_for_chunk(b, "ns-a-doc-c0") == []
    assert (await stack.stats(b)).chunks == 1 and (await stack.stats(a)).chunks == 2
    assert (await stack.stats(b)).relationships == 0 and (await stack.stats(a)).entities == 2
    # deleting across namespaces does nothing
    assert await stack.delete_document(b, "a-only") is False
    assert await g.delete_entities(b, ["e-nothing"]) == 0
    # dropping one namespace leaves the other whole
    assert await stack.delete_namespace(a) is True
    assert await stack.delete_namespace(a) is False
    assert await stack.documents.get_namespace(a) is None
    assert lance_ids(config, a) == []
    tables = ("documents", "chunks", "entities", "entity_aliases", "mentions", "relationships", "time_nodes")
    for table in (*tables, "chunk_time", "lance_journal"):
        assert raw_rows(config, f"SELECT COUNT(*) FROM {table} WHERE namespace_id = ?", a) == [(0,)], table
    assert fts_terms(config) == {"share", "word", "here"}  # porter stems of namespace b's only chunk
    assert (await stack.stats(b)).entities == 1
    assert [h.chunk.id for h in (await stack.vectors.search(b, vec(1, 0), limit=5)).hits] == ["ns-b-doc-c0"]
    # re-creating the id starts empty
    await new_ns(stack, a)
    assert (await stack.vectors.search(a, vec(1, 0), limit=5)).hits == []


# -- processes -------------------------------------------------------------------------------


async def test_second_writer_process_is_refused(stack: SqliteLanceStack, config: StorageConfig) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from khora_core.config import StorageConfig
        from khora_core.errors import StorageError
        from khora_core.storage.sqlite_lance import SqliteLanceStack

        async def main():
            cfg = StorageConfig(data_dir={str(config.data_dir)!r})
            try:
                await SqliteLanceStack(cfg, dim={DIM}).open()
            except StorageError as exc:
                print("REFUSED", exc)
                reader = SqliteLanceStack(cfg, dim={DIM}, read_only=True)
                await reader.open()
                print("READER", [n.namespace_id for n in await reader.documents.list_namespaces()])
                await reader.aclose()
                return
            print("OPENED")

        asyncio.run(main())
        """
    )
    ns = await new_ns(stack, "visible-ns")
    out = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert "REFUSED" in out.stdout, out.stdout + out.stderr
    assert "already open for writing" in out.stdout
    # The way out it names is one a Khora user has (Khora takes no read_only argument).
    assert "Khora(data_dir=...)" in out.stdout and "open this one with read_only" not in out.stdout
    assert f"READER ['{ns}']" in out.stdout
    # in-process, a second writer on the same folder is refused too
    with pytest.raises(StorageError, match="already open for writing"):
        await SqliteLanceStack(config, dim=DIM).open()


async def test_relationships_among_seeks_each_pair_also_in_an_older_folder(config: StorageConfig) -> None:
    s = SqliteLanceStack(config, dim=DIM)
    await s.open()
    ns = await new_ns(s)
    names = ["Alice", "Bob", "Carol", "Dave"]
    rels = [("e-alice", f"e-{b.lower()}", "KNOWS", 1.0 + i) for i, b in enumerate(names[1:])]
    rels.append(("e-bob", "e-carol", "KNOWS", 0.5))
    await s.write(
        ns,
        batch(
            ns, "d1", ["Alice, Bob, Carol and Dave"], entities=[ent(ns, n) for n in names], relationships=rels
        ),
    )
    await s.aclose()
    conn = sqlite3.connect(Path(config.data_dir) / "khora.sqlite3")  # as an older Khora left it
    with conn:
        conn.execute("DROP INDEX ix_rel_pair_w")
    conn.close()

    s = SqliteLanceStack(config, dim=DIM)
    await s.open()
    try:
        among = await s.graph.relationships_among(ns, ["e-alice", "e-carol", "e-bob"])
        assert [(r.source_id, r.target_id) for r in among] == [
            ("e-alice", "e-carol"),
            ("e-alice", "e-bob"),
            ("e-bob", "e-carol"),
        ]
    finally:
        await s.aclose()
    plan = raw_rows(
        config, "EXPLAIN QUERY PLAN " + graph_traversal_module.RELATIONSHIPS_AMONG, ns, "[]", "[]", 10
    )
    assert any("ix_rel_pair_w (namespace_id=? AND source_id=? AND target_id=?)" in row[-1] for row in plan), (
        plan
    )


async def test_name_words_are_indexed_for_a_folder_written_before_the_word_index(
    config: StorageConfig,
) -> None:
    s = SqliteLanceStack(config, dim=DIM)
    await s.open()
    ns = await new_ns(s)
    await s.write(ns, batch(ns, "d1", ["Alice met Bob"], entities=[ent(ns, "Alice Smith"), ent(ns, "Bob")]))
    await s.aclose()
    conn = sqlite3.connect(Path(config.data_dir) / "khora.sqlite3")  # as an older Khora left it
    with conn:
        conn.execute("DELETE FROM entity_words")
        conn.execute("DELETE FROM meta WHERE key = 'entity_words'")
    conn.close()

    s = SqliteLanceStack(config, dim=DIM)
    await s.open()
    try:
        found = await s.graph.find_entities_by_words(ns, ["smith", "bob", "carol"], limit=5)
        assert [[e.id for e in f] for f in found] == [["e-alice smith"], ["e-bob"], []]
        assert await s.graph.delete_entities(ns, ["e-bob"]) == 1
        assert raw_rows(config, "SELECT word FROM entity_words WHERE entity_id = 'e-bob'") == []
    finally:
        await s.aclose()


async def test_graph_properties_are_added_to_a_folder_written_before_them(config: StorageConfig) -> None:
    """A folder whose ``entities`` / ``relationships`` tables have no ``properties`` column
    opens, gains the column (rows read with no properties) and stores properties after."""
    s = SqliteLanceStack(config, dim=DIM)
    await s.open()
    ns = await new_ns(s)
    await s.write(
        ns, batch(ns, "d1", ["Alice met Bob"], entities=[ent(ns, "Alice"), ent(ns, "Bob")],
                  relationships=[("e-alice", "e-bob", "KNOWS", 1.0)])
    )  # fmt: skip
    await s.aclose()
    conn = sqlite3.connect(Path(config.data_dir) / "khora.sqlite3")  # as an older Khora left it
    with conn:
        conn.execute("ALTER TABLE entities DROP COLUMN properties")
        conn.execute("ALTER TABLE relationships DROP COLUMN properties")
    conn.close()

    s = SqliteLanceStack(config, dim=DIM)
    await s.open()
    try:
        (alice,) = await s.graph.get_entities(ns, ["e-alice"])
        (knows,) = await s.graph.list_relationships(ns)
        assert alice.properties == {} and knows.properties == {}
        await s.graph.upsert_graph(
            ns,
            entities=[alice.model_copy(update={"properties": {"born": 1815}})],
            relationships=[knows.model_copy(update={"properties": {"since": "1833"}})],
        )
        (alice,) = await s.graph.get_entities(ns, ["e-alice"])
        (knows,) = await s.graph.list_relationships(ns)
        assert alice.properties == {"born": 1815} and knows.properties == {"since": "1833"}
    finally:
        await s.aclose()
