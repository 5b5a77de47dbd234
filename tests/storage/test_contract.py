"""The storage contract: one suite, run unchanged on every stack through the public API.

``stack_name`` runs each test on the embedded ``sqlite_lance`` stack and on PostgreSQL +
pgvector with Neo4j (real servers; see ``tests/fixtures``).
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timezone

import numpy as np
import pytest

from khora_core import Khora, NamespaceNotFoundError, SearchMode
from khora_core.errors import InvalidInputError
from khora_core.models import Chunk, Document, Entity, Mention, Relationship, WriteBatch
from khora_core.retrieval.graph_channel import PASSAGE_SEEDS
from khora_core.storage.protocols import ChunkGraph, EntityRef
from tests.typed import typed

DOCS = [
    {
        "content": "Maya Chen is the CTO of Northwind Robotics. She joined Northwind Robotics from Halcyon Bio in 2023.",
        "title": "Northwind leadership",
        "occurred_at": datetime(2024, 3, 4, tzinfo=timezone.utc),
        "source_type": "memo",
        "source_name": "intranet",
        "external_id": "doc-1",
        "metadata": {"team": {"name": "robotics"}, "tier": "gold", "score": 0.9},
        "tags": ["people"],
    },
    {
        "content": "Halcyon Bio runs Project Kestrel, a protein folding platform led by Omar Reyes.",
        "title": "Kestrel",
        "occurred_at": datetime(2023, 6, 1, tzinfo=timezone.utc),
        "source_type": "news",
        "source_name": "press",
        "external_id": "doc-2",
        "metadata": {"team": {"name": "bio"}, "tier": "silver", "score": 0.4},
        "tags": ["projects"],
    },
    {
        "content": "The quarterly picnic will be held at Riverside Park. Bring sandwiches and a frisbee.",
        "title": "Picnic",
        "occurred_at": datetime(2022, 8, 20, tzinfo=timezone.utc),
        "source_type": "email",
        "source_name": "mail",
        "external_id": "doc-3",
        "metadata": {"tier": "bronze"},
        "tags": [],
    },
]


async def _load(kb: Khora, ns: str) -> dict[str, str]:
    ids = {}
    for d in DOCS:
        r = await kb.remember(namespace=ns, **d)
        ids[d["external_id"]] = r.document_id
    return ids


def _ext(result) -> list[str]:
    by_id = {d.id: d.external_id for d in result.documents}
    seen: list[str] = []
    for c in result.chunks:
        e = by_id[c.document_id]
        if e not in seen:
            seen.append(e)
    return seen


async def test_round_trip_and_stats(kb: Khora, namespace: str) -> None:
    ids = await _load(kb, namespace)
    stats = await kb.stats(namespace)
    assert stats.documents == 3
    assert stats.chunks >= 3
    assert stats.entities > 0
    result = await kb.recall(
        "Who is the CTO of Northwind Robotics?", namespace=namespace, mode=SearchMode.VECTOR
    )
    assert _ext(result)[0] == "doc-1"
    doc_ids = {d.id for d in result.documents}
    assert {c.document_id for c in result.chunks} <= doc_ids  # the documents invariant
    assert ids["doc-1"] in doc_ids
    top = result.chunks[0]
    assert top.vector_similarity is not None and top.vector_similarity > 0.4


async def test_dedup_and_replace_by_external_id(kb: Khora, namespace: str) -> None:
    first = await kb.remember("Project Heron ships in May.", namespace=namespace, external_id="heron")
    dup = await kb.remember("Project Heron ships in May.", namespace=namespace)
    assert dup.duplicate and dup.document_id == first.document_id
    second = await kb.remember(
        "Project Heron ships in September instead.", namespace=namespace, external_id="heron"
    )
    assert second.document_id != first.document_id
    stats = await kb.stats(namespace)
    assert stats.documents == 1
    res = await kb.recall("When does Project Heron ship?", namespace=namespace, mode=SearchMode.KEYWORD)
    assert all("September" in c.content for c in res.chunks) and res.chunks


async def test_documents_by_hashes_finds_each_stored_hash_in_the_namespace_only(
    kb: Khora, namespace: str
) -> None:
    from khora_core.ingest.dedup import content_hash

    other = (await kb.create_namespace("hash-neighbour")).namespace_id
    texts = ["Project Heron ships in May.", "Project Osprey ships in June."]
    kept = [await kb.remember(t, namespace=namespace) for t in texts]
    await kb.remember("Only the neighbour knows this.", namespace=other)
    docs = kb.engine.stack.documents
    hashes = [content_hash(t) for t in texts]
    # More unknown hashes than one query takes, the known ones last and one repeated.
    unknown = [f"{i:064x}" for i in range(1500)]
    found = await docs.find_documents_by_hashes(namespace, [*unknown, hashes[1], *hashes])
    assert {h: d.id for h, d in found.items()} == {
        h: r.document_id for h, r in zip(hashes, kept, strict=True)
    }
    assert all(d.namespace_id == namespace and d.content_hash in hashes for d in found.values())
    assert (
        await docs.find_documents_by_hashes(namespace, [content_hash("Only the neighbour knows this.")]) == {}
    )
    assert await docs.find_documents_by_hashes(namespace, []) == {}
    for h in hashes:  # the same document the single lookup finds
        assert (await docs.find_document_by_hash(namespace, h)).id == found[h].id  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", [SearchMode.VECTOR, SearchMode.KEYWORD, SearchMode.GRAPH, SearchMode.ALL])
async def test_filters_hold_on_every_channel(kb: Khora, namespace: str, mode: SearchMode) -> None:
    await _load(kb, namespace)
    flt = {
        "metadata.tier": {"$in": ["gold", "silver"]},
        "occurred_at": {"$gte": datetime(2023, 1, 1, tzinfo=timezone.utc)},
    }
    res = await kb.recall(
        "Northwind Robotics Halcyon Bio Kestrel CTO", namespace=namespace, mode=mode, filter=flt
    )
    got = set(_ext(res))
    assert got <= {"doc-1", "doc-2"}
    report = res.engine_info["filter"]
    assert report["unenforced_keys"] == []
    leaves = set(report["pushed_keys"]) | set(report["post_filtered_keys"])
    assert leaves == {"metadata.tier", "occurred_at"}
    res2 = await kb.recall(
        "picnic sandwiches", namespace=namespace, mode=mode, filter={"source_type": "email"}
    )
    assert set(_ext(res2)) <= {"doc-3"}


async def test_namespace_isolation_through_every_method(kb: Khora, namespace: str) -> None:
    await _load(kb, namespace)
    other = (await kb.create_namespace(namespace=f"other-{uuid.uuid4().hex[:8]}")).namespace_id
    try:
        for mode in SearchMode:
            res = await kb.recall("Northwind Robotics CTO", namespace=other, mode=mode)
            assert res.chunks == [] and res.documents == []
        assert (await kb.stats(other)).documents == 0
        assert await kb.list_entities(namespace=other) == []
        assert await kb.search_entities("Northwind Robotics", namespace=other) == []
        mine = await kb.list_entities(namespace=namespace)
        assert mine
        assert await kb.get_entity(mine[0].id, namespace=other) is None
        assert await kb.find_related_entities(mine[0].id, namespace=other) == []
        assert not await kb.forget(namespace=other, external_id="doc-1")
        assert (await kb.stats(namespace)).documents == 3
    finally:
        await kb.delete_namespace(other)
    with pytest.raises(NamespaceNotFoundError):
        await kb.recall("anything", namespace=f"missing-{uuid.uuid4().hex[:6]}")


async def test_forget_leaves_no_orphans(kb: Khora, namespace: str) -> None:
    ids = await _load(kb, namespace)
    before = await kb.stats(namespace)
    assert await kb.forget(ids["doc-2"], namespace=namespace)
    assert await kb.forget(namespace=namespace, external_id="doc-1")
    assert await kb.forget(namespace=namespace, external_id="doc-3")
    after = await kb.stats(namespace)
    assert (after.documents, after.chunks, after.entities, after.relationships) == (0, 0, 0, 0), (
        before,
        after,
    )
    for mode in SearchMode:
        res = await kb.recall("Northwind Robotics CTO picnic", namespace=namespace, mode=mode)
        assert res.chunks == []


async def test_entity_reads(kb: Khora, namespace: str) -> None:
    await _load(kb, namespace)
    found = await kb.search_entities("Northwind Robotics", namespace=namespace, include_sources=True)
    assert found and found[0].name.lower().startswith("northwind")
    assert found[0].source_documents and found[0].source_documents[0].external_id == "doc-1"
    exact = await kb.search_entities("northwind robotics", namespace=namespace, method="exact")
    assert exact and exact[0].id == found[0].id
    fuzzy = await kb.search_entities("Northwnd Robotcs", namespace=namespace, method="fuzzy")
    assert any(e.id == found[0].id for e in fuzzy)
    got = await kb.get_entity(found[0].id, namespace=namespace, include_sources=True)
    assert got is not None and got.document_ids
    page1 = await kb.list_entities(namespace=namespace, limit=2)
    page2 = await kb.list_entities(namespace=namespace, offset=2, limit=2)
    assert len(page1) == 2 and not {e.id for e in page1} & {e.id for e in page2}


async def test_entities_by_name_words(kb: Khora, namespace: str) -> None:
    """Entities whose name shares a word with a text, this namespace only, gone once forgotten;
    query syntax in the text is only words."""
    ids = await _load(kb, namespace)
    other = (await kb.create_namespace(f"other-{uuid.uuid4().hex[:8]}")).namespace_id
    await kb.remember("Northwind Traders sells Kestrel feeders.", namespace=other)
    graph = kb.engine.stack.graph

    async def names(*texts: str) -> list[list[str]]:
        return [
            [e.name for e in found] for found in await graph.find_entities_by_words(namespace, texts, limit=5)
        ]

    northwind, kestrel, common, empty, syntax = await names(
        "Northwind", "the Kestrel project", "the", "", 'Northwind" OR name:* AND -"'
    )
    assert northwind == ["Northwind Robotics"]
    assert kestrel == ["Project Kestrel"]
    assert common == [] and empty == []
    assert syntax == ["Northwind Robotics"]
    assert await names("Kestrel") == [["Project Kestrel"]]
    assert await graph.find_entities_by_words(namespace, ["Northwind"], limit=0) == [[]]
    assert await graph.find_entities_by_words(namespace, [], limit=5) == []

    assert await kb.forget(ids["doc-2"], namespace=namespace)
    assert await names("Kestrel") == [[]]


async def test_fuzzy_entity_search_reaches_a_rare_entity_without_a_vector(kb: Khora, namespace: str) -> None:
    """Beyond the 2,000 most mentioned entities and out of the vector search's reach, a
    misspelt name still finds its entity through the words they share."""
    crowd = [
        Entity(id=f"crowd-{i}", namespace_id=namespace, name=f"Crowd Member {i:04d}", type="PERSON")
        for i in range(2100)
    ]
    target = Entity(id="target", namespace_id=namespace, name="Zelda Quarterman", type="PERSON")
    await kb.engine.stack.graph.upsert_graph(namespace, entities=[*crowd, target])
    found = await kb.search_entities("Zelda Quartermann", namespace=namespace, method="fuzzy")
    assert [e.id for e in found][:1] == ["target"]


async def test_batched_graph_and_vector_reads_agree_with_single_reads(kb: Khora, namespace: str) -> None:
    """The read-path batch methods return what their one-at-a-time counterparts do, and
    nothing from another namespace."""
    await _load(kb, namespace)
    stack = kb._stack
    entities = await stack.graph.list_entities(namespace, limit=50)
    assert len(entities) >= 3
    ids = [e.id for e in entities]

    mentions = await stack.graph.chunk_mentions(namespace, ids, per_entity=2)
    for eid in ids:
        page = await stack.graph.chunks_for_entities(namespace, [eid], limit=100)
        expected = sorted(((h.chunk.id, int(h.score)) for h in page.hits), key=lambda p: (-p[1], p[0]))[:2]
        assert sorted(mentions.get(eid, {}).items(), key=lambda p: (-p[1], p[0])) == expected, eid

    def page_rows(page) -> list[tuple[str, float, int]]:
        return [(h.chunk.id, h.score, h.rank) for h in page.hits]

    groups = [ids[:2], [], [ids[0], "no-such-entity"], ids[2:], ids]
    gold = {"filter": {"metadata.tier": "gold"}}
    reached: dict[str, int] = {}
    for options in ({}, {"temporal_sort": True}, gold, {"filter": {"source_name": {"$ne": "intranet"}}}):
        for limit in (1, 3):
            grouped = await stack.graph.chunks_for_entity_groups(namespace, groups, limit=limit, **options)
            single = [
                await stack.graph.chunks_for_entities(namespace, group, limit=limit, **options)
                for group in groups
            ]
            assert [page_rows(p) for p in grouped] == [page_rows(p) for p in single], (options, limit)
            assert [(p.pushed_keys, p.post_filtered_keys) for p in grouped] == [
                (p.pushed_keys, p.post_filtered_keys) for p in single
            ]
            assert all(h.chunk.namespace_id == namespace for p in grouped for h in p.hits)
            reached[str(options)] = sum(len(p.hits) for p in grouped)
    assert min(reached.values()) > 0  # every case reached chunks: the comparison above is not empty
    assert await stack.graph.chunks_for_entity_groups(namespace, [], limit=3) == []

    vectors = [e.embedding for e in await stack.graph.get_entities(namespace, ids[:3]) if e.embedding]
    assert vectors
    batched = await stack.graph.search_entities_by_vectors(
        namespace, [*vectors, [0.0] * len(vectors[0])], limit=4
    )
    assert len(batched) == len(vectors) + 1 and batched[-1] == []  # a zero vector has no direction
    every = [e for e in await stack.graph.get_entities(namespace, ids) if e.embedding]
    for vector, hits in zip(vectors, batched[:-1], strict=True):
        single = await stack.graph.search_entities_by_vector(namespace, vector, limit=4)
        assert [h.entity.id for h in hits] == [h.entity.id for h in single]
        assert [round(h.score, 5) for h in hits] == [round(h.score, 5) for h in single]
        # the exact cosine, against a brute-force ranking of the namespace's entities
        brute = sorted(
            (
                (
                    float(np.dot(vector, e.embedding) / np.linalg.norm(vector) / np.linalg.norm(e.embedding)),
                    e.id,
                )
                for e in every
            ),
            key=lambda t: (-t[0], t[1]),
        )[:4]
        assert [round(h.score, 4) for h in hits] == [round(c, 4) for c, _ in brute]
        assert hits[0].entity.name and hits[0].entity.embedding is None  # the vector stays in the store

    chunk_ids_all = [
        cid for m in (await stack.graph.chunk_mentions(namespace, ids, per_entity=50)).values() for cid in m
    ]
    by_chunk = await stack.graph.entities_for_chunks(namespace, chunk_ids_all)
    mentioned = {e.id for ents in by_chunk.values() for e in ents}
    touching = await stack.graph.list_relationships(namespace, entity_ids=list(mentioned), limit=100_000)
    expected_rels = sorted(
        (r for r in touching if r.source_id in mentioned and r.target_id in mentioned),
        key=lambda r: (-r.weight, r.id),
    )
    assert len(expected_rels) > 2
    got_rels = await stack.graph.relationships_among(namespace, list(mentioned), limit=1000)
    assert [r.id for r in got_rels] == [r.id for r in expected_rels]
    assert [r.id for r in await stack.graph.relationships_among(namespace, list(mentioned), limit=2)] == [
        r.id for r in expected_rels[:2]
    ]

    query = (await stack.graph.get_entities(namespace, ids[:1]))[0].embedding
    chunk_ids = [cid for m in mentions.values() for cid in m]
    stored = await stack.vectors.embeddings(namespace, chunk_ids)
    cosines = await stack.vectors.similarities(namespace, query, [*chunk_ids, "no-such-chunk"])
    assert set(cosines) == set(stored)
    for cid, vec in stored.items():
        dot = sum(a * b for a, b in zip(vec, query, strict=True))
        norm = (sum(a * a for a in vec) * sum(b * b for b in query)) ** 0.5
        assert cosines[cid] == pytest.approx(dot / norm, abs=1e-4)
    second = (await stack.graph.get_entities(namespace, ids[1:2]))[0].embedding
    many = await stack.vectors.similarities_many(namespace, [query, second], [*chunk_ids, "no-such-chunk"])
    alone = await stack.vectors.similarities(namespace, second, chunk_ids)
    assert len(many) == 2 and set(many[1]) == set(alone)
    for cid in stored:
        assert many[0][cid] == pytest.approx(cosines[cid], abs=1e-6)
        assert many[1][cid] == pytest.approx(alone[cid], abs=1e-6)
    assert await stack.vectors.similarities_many(namespace, [], chunk_ids) == []

    other = await kb.create_namespace("other", namespace=f"other-{uuid.uuid4().hex[:8]}")
    try:
        assert await stack.graph.chunk_mentions(other.namespace_id, ids, per_entity=5) == {}
        assert await stack.graph.relationships_among(other.namespace_id, list(mentioned)) == []
        assert await stack.vectors.similarities(other.namespace_id, query, chunk_ids) == {}
        assert await stack.vectors.similarities_many(other.namespace_id, [query, second], chunk_ids) == [
            {},
            {},
        ]
        assert await stack.graph.search_entities_by_vectors(other.namespace_id, vectors, limit=4) == [
            [] for _ in vectors
        ]
    finally:
        await kb.delete_namespace(other.namespace_id)


async def test_chunk_graph_keeps_the_heaviest_few_relationships_of_each_pair(
    kb: Khora, namespace: str
) -> None:
    """``per_pair``: at most that many relationships between one ordered pair, the heaviest
    (ties by id), then the heaviest of all those; ``None`` keeps every one. Checked against
    the rule computed here, on pairs of every kind a store may read differently: two
    entities joined by hundreds of parallel edges (more than ``neo4j.pair_rank.DENSE_DEGREE``
    at both ends), a popular source toward a rare target, a rare source toward a popular
    target, a self-loop, and a pair with fewer edges than the cap."""
    from khora_core.storage.chunk_graph import read_chunk_graph

    stack, dim = kb._stack, kb.engine.embedder.dimension
    names = {"hub": "Hub One", "hub2": "Hub Two", "x": "Rare X", "y": "Rare Y"}
    entities = [Entity(id=i, namespace_id=namespace, name=n, type="ORG") for i, n in names.items()]
    edges = [("hub", "hub2", f"hh-{i:03d}", (i % 7) * 0.5) for i in range(230)]
    edges += [("hub", "x", f"hx-{i}", w) for i, w in enumerate([1.0, 3.0, 3.0, 0.5, 2.0])]
    edges += [("x", "hub2", f"xh-{i}", w) for i, w in enumerate([2.5, 0.1, 2.5, 2.5])]
    edges += [("hub2", "hub", "back", 9.0), ("y", "y", "self-1", 1.5), ("y", "y", "self-2", 1.5)]
    edges += [("y", "x", f"yx-{i}", 3.0) for i in range(2)]
    rels = [
        Relationship(
            id=rid, namespace_id=namespace, source_id=s, target_id=t, type="LINKS", weight=w, document_id="d2"
        )
        for s, t, rid, w in edges
    ]
    await stack.write_many(
        namespace,
        [
            _doc_batch(namespace, "d1", "all four", dim, entities=entities, mentions=list(names)),
            _doc_batch(namespace, "d2", "the links", dim, mentions=["hub", "hub2"], relationships=rels),
        ],
    )

    def rule(per_pair: int | None, limit: int) -> list[str]:
        by_pair: dict[tuple[str, str], list[tuple[float, str]]] = {}
        for s, t, rid, w in edges:
            by_pair.setdefault((s, t), []).append((-w, rid))
        kept = [e for group in by_pair.values() for e in sorted(group)[:per_pair]]
        return [rid for _, rid in sorted(kept)[:limit]]

    assert rule(3, 100)[:4] == ["back", "hh-006", "hh-013", "hh-020"]  # the rule itself
    chunks = ["d1-c0", "d2-c0"]
    for per_pair, limit in [(3, 100), (1, 100), (3, 5), (2, 8), (None, 12), (500, 1000)]:
        graph = await stack.graph.chunk_graph(namespace, chunks, max_relationships=limit, per_pair=per_pair)
        assert [r.id for r in graph.relationships] == rule(per_pair, limit), (per_pair, limit)
        among = await stack.graph.relationships_among(namespace, list(names), limit=limit, per_pair=per_pair)
        assert [r.id for r in among] == rule(per_pair, limit), (per_pair, limit)
        reference = await read_chunk_graph(
            stack.graph, namespace, chunks, max_relationships=limit, per_pair=per_pair
        )
        assert [r.id for r in reference.relationships] == rule(per_pair, limit)
    assert (await stack.graph.chunk_graph(namespace, chunks)).relationships == (
        await stack.graph.chunk_graph(namespace, chunks, per_pair=None)
    ).relationships
    assert [r.id for r in (await stack.graph.chunk_graph(namespace, chunks, per_pair=0)).relationships] == []
    cut = await stack.graph.chunk_graph(namespace, chunks, max_entities=2, per_pair=3)
    assert {e.id for e in cut.entities} == {"hub", "hub2"}
    assert [r.id for r in cut.relationships] == ["back", "hh-006", "hh-013", "hh-020"]


def _doc_batch(ns: str, doc_id: str, text: str, dim: int, *, entities=(), mentions=(), relationships=()):
    """A one-chunk ``WriteBatch``; mentions are entity ids (mentioned once in the chunk)."""
    now = datetime.now(timezone.utc)
    vector = [1.0 if i == len(doc_id) % dim else 0.01 for i in range(dim)]
    chunk_id = f"{doc_id}-c0"
    return WriteBatch(
        document=Document(
            id=doc_id, namespace_id=ns, content=text, content_hash=f"h-{doc_id}", created_at=now
        ),
        chunks=[
            Chunk(
                id=chunk_id,
                namespace_id=ns,
                document_id=doc_id,
                index=0,
                content=text,
                start_char=0,
                end_char=len(text),
                embedding=vector,
                created_at=now,
            )
        ],
        entities=list(entities),
        mentions=[Mention(entity_id=e, chunk_id=chunk_id, document_id=doc_id) for e in mentions],
        relationships=list(relationships),
    )


async def test_chunk_graph_ranks_and_cuts_the_same_way_on_every_stack(kb: Khora, namespace: str) -> None:
    """``GraphStore.chunk_graph``: entities by how many of the chunks mention them, then the
    link score, total mentions, name (code point order) and id, cut at ``max_entities``;
    relationships among the kept ones only, heaviest first then by id; the same as the
    two-read reference (``read_chunk_graph``), and nothing from another namespace. Each
    chunk's entities are ``entities_for_chunks`` as ``EntityRef``s, as
    ``entity_refs_for_chunks`` reads them."""
    from khora_core.storage.chunk_graph import rank_chunk_entities, read_chunk_graph

    stack, dim = kb._stack, kb.engine.embedder.dimension
    names = {
        "z": "Zed", "alpha": "alpha", "A2": "Alpha", "beta": "beta", "zoe": "Zoë",
        "arger": "Ärger", "emile1": "Émile", "emile2": "émile", "t2": "Twin", "t1": "Twin",
    }  # fmt: skip
    entities = [Entity(id=i, namespace_id=namespace, name=n, type="PERSON") for i, n in names.items()]
    in_both = ["alpha", "A2", "beta", "zoe", "arger", "emile1", "emile2"]
    mentions = {"d1": ["z", *in_both, "t2", "t1"], "d2": ["z", *in_both], "d3": ["z"], "d4": ["beta"]}

    def rel(rid: str, s: str, t: str, w: float) -> Relationship:
        return Relationship(
            id=rid, namespace_id=namespace, source_id=s, target_id=t, type="KNOWS", weight=w, document_id="d3"
        )

    rels = [rel("r-b", "z", "alpha", 2.0), rel("r-a", "beta", "z", 2.0), rel("r-c", "A2", "zoe", 5.0),
            rel("r-out", "z", "emile2", 9.0), rel("r-d", "alpha", "beta", 1.0)]  # fmt: skip
    batches = [
        _doc_batch(namespace, d, f"chunk of {d}", dim, entities=entities if d == "d1" else (), mentions=m)
        for d, m in mentions.items()
    ]
    batches[2] = batches[2].model_copy(update={"relationships": rels})
    await stack.write_many(namespace, batches)

    chunks, scores = ["d1-c0", "d2-c0", "d3-c0"], {"alpha": 0.5}
    everything = await stack.graph.chunk_graph(namespace, chunks, entity_scores=scores, max_entities=100)
    order = ["z", "alpha", "beta", "A2", "zoe", "arger", "emile1", "emile2", "t1", "t2"]
    assert [e.id for e in everything.entities] == order
    assert all(e.type == "PERSON" and e.namespace_id == namespace for e in everything.entities)
    whole = await stack.graph.entities_for_chunks(namespace, chunks)
    assert [e.id for e in rank_chunk_entities(chunks, whole, entity_scores=scores, limit=100)] == order
    assert sorted(everything.chunk_entities) == chunks
    assert {e.id: e.name for e in everything.chunk_entities["d1-c0"]} == names
    refs = {cid: [EntityRef.of(e) for e in ents] for cid, ents in whole.items()}
    assert everything.chunk_entities == refs
    assert await stack.graph.entity_refs_for_chunks(namespace, chunks) == refs
    assert EntityRef("z", "Zed", "PERSON", 3) in refs["d1-c0"]  # three chunks name Zed
    assert await stack.graph.entity_refs_for_chunks(namespace, []) == {}
    assert [r.id for r in everything.relationships] == ["r-out", "r-c", "r-a", "r-b", "r-d"]

    cut = await stack.graph.chunk_graph(
        namespace, chunks, entity_scores=scores, max_entities=6, max_relationships=3
    )
    assert [e.id for e in cut.entities] == order[:6]
    assert [r.id for r in cut.relationships] == ["r-c", "r-a", "r-b"]  # r-out's target was cut
    reference = await read_chunk_graph(
        stack.graph, namespace, chunks, entity_scores=scores, max_entities=6, max_relationships=3
    )
    assert [e.id for e in reference.entities] == [e.id for e in cut.entities]
    assert [r.id for r in reference.relationships] == [r.id for r in cut.relationships]
    assert cut.chunk_entities == reference.chunk_entities

    unscored = await stack.graph.chunk_graph(namespace, ["d1-c0", "d4-c0"], max_entities=3)
    assert [e.id for e in unscored.entities] == ["beta", "z", "A2"]  # beta: 2 chunks; z: 3 mentions
    assert (await stack.graph.chunk_graph(namespace, [])).entities == []
    nothing_kept = await stack.graph.chunk_graph(namespace, chunks, max_entities=0)
    assert nothing_kept.entities == [] and nothing_kept.relationships == []
    assert nothing_kept.chunk_entities == everything.chunk_entities
    other = await kb.create_namespace("other", namespace=f"other-{uuid.uuid4().hex[:8]}")
    try:
        assert await stack.graph.chunk_graph(other.namespace_id, chunks) == ChunkGraph()
        assert await stack.graph.entity_refs_for_chunks(other.namespace_id, chunks) == {}
    finally:
        await kb.delete_namespace(other.namespace_id)


async def test_write_many_lands_every_batch_or_none(kb: Khora, namespace: str) -> None:
    stack = kb._stack
    dim = kb.engine.embedder.dimension
    heron = Entity(id="e-heron", namespace_id=namespace, name="Project Heron", aliases=["Heron"])
    heron_again = Entity(
        id="e-heron", namespace_id=namespace, name="Project Heron", type="PROJECT", aliases=["HERON-1"]
    )
    may = Entity(id="e-may", namespace_id=namespace, name="May", type="DATE")
    first = _doc_batch(
        namespace,
        "d-one",
        "Project Heron ships in May.",
        dim,
        entities=[heron, may],
        mentions=["e-heron", "e-may"],
    )
    broken = _doc_batch(
        namespace,
        "d-two",
        "Heron-1 is the first Heron build.",
        dim,
        entities=[heron_again],
        mentions=["e-heron", "e-nobody"],
    )
    with pytest.raises(InvalidInputError):
        await stack.write_many(namespace, [first, broken])
    stats = await kb.stats(namespace)
    assert (stats.documents, stats.chunks, stats.entities) == (0, 0, 0)
    assert await stack.documents.get_documents(namespace, ["d-one", "d-two"]) == []

    second = _doc_batch(
        namespace,
        "d-two",
        "Heron-1 is the first Heron build.",
        dim,
        entities=[heron_again],
        mentions=["e-heron"],
        relationships=[
            Relationship(
                id="r-1",
                namespace_id=namespace,
                source_id="e-heron",
                target_id="e-may",
                type="SHIPS_IN",
                weight=1.0,
                document_id="d-one",
            ),
            Relationship(
                id="r-1",
                namespace_id=namespace,
                source_id="e-heron",
                target_id="e-may",
                type="SHIPS_IN",
                weight=2.0,
                document_id="d-two",
            ),
        ],
    )
    await stack.write_many(namespace, [first, second])
    stats = await kb.stats(namespace)
    assert (stats.documents, stats.chunks, stats.entities, stats.relationships) == (2, 2, 2, 1)
    (entity,) = await stack.graph.get_entities(namespace, ["e-heron"])
    # merged as if written one after the other: first name kept, aliases united, typed wins
    assert entity.name == "Project Heron"
    assert entity.type == "PROJECT"
    assert {a.lower() for a in entity.aliases} >= {"heron", "heron-1"}
    assert entity.mention_count == 2
    page = await stack.vectors.search(namespace, first.chunks[0].embedding, limit=5)
    assert {h.chunk.document_id for h in page.hits} == {"d-one", "d-two"}

    with pytest.raises(InvalidInputError):  # one document id twice in one call
        await stack.write_many(namespace, [first, first])

    # Forgetting one document of a grouped write leaves the other whole, vectors included.
    assert await kb.forget("d-one", namespace=namespace)
    page = await stack.vectors.search(namespace, first.chunks[0].embedding, limit=5)
    assert [h.chunk.document_id for h in page.hits] == ["d-two"]
    stats = await kb.stats(namespace)
    assert (stats.documents, stats.chunks) == (1, 1)


async def test_remember_batch_lands_what_remember_one_by_one_does(kb: Khora, namespace: str) -> None:
    """Grouped writes (one per window) leave the same graph as one write per document."""
    docs = [
        *DOCS,
        {"content": "Omar Reyes presented Project Kestrel at Northwind Robotics in 2024."},
        {"content": "Maya Chen and Omar Reyes met at Riverside Park."},
    ]
    outcomes = await kb.remember_batch(docs, namespace=namespace)
    assert all(not isinstance(o, Exception) for o in outcomes)
    other = (await kb.create_namespace("one-by-one", namespace=f"seq-{uuid.uuid4().hex[:8]}")).namespace_id
    try:
        for d in docs:
            await kb.remember(namespace=other, **d)

        async def graph_of(ns: str):
            stack = kb._stack
            entities = await stack.graph.list_entities(ns, limit=1000)
            by_id = {e.id: e.name for e in entities}
            nodes = sorted(
                (e.name, e.type, e.mention_count, tuple(sorted(a.lower() for a in e.aliases)))
                for e in entities
            )
            hood = await stack.graph.neighbourhood(ns, list(by_id), depth=1, max_fanout=1000)
            edges = sorted(
                (by_id[r.source_id], by_id[r.target_id], r.type, r.weight) for r in hood.relationships
            )
            return (await kb.stats(ns)).model_dump(exclude={"namespace_id"}), nodes, edges

        assert await graph_of(namespace) == await graph_of(other)
    finally:
        await kb.delete_namespace(other)


async def test_repeated_entity_vectors_land_once_a_second_chunk_mentions_the_entity(
    khora_config, embedder
) -> None:
    """``entity_vectors="repeated"``: a vector is stored only when a second chunk mentions
    the entity, and the entity vector search sees only entities with one."""
    ingest = khora_config.ingest.model_copy(update={"entity_vectors": "repeated"})
    async with Khora(config=khora_config.model_copy(update={"ingest": ingest}), embedder=embedder) as k:
        namespace = (
            await k.create_namespace("repeated", namespace=f"test-{uuid.uuid4().hex[:12]}")
        ).namespace_id
        graph = k.engine.stack.graph

        async def vectors() -> dict[str, list[float] | None]:
            found = await graph.find_entities_by_name(namespace, ["Maya Chen", "Lisbon"])
            return {e.name: e.embedding for e in found}

        try:
            await k.remember("Maya Chen flew to Lisbon.", namespace=namespace)
            assert await vectors() == {"Maya Chen": None, "Lisbon": None}
            await k.remember("Maya Chen met Omar Haddad in Porto.", namespace=namespace)
            after = await vectors()
            assert after["Lisbon"] is None and after["Maya Chen"] is not None
            [hits] = await graph.search_entities_by_vectors(namespace, [after["Maya Chen"]], limit=10)
            names = [h.entity.name for h in hits]
            assert names[0] == "Maya Chen" and "Lisbon" not in names
        finally:
            await k.delete_namespace(namespace)


async def test_graph_relevance_takes_the_better_of_question_and_bridged_question(
    kb: Khora, namespace: str, embedder, khora_config
) -> None:
    """With ``graph_scoring="evidence"`` the graph channel scores a reached chunk by the
    better of its cosine with the question and with the question moved towards the nearest
    passage (``graph_channel`` module docstring)."""
    from khora_core.retrieval import graph_channel, graph_reach

    await _load(kb, namespace)
    question = "Who leads the project of the company Maya Chen came from?"
    evidence = khora_config.model_copy(
        update={"vectorcypher": khora_config.vectorcypher.model_copy(update={"graph_scoring": "evidence"})}
    )
    async with Khora(config=evidence, embedder=embedder) as scored:
        result = await scored.recall(question, namespace=namespace, mode=SearchMode.GRAPH, limit=5)
    graph_info = result.engine_info["channels"]["graph"]
    nearest = await kb.recall(question, namespace=namespace, mode=SearchMode.VECTOR, limit=1)
    assert graph_info["bridge_passage"] == nearest.chunks[0].id

    stack = kb._stack
    qvec = await embedder.embed_query(question)
    chunk_ids = [
        c.id for c in (await kb.recall(question, namespace=namespace, mode=SearchMode.VECTOR)).chunks
    ]
    top = (await stack.vectors.embeddings(namespace, chunk_ids[:1]))[chunk_ids[0]]
    bridge = graph_channel.bridged_query(qvec, top)
    direct = await stack.vectors.similarities(namespace, qvec, chunk_ids)
    bridged = await stack.vectors.similarities(namespace, bridge, chunk_ids)
    relevance = await graph_reach.relevance_to(stack, namespace, qvec, chunk_ids, bridge=bridge)
    assert set(relevance) == set(chunk_ids)
    for cid in chunk_ids:
        assert relevance[cid] == pytest.approx(max(0.0, direct[cid], bridged[cid]), abs=1e-6)
    assert any(bridged[c] > direct[c] + 1e-6 for c in chunk_ids[1:])  # the bridge moves something up


async def test_graph_reach_keeps_the_chunks_most_relevant_to_the_question(
    kb: Khora, namespace: str, embedder
) -> None:
    """An evidence group keeps the chunks most relevant to the question among everything
    its entities are mentioned in, not the ones that repeat the name most (``graph_channel``
    module docstring, "Reach")."""
    from khora_core.retrieval import graph_reach

    off_topic = [
        f"Northwind Robotics filed quarterly form {i}. Northwind Robotics paid the filing fee {i}."
        for i in range(5)
    ]
    on_topic = [
        f"Northwind Robotics tested an underwater welding drone in the harbour, trial {i}." for i in range(3)
    ]
    await kb.remember_batch([{"content": t} for t in off_topic + on_topic], namespace=namespace)
    stack = kb._stack
    [entity] = await stack.graph.find_entities_by_name(namespace, ["Northwind Robotics"])
    question = "How did the underwater welding drone trials in the harbour go?"
    qvec = await embedder.embed_query(question)
    reached = await graph_reach.reach_by_mentions(
        stack, namespace, [([entity.id], 1.0)], limit=3, scan=400, query_vector=qvec, bridge=None
    )
    texts = {c.id: c.content for c in await stack.documents.get_chunks(namespace, list(reached.evidence))}
    assert sorted(texts.values()) == sorted(on_topic)
    assert reached.relevance is not None and len(reached.relevance) == len(off_topic) + len(on_topic)
    by_mentions = await graph_reach.reach_by_mentions(
        stack, namespace, [([entity.id], 1.0)], limit=3, scan=400, query_vector=None, bridge=None
    )
    assert set(by_mentions.evidence).isdisjoint(reached.evidence)  # without a question: most mentions


async def test_graph_nominates_only_what_the_recall_returns_beside_the_vector_channel(
    kb: Khora, namespace: str
) -> None:
    """Fused with the vector channel, the graph hands fusion at most the recall's count;
    alone (GRAPH mode) it returns its whole candidate pool before the final cut."""
    for i in range(12):
        await kb.remember(
            f"Engineer {i} of Northwind Robotics works with Maya Chen on the arm controller {i}.",
            namespace=namespace,
        )
    question = "How did Maya Chen and Northwind Robotics build the arm controller?"
    hybrid = await kb.recall(question, namespace=namespace, mode=SearchMode.HYBRID, limit=4)
    assert hybrid.engine_info["routing"]["complexity"] == "complex"
    assert 0 < hybrid.engine_info["channels"]["graph"]["count"] <= 4
    alone = await kb.recall(question, namespace=namespace, mode=SearchMode.GRAPH, limit=4)
    assert alone.engine_info["channels"]["graph"]["count"] > 4
    assert len(alone.chunks) <= 4


async def test_the_graph_channel_reads_no_row_the_vector_channel_returned(kb: Khora, namespace: str) -> None:
    """Beside the vector channel, the graph channel takes the rows of its nominated chunks
    from the vector channel's page and fetches only the others; GRAPH alone has only its five
    passage seeds' rows, and fetches the rest of what it returns."""
    for i in range(12):
        await kb.remember(
            f"Engineer {i} of Northwind Robotics works with Maya Chen on the arm controller {i}.",
            namespace=namespace,
        )
    documents = kb._stack.documents
    fetched: list[str] = []
    get_chunks = documents.get_chunks

    async def counting(namespace_id, chunk_ids):  # type: ignore[no-untyped-def]
        fetched.extend(chunk_ids)
        return await get_chunks(namespace_id, chunk_ids)

    question = "How did Maya Chen and Northwind Robotics build the arm controller?"
    documents.get_chunks = counting
    try:
        hybrid = await kb.recall(question, namespace=namespace, mode=SearchMode.HYBRID, limit=4)
        assert hybrid.engine_info["channels"]["graph"]["count"] > 0
        assert hybrid.engine_info["channels"]["vector"]["count"] == 12
        assert fetched == []  # every nominated chunk was in the vector channel's page
        await kb.recall(question, namespace=namespace, mode=SearchMode.GRAPH, limit=4)
        assert len(set(fetched)) == 12 - PASSAGE_SEEDS  # its whole pool, less the seeds' rows
    finally:
        documents.get_chunks = get_chunks


