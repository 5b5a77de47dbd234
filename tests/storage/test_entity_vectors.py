"""Entity vectors in PostgreSQL on the PostgreSQL + Neo4j stack: an index over Neo4j's
entities that follows every write and delete, never returns an entity Neo4j lacks, and is
copied from Neo4j for a store written before it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from khora_core import Khora
from khora_core.models import Entity
from khora_core.storage.postgres.entity_vectors import COPIED_SETTING
from khora_core.storage.postgres.rows import vector_array
from tests.fixtures.stacks import config_for

pytestmark = [pytest.mark.postgres, pytest.mark.neo4j]

DOCS = [
    "Maya Chen is the CTO of Northwind Robotics. She joined Northwind Robotics from Halcyon Bio in 2023.",
    "Halcyon Bio runs Project Kestrel, a protein folding platform led by Omar Reyes.",
    "Omar Reyes presented Project Kestrel at the Lisbon Biotech Summit with Ines Duarte.",
]


@pytest.fixture
async def kb(request: pytest.FixtureRequest, tmp_path: Any, embedder: Any) -> AsyncIterator[Khora]:
    async with Khora(config=config_for("postgres", request, tmp_path), embedder=embedder) as k:
        yield k


@pytest.fixture
async def namespace(kb: Khora) -> AsyncIterator[str]:
    ns = (await kb.create_namespace("ev", namespace=f"ev-{uuid.uuid4().hex[:8]}")).namespace_id
    yield ns
    await kb.delete_namespace(ns)


async def _rows(kb: Khora, ns: str) -> dict[str, np.ndarray]:
    pool = kb.engine.stack.documents.pool
    found = await pool.fetch(
        "SELECT entity_id, embedding FROM khora_entity_vectors WHERE namespace_id = $1", ns
    )
    return {r["entity_id"]: vector_array(r["embedding"]) for r in found}


async def _graph_vectors(kb: Khora, ns: str) -> dict[str, list[float]]:
    neo = kb.engine.stack._neo4j
    out: dict[str, list[float]] = {}
    after = ""
    while page := await neo.entity_vectors_page(ns, after, 1000):
        out.update(page)
        after = page[-1][0]
    return out


async def test_vectors_follow_writes_and_deletes(kb: Khora, namespace: str) -> None:
    ids = [(await kb.remember(text, namespace=namespace)).document_id for text in DOCS]
    graph = await _graph_vectors(kb, namespace)
    rows = await _rows(kb, namespace)
    assert graph and set(rows) == set(graph)
    for eid, vector in graph.items():
        assert np.allclose(rows[eid], vector, atol=1e-6)

    stack = kb.engine.stack
    eid, vector = next(iter(graph.items()))
    [top, *_] = await stack.graph.search_entities_by_vector(namespace, vector, limit=3)
    assert top.entity.id == eid and top.score == pytest.approx(1.0, abs=1e-5)
    assert top.entity.name and top.entity.embedding is None

    # forgetting a document removes its orphaned entities from Neo4j; their vectors are never
    # returned, and the search that meets them deletes them
    await kb.forget(namespace=namespace, document_id=ids[2])
    left = await _graph_vectors(kb, namespace)
    orphans = set(graph) - set(left)
    assert orphans, "the third document should have entities of its own"
    for orphan in orphans:
        hits = await stack.graph.search_entities_by_vector(namespace, graph[orphan], limit=len(graph))
        assert orphan not in {h.entity.id for h in hits}
        assert {h.entity.id for h in hits} <= set(left)
    assert set(await _rows(kb, namespace)) == set(left)

    # LlamaIndex-style writes outside a document
    extra = Entity(
        id=f"extra-{uuid.uuid4().hex[:6]}",
        namespace_id=namespace,
        name="Zelda Quartermann",
        type="PERSON",
        embedding=list(np.ones(len(vector), dtype=np.float32) / np.sqrt(len(vector))),
    )
    await stack.graph.upsert_graph(namespace, entities=[extra])
    [hit, *_] = await stack.graph.search_entities_by_vector(namespace, extra.embedding, limit=1)
    assert hit.entity.id == extra.id
    assert await stack.graph.delete_entities(namespace, [extra.id]) == 1
    assert extra.id not in await _rows(kb, namespace)

    other = (await kb.create_namespace("ev other", namespace=f"ev-o-{uuid.uuid4().hex[:8]}")).namespace_id
    await kb.remember(DOCS[0], namespace=other)
    assert await _rows(kb, other)
    await kb.delete_namespace(other)
    assert await _rows(kb, other) == {}


async def test_a_vector_without_its_entity_is_never_returned(kb: Khora, namespace: str) -> None:
    await kb.remember(DOCS[0], namespace=namespace)
    graph = await _graph_vectors(kb, namespace)
    eid, vector = next(iter(graph.items()))
    pool = kb.engine.stack.documents.pool
    query = np.asarray(vector, dtype=np.float32)
    # ten vectors nearer the question than any stored entity, for entities Neo4j lacks: eight
    # written before the search (left by an interrupted delete) and two "after" it began
    ghosts = [f"ghost-{i}" for i in range(10)]
    for i, ghost in enumerate(ghosts):
        await pool.fetch(
            "INSERT INTO khora_entity_vectors (namespace_id, entity_id, embedding, written_at) "
            "VALUES ($1, $2, $3, statement_timestamp() + make_interval(hours => $4))",
            namespace,
            ghost,
            query,
            1 if i >= 8 else 0,
        )
    hits = await kb.engine.stack.graph.search_entities_by_vectors(namespace, [query], limit=3)
    assert [h.entity.id for h in hits[0]][:1] == [eid]
    assert len(hits[0]) == min(3, len(graph)) and not any(h.entity.id.startswith("ghost") for h in hits[0])
    # the stale ones are gone, the two written "after the search began" are kept
    assert sorted(g for g in await _rows(kb, namespace) if g.startswith("ghost")) == ghosts[8:]


async def test_a_store_written_before_the_table_is_copied_on_open(
    kb: Khora, namespace: str, request: pytest.FixtureRequest, tmp_path: Any, embedder: Any
) -> None:
    for text in DOCS:
        await kb.remember(text, namespace=namespace)
    graph = await _graph_vectors(kb, namespace)
    pool = kb.engine.stack.documents.pool
    await pool.fetch("DELETE FROM khora_entity_vectors WHERE namespace_id = $1", namespace)
    await pool.fetch("DELETE FROM khora_settings WHERE key = $1", COPIED_SETTING)
    async with Khora(config=config_for("postgres", request, tmp_path), embedder=embedder) as reopened:
        assert set(await _rows(reopened, namespace)) == set(graph)
        assert await pool.fetchval("SELECT value FROM khora_settings WHERE key = $1", COPIED_SETTING)
        eid, vector = next(iter(graph.items()))
        [top] = await reopened.engine.stack.graph.search_entities_by_vector(namespace, vector, limit=1)
        assert top.entity.id == eid
    # once copied, an open copies nothing again
    await pool.fetch("DELETE FROM khora_entity_vectors WHERE namespace_id = $1", namespace)
    async with Khora(config=config_for("postgres", request, tmp_path), embedder=embedder) as again:
        assert await _rows(again, namespace) == {}
