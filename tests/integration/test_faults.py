"""A server restarts between calls (issue #38 item 2), on PostgreSQL + pgvector + Neo4j.

The test stops the session's own PostgreSQL (or Neo4j) while one ``Khora`` stays open.
Calls made during the outage must fail quickly with a typed ``StorageUnavailableError``
naming the server's setting (retryable: the next call reconnects), never hang or raise an
untyped error, and must leave nothing half-written. Once the server is back, the same
``Khora`` (same process, no reopen) answers again with new connections, and the write that
failed during the outage completes once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from khora_core import Khora, KhoraConfig, RememberResult
from khora_core.errors import StorageUnavailableError
from tests.fixtures.embedders import RecordingEmbedder

pytestmark = [pytest.mark.postgres, pytest.mark.neo4j]

#: The most seconds one call may take to fail while its server is down.
OUTAGE_BOUND_S = 20.0


def _config(postgres_dsn: str, neo4j_server: Any) -> KhoraConfig:
    return KhoraConfig(
        storage={
            "database_url": postgres_dsn,
            "neo4j_url": neo4j_server.uri,
            "neo4j_user": neo4j_server.user,
            "neo4j_password": neo4j_server.password,
            "connect_timeout_s": 2.0,
        }
    )


@pytest.fixture
async def kb(postgres_dsn: str, neo4j_server: Any) -> AsyncIterator[Khora]:
    async with Khora(config=_config(postgres_dsn, neo4j_server), embedder=RecordingEmbedder(384)) as k:
        yield k


async def _fails_unavailable(call: Callable[[], Awaitable[Any]], setting: str) -> StorageUnavailableError:
    """Run ``call`` during an outage: it must raise StorageUnavailableError naming ``setting`` in time."""
    t0 = time.monotonic()
    with pytest.raises(StorageUnavailableError) as info:
        await asyncio.wait_for(call(), timeout=OUTAGE_BOUND_S * 3)
    took = time.monotonic() - t0
    assert took < OUTAGE_BOUND_S, f"the call took {took:.1f} s to fail"
    assert info.value.setting == setting, info.value
    assert setting in str(info.value)
    return info.value


async def _batch_fails_unavailable(kb: Khora, ns: str, setting: str) -> None:
    """A batch during an outage: it raises StorageUnavailableError (the namespace check could
    not reach the server) or returns one per item, in time."""
    items = [_passage(i) for i in range(1, 4)]
    t0 = time.monotonic()
    try:
        outcomes: list[Any] = await asyncio.wait_for(
            kb.remember_batch(items, namespace=ns), OUTAGE_BOUND_S * 3
        )
    except StorageUnavailableError as exc:
        outcomes = [exc] * len(items)
    assert time.monotonic() - t0 < OUTAGE_BOUND_S
    assert all(isinstance(o, StorageUnavailableError) and o.setting == setting for o in outcomes), outcomes


async def _state(kb: Khora, ns: str) -> tuple[int, int]:
    stats = await kb.stats(ns)
    return stats.documents, stats.chunks


async def _assert_as_clean(kb: Khora, ns: str, clean: list[tuple[str, int]], clean_stats: Any) -> None:
    """The namespace holds what a clean write left: the same entities with the same mention
    counts, and the same document, chunk, entity and relationship counts."""
    assert sorted((e.name, e.mention_count) for e in await kb.list_entities(namespace=ns, limit=100)) == clean
    stats = await kb.stats(ns)
    assert (stats.documents, stats.chunks, stats.entities, stats.relationships) == (
        clean_stats.documents,
        clean_stats.chunks,
        clean_stats.entities,
        clean_stats.relationships,
    )


def _passage(i: int) -> str:
    return f"Report {i}. Maya Chen met Omar Haddad at Northwind Robotics in Lisbon."


async def test_postgres_restart_between_calls(kb: Khora, postgres_server: Any) -> None:
    if not postgres_server.managed:
        pytest.skip("needs the session's own PostgreSQL to stop (KHORA_DATABASE_URL is external)")
    ns = (await kb.create_namespace("fault", namespace=f"pgre-{uuid.uuid4().hex[:12]}")).namespace_id
    first = await kb.remember(_passage(0), namespace=ns)
    assert (await kb.recall("Who did Maya Chen meet?", namespace=ns)).chunks
    setting = "KHORA_DATABASE_URL"
    try:
        await asyncio.to_thread(postgres_server.stop)
        # Every kind of call fails typed and fast while the server is down.
        await _fails_unavailable(lambda: kb.remember(_passage(1), namespace=ns), setting)
        await _fails_unavailable(lambda: kb.recall("Who did Maya Chen meet?", namespace=ns), setting)
        await _fails_unavailable(lambda: kb.stats(ns), setting)
        await _fails_unavailable(lambda: kb.forget(first.document_id, namespace=ns), setting)
        await _batch_fails_unavailable(kb, ns, setting)
    finally:
        await asyncio.to_thread(postgres_server.start)

    # The same Khora, new connections: reads and writes answer, and nothing from the outage landed.
    assert await _state(kb, ns) == (1, 1)
    again = await kb.remember(_passage(0), namespace=ns)
    assert again.duplicate and again.document_id == first.document_id
    results = await kb.remember_batch([_passage(i) for i in range(1, 4)], namespace=ns)
    assert all(isinstance(r, RememberResult) and not r.duplicate for r in results), results
    assert await _state(kb, ns) == (4, 4)
    recalled = await kb.recall("Who did Maya Chen meet?", namespace=ns, mode="graph")
    assert recalled.chunks
    assert await kb.forget(first.document_id, namespace=ns)
    assert await _state(kb, ns) == (3, 3)
    await kb.delete_namespace(ns)


async def test_neo4j_restart_between_calls(kb: Khora, neo4j_server: Any) -> None:
    if not neo4j_server.managed:
        pytest.skip("needs the session's own Neo4j to stop (KHORA_NEO4J_URL is external)")
    ns = (await kb.create_namespace("fault", namespace=f"neore-{uuid.uuid4().hex[:12]}")).namespace_id
    first = await kb.remember(_passage(0), namespace=ns, external_id="report-0")
    entities_before = (await kb.stats(ns)).entities
    assert entities_before > 0
    setting = "KHORA_NEO4J_URL"
    try:
        await asyncio.to_thread(neo4j_server.stop)
        await _fails_unavailable(lambda: kb.remember(_passage(1), namespace=ns), setting)
        await _fails_unavailable(
            lambda: kb.recall("Who did Maya Chen meet?", namespace=ns, mode="graph"), setting
        )
        await _fails_unavailable(lambda: kb.forget(first.document_id, namespace=ns), setting)
        await _batch_fails_unavailable(kb, ns, setting)
        # PostgreSQL kept nothing of the writes Neo4j refused (compensated), and the forget
        # that failed removed nothing (it removed the rows and left the graph, which a retry
        # by external_id could no longer find, before the graph went first).
        documents = kb.engine.stack.documents
        assert await documents.count_documents(ns) == 1
    finally:
        await asyncio.to_thread(neo4j_server.stop)  # no-op when stopped; clears a stale pid file
        await asyncio.to_thread(neo4j_server.start)

    stats = await kb.stats(ns)
    assert (stats.documents, stats.chunks, stats.entities) == (1, 1, entities_before)
    results = await kb.remember_batch([_passage(i) for i in range(1, 4)], namespace=ns)
    assert all(isinstance(r, RememberResult) and not r.duplicate for r in results), results
    recalled = await kb.recall("Who did Maya Chen meet?", namespace=ns, mode="graph")
    assert recalled.chunks
    # The forget refused during the outage, retried as it was asked, completes everywhere.
    assert await kb.forget(namespace=ns, external_id="report-0")
    assert await _state(kb, ns) == (3, 3)
    records, _, _ = await kb.engine.stack._driver.execute_query(
        "MATCH (c:Chunk {namespace_id: $ns, document_id: $doc}) RETURN count(c) AS n",
        {"ns": ns, "doc": first.document_id},
    )
    assert records[0]["n"] == 0
    await kb.delete_namespace(ns)


async def test_a_stranded_graph_is_replaced_when_the_document_is_written_again(kb: Khora) -> None:
    """When Neo4j dies after a slice of a batch's graph landed, the rows are compensated but
    the graph cannot be removed. Remembering the batch again doubled every mention count of
    the stranded documents (1 -> 2 for each entity of a one-chunk document)."""
    ns = (await kb.create_namespace("fault", namespace=f"strand-{uuid.uuid4().hex[:12]}")).namespace_id
    try:
        items = [_passage(i) for i in range(3)]
        first = await kb.remember_batch(items, namespace=ns)
        clean = sorted((e.name, e.mention_count) for e in await kb.list_entities(namespace=ns, limit=100))
        clean_stats = await kb.stats(ns)
        # What the compensation leaves when the graph is unreachable: the rows go, the graph stays.
        for r in first:
            assert isinstance(r, RememberResult)
            await kb.engine.stack.documents.delete_document_rows(ns, r.document_id)
        again = await kb.remember_batch(items, namespace=ns)
        assert [r.document_id for r in again] == [r.document_id for r in first]  # type: ignore[union-attr]
        await _assert_as_clean(kb, ns, clean, clean_stats)
    finally:
        await kb.delete_namespace(ns)


async def test_repair_removes_stranded_graphs_and_rebuilds_missing_ones(kb: Khora) -> None:
    """``Khora.repair`` (issue #38 item 1): a graph whose rows a rolled-back write removed
    is dropped, a document stored without its graph is remembered again, and the namespace
    ends exactly as a clean write left it; a second repair finds nothing."""
    ns = (await kb.create_namespace("fault", namespace=f"repair-{uuid.uuid4().hex[:12]}")).namespace_id
    try:
        items = [
            {"content": _passage(1)},
            {"content": _passage(2), "external_id": "notes/2", "metadata": {"team": "ops"}},
            {"content": _passage(3), "title": "Third"},
            {"content": "Report 4. Lena Park joined Contoso in Oslo.", "external_id": "k4", "dedup": False},
        ]
        first = await kb.remember_batch(items, namespace=ns)
        assert all(isinstance(r, RememberResult) for r in first)
        ids = [r.document_id for r in first]  # type: ignore[union-attr]
        clean = sorted((e.name, e.mention_count) for e in await kb.list_entities(namespace=ns, limit=100))
        clean_stats = await kb.stats(ns)
        assert (await kb.repair(namespace=ns)).model_dump() == {
            "namespace_id": ns,
            "documents_checked": 4,
            "stranded_graphs": [],
            "rebuilt": [],
            "failed": {},
        }

        stack = kb.engine.stack
        # Stranded: the rows of document 1 rolled back, its graph left behind.
        await stack.documents.delete_document_rows(ns, ids[0])
        # Missing: the graph of documents 2 and 4 never landed.
        for doc_id in (ids[1], ids[3]):
            await stack._neo4j.delete_document(ns, doc_id)
        recalled = await kb.recall("Who joined Contoso?", namespace=ns, mode="graph")
        assert not any(c.document_id == ids[3] for c in recalled.chunks)  # no graph: not found by it

        report = await kb.repair(namespace=ns)
        assert report.stranded_graphs == [ids[0]]
        assert sorted(report.rebuilt) == sorted([ids[1], ids[3]])
        assert report.failed == {} and report.clean
        assert report.documents_checked == 3

        # Document 1 is gone for good (its write had failed); the others are whole again.
        again = await kb.remember_batch(items[:1], namespace=ns)
        assert isinstance(again[0], RememberResult) and not again[0].duplicate
        await _assert_as_clean(kb, ns, clean, clean_stats)
        docs = {d.id: d for d in await stack.documents.get_documents(ns, ids)}
        assert set(docs) == set(ids)  # same ids: rebuilt documents keep theirs
        assert docs[ids[1]].metadata == {"team": "ops"} and docs[ids[1]].external_id == "notes/2"
        recalled = await kb.recall("Who joined Contoso?", namespace=ns, mode="graph")
        assert any(c.document_id == ids[3] for c in recalled.chunks)
        assert (await kb.repair(namespace=ns)).stranded_graphs == []
        assert (await kb.repair(namespace=ns)).rebuilt == []
    finally:
        await kb.delete_namespace(ns)