async def test_a_common_entry_entity_counts_less_than_a_rare_one(kb: Khora, namespace: str) -> None:
    """An entry entity that half the namespace's chunks mention (a chat's speaker) carries
    the graph evidence of its specificity (``fusion.entity_specificity``); a rare one keeps
    its whole link score."""
    hikes = [f"On trail {i} Caroline went hiking with her dog and a flask of tea." for i in range(9)]
    other = [f"The bakery on street {i} sells rye bread and almond croissants." for i in range(10)]
    trip = "In spring Caroline visited Lisbon and photographed the tiled houses."
    await kb.remember_batch([{"content": t} for t in [*hikes, *other, trip]], namespace=namespace)
    assert await kb._stack.documents.count_chunks(namespace) == 20
    res = await kb.recall("When did Caroline visit Lisbon?", namespace=namespace, mode=SearchMode.GRAPH)
    entry = {e["name"]: e for e in res.engine_info["channels"]["graph"]["entry_entities"]}
    assert entry["Lisbon"]["specificity"] == 1.0 and entry["Lisbon"]["score"] == 1.0
    expected = math.log(2) / math.log(20)  # 10 of 20 chunks, common above 5 %
    assert entry["Caroline"]["specificity"] == pytest.approx(expected, abs=1e-4)
    assert entry["Caroline"]["score"] == pytest.approx(expected, abs=1e-4)  # an exact link, scaled
    assert "Lisbon" in res.chunks[0].content


