"""Neo4j killed in the middle of ``remember_batch`` (issue #43 item 3, issue #38 items 1-2).

The test SIGKILLs the session's own Neo4j while a batch is being written. The caller must
get, within about one driver retry period, a ``RememberResult`` or a typed, retryable
``StorageUnavailableError`` naming the Neo4j setting for every item, not one retry period
per item. PostgreSQL must hold exactly the
documents reported written. After the server is back, the same ``Khora`` recovers without
reopening, and the same batch completes with no duplicate document.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from typing import Any

import pytest

from khora_core import Khora, KhoraConfig, RememberResult
from khora_core.errors import StorageUnavailableError
from tests.fixtures.embedders import RecordingEmbedder

pytestmark = [pytest.mark.postgres, pytest.mark.neo4j, pytest.mark.slow]

#: Items of the batch: several windows of 256 one-chunk items, so the kill lands mid-batch.
ITEMS = 900
#: The most seconds the batch may take to return once Neo4j is dead.
BOUND_S = 45.0


def _kill(neo4j_server: Any) -> None:
    from tools.services import neo4j

    pid = neo4j._read_pid(neo4j_server.state_dir)
    assert pid is not None, "the session's Neo4j is not running"
    os.kill(pid, signal.SIGKILL)


async def test_neo4j_killed_mid_batch(postgres_dsn: str, neo4j_server: Any) -> None:
    if not neo4j_server.managed:
        pytest.skip("needs the session's own Neo4j server to kill (KHORA_NEO4J_URL is external)")
    config = KhoraConfig(
        storage={
            "database_url": postgres_dsn,
            "neo4j_url": neo4j_server.uri,
            "neo4j_user": neo4j_server.user,
            "neo4j_password": neo4j_server.password,
            "connect_timeout_s": 2.0,
        }
    )
    items = [{"content": f"Report {i}. Maya Chen met Omar Haddad in Lisbon."} for i in range(ITEMS)]
    async with Khora(config=config, embedder=RecordingEmbedder(384)) as kb:
        ns = (await kb.create_namespace("fault", namespace=f"fault-{uuid.uuid4().hex[:12]}")).namespace_id
        docs = kb.engine.stack.documents
        try:
            batch = asyncio.ensure_future(kb.remember_batch(items, namespace=ns))
            while await docs.count_documents(ns) == 0:  # the first window has landed
                assert not batch.done(), "the batch ended before Neo4j could be killed"
                await asyncio.sleep(0.05)
            await asyncio.to_thread(_kill, neo4j_server)
            killed = time.monotonic()
            outcomes = await asyncio.wait_for(batch, timeout=300)
            took = time.monotonic() - killed
        finally:
            await asyncio.to_thread(neo4j_server.stop)  # clears the dead server's pid file
            await asyncio.to_thread(neo4j_server.start)

        written = [o for o in outcomes if isinstance(o, RememberResult)]
        lost = [o for o in outcomes if isinstance(o, StorageUnavailableError)]
        assert len(written) + len(lost) == ITEMS, [o for o in outcomes if o not in written + lost][:3]
        assert lost, "the kill came too late: every item was written"
        assert took < BOUND_S, f"the batch took {took:.1f} s to return after Neo4j died"
        assert {e.setting for e in lost} == {"KHORA_NEO4J_URL"}
        # PostgreSQL holds exactly what was reported written (failed writes were compensated).
        assert await docs.count_documents(ns) == len(written)
        assert await docs.stored_document_ids(ns, [r.document_id for r in written]) == {
            r.document_id for r in written
        }

        # The same Khora reconnects: the batch again completes, with no duplicate document.
        again = await kb.remember_batch(items, namespace=ns)
        assert all(isinstance(o, RememberResult) for o in again), [
            o for o in again if not isinstance(o, RememberResult)
        ][:3]
        done_before = {r.document_id for r in written}
        assert {o.document_id for o in again if o.duplicate} == done_before  # type: ignore[union-attr]
        assert await docs.count_documents(ns) == ITEMS
        stats = await kb.stats(ns)
        assert stats.chunks == ITEMS and stats.entities > 0
        recalled = await kb.recall("Who did Maya Chen meet?", namespace=ns, mode="graph")
        assert recalled.chunks
        await kb.delete_namespace(ns)