async def test_document_ids_come_from_namespace_and_content(kb: Khora, namespace: str) -> None:
    """The same content gets the same ids in a namespace (after a forget too), another id
    in another namespace: ingests are reproducible."""
    from khora_core.ingest.dedup import content_hash, document_id

    text = "Project Heron ships in May from the Riverside plant."
    first = await kb.remember(text, namespace=namespace)
    assert first.document_id == document_id(namespace, content_hash(text))
    await kb.forget(first.document_id, namespace=namespace)
    again = await kb.remember(text, namespace=namespace)
    assert (again.document_id, again.chunk_ids, again.duplicate) == (
        first.document_id,
        first.chunk_ids,
        False,
    )
    other = (await kb.create_namespace(namespace=f"other-{uuid.uuid4().hex[:8]}")).namespace_id
    try:
        elsewhere = await kb.remember(text, namespace=other)
        assert elsewhere.document_id != first.document_id
    finally:
        await kb.delete_namespace(other)


async def test_concurrent_remembers_of_the_same_content_store_it_once(kb: Khora, namespace: str) -> None:
    """Calls racing with the same content store it once under one id: a later write meets
    the content-derived id already there (the embedded store reports a duplicate, PostgreSQL
    rewrites the same rows), so nothing is doubled."""
    import asyncio

    text = "Maya Chen moved the Kestrel review to Thursday."
    results = await asyncio.gather(*(kb.remember(text, namespace=namespace) for _ in range(3)))
    assert len({r.document_id for r in results}) == 1
    assert not all(r.duplicate for r in results)
    stats = await kb.stats(namespace)
    assert (stats.documents, stats.chunks) == (1, 1)
    res = await kb.recall("When is the Kestrel review?", namespace=namespace, mode=SearchMode.VECTOR)
    assert len(res.chunks) == 1


async def test_a_stored_vector_reads_back_equal(kb: Khora, namespace: str, embedder) -> None:
    """What the embedder made is what every read returns, whatever the database driver's
    vector codec hands back (pgvector's asyncpg codec returns arrays before 0.5, ``Vector``
    objects since)."""
    text = "Maya Chen is the CTO of Northwind Robotics."
    await kb.remember(text, namespace=namespace)
    expected = np.asarray(await embedder.embed_documents([text]), dtype=np.float32)[0]
    result = await kb.recall("Who is the CTO?", namespace=namespace, mode=SearchMode.VECTOR)
    chunk = result.chunks[0]
    stored = await kb._stack.vectors.embeddings(namespace, [chunk.id])
    assert set(stored) == {chunk.id}
    assert all(isinstance(x, float) for x in stored[chunk.id])
    np.testing.assert_allclose(np.asarray(stored[chunk.id], dtype=np.float32), expected, rtol=0, atol=1e-6)
    page = await kb._stack.vectors.search(namespace, expected.tolist(), limit=1)
    assert [h.chunk.id for h in page.hits] == [chunk.id]
    assert page.hits[0].score == pytest.approx(1.0, abs=1e-5)
    if page.hits[0].chunk.embedding is not None:  # a search hit carries its vector (for MMR)
        got = np.asarray(page.hits[0].chunk.embedding, dtype=np.float32)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


async def test_metadata_numbers_read_back_as_written(kb: Khora, namespace: str) -> None:
    """Floats stay floats and ints ints, whatever their size, in namespace, document and
    chunk metadata. (PostgreSQL's ``jsonb`` keeps numbers as exact decimals: a float sent
    as Python writes it, "1e+16", came back as the int 10000000000000000.)"""
    meta = {
        "round": 1e16,
        "odd": 1.855950997391831e16,
        "negative": -2.5e20,
        "largest": 1.7976931348623157e308,
        "small": 1e-7,
        "fraction": 0.1,
        "int": 10**20,
        "nested": {"list": [3e17, 7, -0.5]},
    }
    other = f"{namespace}-numbers"
    created = await kb.create_namespace("numbers", namespace=other, metadata=meta)
    try:
        assert typed((await kb.get_namespace(other)).metadata) == typed(meta)
        assert typed(created.metadata) == typed(meta)
    finally:
        await kb.delete_namespace(other)
    await kb.remember("Maya Chen is the CTO of Northwind Robotics.", namespace=namespace, metadata=meta)
    result = await kb.recall("Who is the CTO?", namespace=namespace, mode=SearchMode.VECTOR)
    assert typed(result.documents[0].metadata) == typed(meta)
    assert typed(result.chunks[0].metadata) == typed(meta)
    filtered = await kb.recall(
        "Who is the CTO?",
        namespace=namespace,
        mode=SearchMode.VECTOR,
        filter={"metadata.round": {"$gte": 1e16}},
    )
    assert [c.id for c in filtered.chunks] == [result.chunks[0].id]


@pytest.mark.parametrize("chunk_context", [True, False], ids=["context", "no-context"])
async def test_a_title_is_searched_with_its_chunks(
    stack_name: str, chunk_context: bool, request: pytest.FixtureRequest, tmp_path, embedder
) -> None:
    """``remember(text, title=...)`` finds the chunk by its title (BM25 and vector), unless
    ``IngestConfig.chunk_context`` is off; the title never becomes part of the content."""
    from tests.fixtures.stacks import config_for

    cfg = config_for(stack_name, request, tmp_path / "data")
    cfg = cfg.model_copy(update={"ingest": cfg.ingest.model_copy(update={"chunk_context": chunk_context})})
    async with Khora(config=cfg, embedder=embedder) as kb:
        ns = (await kb.create_namespace("titles", namespace=f"t-{uuid.uuid4().hex[:10]}")).namespace_id
        try:
            await kb.remember("It ships in May with two new sensors.", namespace=ns, title="Quokkabot")
            await kb.remember("The cafeteria opens at eight.", namespace=ns, title="Canteen")
            res = await kb.recall("Quokkabot", namespace=ns, mode=SearchMode.KEYWORD)
            assert bool(res.chunks) is chunk_context
            if chunk_context:
                assert res.chunks[0].content == "It ships in May with two new sensors."
                (stored,) = await kb._stack.documents.get_chunks(ns, [res.chunks[0].id])
                assert "Quokkabot" in (stored.context or "")
            vec = await kb.recall("When does the Quokkabot ship?", namespace=ns, mode=SearchMode.VECTOR)
            top = vec.chunks[0].vector_similarity
            plain = float(
                np.dot(
                    *np.asarray(
                        [
                            await embedder.embed_query("When does the Quokkabot ship?"),
                            (await embedder.embed_documents(["It ships in May with two new sensors."]))[0],
                        ]
                    )
                )
            )
            assert (top > plain + 0.05) is chunk_context  # the title moved the vector towards the question
        finally:
            await kb.delete_namespace(ns)


async def test_a_callers_context_is_searched_by_keyword_alone(kb: Khora, namespace: str, embedder) -> None:
    """``remember(text, context=...)``: the context finds the chunk by keyword, is stored
    beside the content (not in it), counts as the words the hit was found by when fusion
    weighs the keyword channel, and does not move the chunk's vector."""
    reply = "Sure, I can give it to you tomorrow."
    asked = "Can you send me the lasagne recipe?"
    await kb.remember(reply, namespace=namespace, context=asked)
    await kb.remember("The cafeteria opens at eight.", namespace=namespace)
    res = await kb.recall("lasagne recipe", namespace=namespace, mode=SearchMode.KEYWORD)
    assert [c.content for c in res.chunks] == [reply]
    assert all("lasagne" not in c.content for c in res.chunks)
    stored = await kb._stack.documents.get_chunks(namespace, [res.chunks[0].id])
    assert [c.context for c in stored] == [asked]  # kept beside the content
    fused = await kb.recall("lasagne recipe", namespace=namespace, mode=SearchMode.ALL)
    assert fused.engine_info["fusion"]["quality"]["keyword"] == pytest.approx(1.0)
    assert [d.content for d in res.documents] == [reply]
    vec = await kb.recall("lasagne recipe", namespace=namespace, mode=SearchMode.VECTOR)
    hit = next(c for c in vec.chunks if c.content == reply)
    alone = np.dot(
        np.asarray(await embedder.embed_query("lasagne recipe")),
        np.asarray((await embedder.embed_documents([reply]))[0]),
    )
    assert hit.vector_similarity == pytest.approx(float(alone), abs=1e-4)
    # Remembering the same text again without a context does not change what was stored.
    again = await kb.remember(reply, namespace=namespace)
    assert again.duplicate
    assert (await kb.recall("lasagne", namespace=namespace, mode=SearchMode.KEYWORD)).chunks


async def test_the_graph_walk_reaches_the_second_hop_through_a_shared_entity(
    kb: Khora, namespace: str, embedder, khora_config
) -> None:
    """The walk (``graph_scoring="walk"``) restarts at the nearest passage and reaches,
    through the entity they share (Halcyon Bio), the passage that answers the second hop; a
    passage sharing nothing with them is not reached."""
    from khora_core.retrieval.ppr import walk_passages

    ids = await _load(kb, namespace)
    question = "Who leads the project at the company Maya Chen came from?"
    stack = kb._stack
    qvec = await embedder.embed_query(question)
    nearest = (await stack.vectors.search(namespace, qvec, limit=1)).hits
    assert nearest[0].chunk.document_id == ids["doc-1"]
    mass, _, _ = await walk_passages(
        stack, namespace, seeds={}, nearest=nearest, expand=1, per_entity=30, damping=0.5, passage_share=1.0
    )
    docs = {c.id: c.document_id for c in await stack.documents.get_chunks(namespace, list(mass))}
    reached = {docs[c]: m for c, m in mass.items()}
    assert reached[ids["doc-1"]] > reached[ids["doc-2"]] > 0
    assert ids["doc-3"] not in reached
    walking = khora_config.model_copy(
        update={"vectorcypher": khora_config.vectorcypher.model_copy(update={"graph_scoring": "walk"})}
    )
    async with Khora(config=walking, embedder=embedder) as walker:
        result = await walker.recall(question, namespace=namespace, mode=SearchMode.GRAPH, limit=5)
    info = result.engine_info["channels"]["graph"]
    assert info["scoring"] == "walk" and info["walk"]["passages"] >= 2
    assert {c.document_id for c in result.chunks} >= {ids["doc-1"], ids["doc-2"]}


async def test_the_walk_does_not_pass_through_an_entity_mentioned_past_max_mentions(
    kb: Khora, namespace: str
) -> None:
    """``neighbourhood(max_mentions=...)``: an entity mentioned more often is reached (and a
    seed stays in the result) but not walked through; below the cap the walk is unchanged."""
    stack, dim = kb._stack, kb.engine.embedder.dimension
    names = {"e-ana": "Ana", "e-hub": "Hubland", "e-far": "Farview", "e-near": "Nearby"}
    ents = [Entity(id=i, namespace_id=namespace, name=n) for i, n in names.items()]

    def rel(a: str, b: str) -> Relationship:
        return Relationship(
            id=f"r-{a}-{b}", namespace_id=namespace, source_id=a, target_id=b, type="NEAR", document_id="d0"
        )

    batches = [
        _doc_batch(namespace, "d0", "Ana near Hubland, Nearby; Hubland near Farview.", dim, entities=ents,
                   mentions=["e-ana", "e-hub", "e-near", "e-far"],
                   relationships=[rel("e-ana", "e-hub"), rel("e-hub", "e-far"), rel("e-ana", "e-near")]),
        *(_doc_batch(namespace, f"d{i}", f"Hubland, part {i}.", dim, mentions=["e-hub"]) for i in range(1, 4)),
    ]  # fmt: skip
    await stack.write_many(namespace, batches)
    full = await stack.graph.neighbourhood(namespace, ["e-ana"], depth=2)
    assert full.distance == {"e-ana": 0, "e-hub": 1, "e-near": 1, "e-far": 2}
    capped = await stack.graph.neighbourhood(namespace, ["e-ana"], depth=2, max_mentions=3)
    assert capped.distance == {"e-ana": 0, "e-hub": 1, "e-near": 1}  # Hubland: 4 mentions
    assert (
        await stack.graph.neighbourhood(namespace, ["e-ana"], depth=2, max_mentions=4)
    ).distance == full.distance
    from_hub = await stack.graph.neighbourhood(namespace, ["e-hub"], depth=2, max_mentions=3)
    assert from_hub.distance == {"e-hub": 0}


async def test_walk_distances_are_the_neighbourhood_walks_distances(kb: Khora, namespace: str) -> None:
    """``GraphStore.walk_distances``: the walk of ``neighbourhood`` (fan-out by weight then
    id, the frontier's first edges before its second, the ``max_entities`` budget, types,
    ``max_mentions``), its distances only; a seed that is not stored, or is another
    namespace's, is not in the result."""
    stack, dim = kb._stack, kb.engine.embedder.dimension
    names = {"e-a": "Ana", "e-b": "Bo", "e-hub": "Hubland", "e-x": "Xeno", "e-y": "Yara", "e-z": "Zed",
             "e-w": "Wen", "e-far": "Farview"}  # fmt: skip
    ents = [Entity(id=i, namespace_id=namespace, name=n) for i, n in names.items()]

    def rel(a: str, b: str, weight: float, type: str = "NEAR") -> Relationship:
        return Relationship(id=f"r-{a}-{b}", namespace_id=namespace, source_id=a, target_id=b, type=type,
                            weight=weight, document_id="d0")  # fmt: skip

    edges = [rel("e-a", "e-x", 1.0), rel("e-a", "e-y", 3.0), rel("e-a", "e-hub", 2.0),
             rel("e-z", "e-b", 3.0), rel("e-b", "e-w", 1.0, "FAR"), rel("e-hub", "e-far", 1.0),
             rel("e-y", "e-far", 0.5), rel("e-x", "e-z", 1.0)]  # fmt: skip
    batches = [
        _doc_batch(namespace, "d0", "Ana, Bo, Hubland, Xeno, Yara, Zed, Wen, Farview.", dim, entities=ents,
                   mentions=list(names), relationships=edges),
        *(_doc_batch(namespace, f"d{i}", f"Hubland, part {i}.", dim, mentions=["e-hub"]) for i in range(1, 4)),
    ]  # fmt: skip
    await stack.write_many(namespace, batches)
    other = await kb.create_namespace("other", namespace=f"other-{uuid.uuid4().hex[:8]}")
    try:
        await stack.graph.upsert_graph(
            other.namespace_id,
            entities=[Entity(id="e-elsewhere", namespace_id=other.namespace_id, name="Else")],
        )
        graph = stack.graph
        seeds = ["e-a", "e-b", "e-missing", "e-elsewhere"]
        assert await graph.walk_distances(namespace, seeds, depth=1, max_fanout=2) == {
            "e-a": 0, "e-b": 0, "e-y": 1, "e-hub": 1, "e-z": 1, "e-w": 1,
        }  # fmt: skip
        # The budget takes each seed's heaviest edge first (Yara 3.0, Zed 3.0), then the next.
        assert await graph.walk_distances(namespace, seeds, depth=2, max_entities=3) == {
            "e-a": 0, "e-b": 0, "e-y": 1, "e-z": 1, "e-hub": 1,
        }  # fmt: skip
        cases = [
            {"depth": 0},
            {"depth": 1, "max_fanout": 0},
            {"depth": 1, "max_fanout": 2},
            {"depth": 2},
            {"depth": 3, "max_fanout": 1},
            {"depth": 2, "max_entities": 3},
            {"depth": 2, "max_entities": 0},
            {"depth": 3, "relationship_types": ["NEAR"]},
            {"depth": 2, "relationship_types": ["FAR"]},
            {"depth": 3, "max_mentions": 3},
        ]
        for case in cases:
            for start in (seeds, ["e-hub"], ["e-missing"], []):
                walked = await graph.walk_distances(namespace, start, **case)
                assert walked == (await graph.neighbourhood(namespace, start, **case)).distance, (start, case)
        assert await graph.walk_distances(namespace, ["e-a"], depth=3, max_mentions=3) == {
            "e-a": 0, "e-x": 1, "e-y": 1, "e-hub": 1, "e-z": 2, "e-far": 2, "e-b": 3,
        }  # fmt: skip
        assert await graph.walk_distances(other.namespace_id, ["e-a", "e-elsewhere"], depth=2) == {
            "e-elsewhere": 0
        }
    finally:
        await kb.delete_namespace(other.namespace_id)


async def test_entity_and_relationship_properties_merge_key_by_key(kb: Khora, namespace: str) -> None:
    """Free-form ``properties`` (nested JSON) are stored and read back by every graph read;
    a later upsert updates them key by key (in one write and across writes), an upsert
    without properties keeps them, and another namespace sees none of them."""
    stack, dim = kb._stack, kb.engine.embedder.dimension
    nested = {"born": 1815, "tags": ["math", "poetry"], "meta": {"src": "wiki", "ok": True}, "none": None}
    ada = Entity(id="e-ada", namespace_id=namespace, name="Ada", type="PERSON", properties=nested)
    ada_later = Entity(
        id="e-ada", namespace_id=namespace, name="Ada", properties={"born": 1816, "city": "London"}
    )
    babbage = Entity(id="e-babbage", namespace_id=namespace, name="Babbage")

    def knows(props: dict) -> Relationship:
        return Relationship(
            id="r-knows", namespace_id=namespace, source_id="e-ada", target_id="e-babbage", type="KNOWS",
            document_id="d1", properties=props,
        )  # fmt: skip

    first = _doc_batch(
        namespace, "d1", "Ada wrote to Babbage.", dim, entities=[ada, babbage, ada_later], mentions=["e-ada"],
        relationships=[knows({"since": 1833, "via": "letters"}), knows({"via": "salon"})],
    )  # fmt: skip
    await stack.write_many(namespace, [first])
    merged = {**nested, "born": 1816, "city": "London"}
    (got,) = await stack.graph.get_entities(namespace, ["e-ada"])
    assert got.properties == merged
    (rel,) = await stack.graph.list_relationships(namespace, types=["KNOWS"])
    assert rel.properties == {"since": 1833, "via": "salon"}

    await stack.graph.upsert_graph(
        namespace,
        entities=[
            Entity(id="e-ada", namespace_id=namespace, name="Ada", properties={"meta": {"src": "book"}})
        ],
        relationships=[knows({"weight_note": "strong"})],
    )
    await stack.graph.upsert_graph(
        namespace, entities=[babbage, Entity(id="e-ada", namespace_id=namespace, name="Ada")]
    )
    merged["meta"] = {"src": "book"}  # a key's value is replaced whole, not merged inside
    (got,) = await stack.graph.get_entities(namespace, ["e-ada"])
    assert got.properties == merged and got.type == "PERSON"
    (rel,) = await stack.graph.list_relationships(namespace, entity_ids=["e-ada"])
    assert rel.properties == {"since": 1833, "via": "salon", "weight_note": "strong"}
    assert (await stack.graph.get_entities(namespace, ["e-babbage"]))[0].properties == {}
    # Every read path returns them.
    assert (await stack.graph.find_entities_by_name(namespace, ["ada"]))[0].properties == merged
    hood = await stack.graph.neighbourhood(namespace, ["e-babbage"], depth=1)
    assert {e.id: e.properties for e in hood.entities}["e-ada"] == merged
    assert [r.properties for r in hood.relationships] == [rel.properties]
    assert {e.id: e.properties for e in await stack.graph.list_entities(namespace)}["e-ada"] == merged

    other = await kb.create_namespace("other", namespace=f"other-{uuid.uuid4().hex[:8]}")
    try:
        assert await stack.graph.get_entities(other.namespace_id, ["e-ada"]) == []
        await stack.graph.upsert_graph(
            other.namespace_id,
            entities=[Entity(id="e-ada", namespace_id=other.namespace_id, name="Ada", properties={"x": 1})],
        )
        assert (await stack.graph.get_entities(other.namespace_id, ["e-ada"]))[0].properties == {"x": 1}
        assert (await stack.graph.get_entities(namespace, ["e-ada"]))[0].properties == merged
    finally:
        await kb.delete_namespace(other.namespace_id)


async def test_recall_and_get_entity_return_the_stored_properties(kb: Khora, namespace: str) -> None:
    """The entities and relationships of a recall result, and ``get_entity``, carry the
    properties stored with them."""
    stack, dim = kb._stack, kb.engine.embedder.dimension
    ada = Entity(id="e-ada", namespace_id=namespace, name="Ada", type="PERSON", properties={"born": 1815})
    babbage = Entity(id="e-babbage", namespace_id=namespace, name="Babbage", type="PERSON")
    knows = Relationship(
        id="r-knows", namespace_id=namespace, source_id="e-ada", target_id="e-babbage", type="KNOWS",
        document_id="d1", properties={"since": 1833},
    )  # fmt: skip
    batch = _doc_batch(
        namespace, "d1", "Ada wrote to Babbage.", dim, entities=[ada, babbage], mentions=["e-ada", "e-babbage"],
        relationships=[knows],
    )  # fmt: skip
    await stack.write_many(namespace, [batch])
    result = await kb.recall("Whom did Ada write to?", namespace=namespace, mode="graph")
    assert [c.id for c in result.chunks] == ["d1-c0"]
    assert {e.id: e.properties for e in result.entities} == {"e-ada": {"born": 1815}, "e-babbage": {}}
    assert [(r.id, r.properties) for r in result.relationships] == [("r-knows", {"since": 1833})]
    got = await kb.get_entity("e-ada", namespace=namespace)
    assert got is not None and got.properties == {"born": 1815}
