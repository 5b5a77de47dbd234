"""Settling after a bulk load (issue #41): ``remember_batch`` of many chunks ends with
``Khora.settle()`` on PostgreSQL + Neo4j (VACUUM (ANALYZE), indexes online, fresh index
samples, plans dropped), ``Khora.unsettled()`` names what is left, and the embedded store
has nothing to settle."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from khora_core import Khora, KhoraConfig, KhoraSync
from khora_core.errors import InvalidInputError, NamespaceNotFoundError
from tests.fixtures.stacks import config_for

_STEPS = {"postgres_vacuum_analyze_s", "neo4j_await_indexes_s", "neo4j_resample_s", "neo4j_clear_plans_s"}


def _items(n: int) -> list[dict[str, Any]]:
    tag = uuid.uuid4().hex[:8]
    return [
        {
            "content": f"Passage {i} {tag}: Marie Curie worked in Paris on radium number {i}.",
            "external_id": f"{tag}-{i}",
        }
        for i in range(n)
    ]


async def _left_unsettled(kb: Khora) -> list[str]:
    """``kb.unsettled()`` once the batch's own statistics are in. A PostgreSQL backend
    reports a transaction's row counts when it next goes idle, up to 10 s later if it
    reported within the last second (``PGSTAT_IDLE_INTERVAL``), so the counts of a batch's
    last writes can land after settle's ANALYZE and name a table again; each such table is
    settled again, for at most 15 s. A settle that analyzes nothing never empties the list."""
    left = await kb.unsettled()
    deadline = time.monotonic() + 15
    while left and time.monotonic() < deadline:
        await asyncio.sleep(1)
        await kb.settle()
        left = await kb.unsettled()
    return left


@pytest.fixture
def config(stack_name: str, request: pytest.FixtureRequest, tmp_path: Any) -> KhoraConfig:
    return config_for(stack_name, request, tmp_path / "khora-data")


async def test_a_large_batch_settles_the_servers(config: KhoraConfig, stack_name: str, embedder: Any) -> None:
    async with Khora(config=config, embedder=embedder, engine_kwargs={"settle_after_chunks": 5}) as kb:
        ns = (await kb.create_namespace("settle", namespace=f"settle-{uuid.uuid4().hex[:8]}")).namespace_id
        try:
            small = await kb.remember_batch(_items(2), namespace=ns)
            assert all(not isinstance(r, Exception) for r in small)
            assert kb.engine.last_settle == {}  # below the threshold: no settle
            results = await kb.remember_batch(_items(6), namespace=ns)
            assert all(not isinstance(r, Exception) for r in results)
            if stack_name == "postgres":
                assert set(kb.engine.last_settle) == _STEPS, kb.engine.last_settle
                assert all(v >= 0 for v in kb.engine.last_settle.values())
            else:
                assert kb.engine.last_settle == {}
            assert await _left_unsettled(kb) == []
            found = await kb.recall("Where did Marie Curie work?", namespace=ns, limit=3)
            assert found.chunks
        finally:
            await kb.delete_namespace(ns)


async def test_settle_off_and_explicit(config: KhoraConfig, stack_name: str, embedder: Any) -> None:
    async with Khora(config=config, embedder=embedder, engine_kwargs={"settle_after_chunks": 0}) as kb:
        ns = (await kb.create_namespace("settle", namespace=f"settle-{uuid.uuid4().hex[:8]}")).namespace_id
        try:
            await kb.remember_batch(_items(8), namespace=ns)
            assert kb.engine.last_settle == {}
            report = await kb.settle()
            if stack_name == "postgres":
                assert set(report) == _STEPS
                pool = kb.engine.stack.documents.pool
                analyzed = await pool.fetchval(
                    "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'khora_chunks'"
                )
                assert analyzed is True
            else:
                assert report == {}
            assert await _left_unsettled(kb) == []
        finally:
            await kb.delete_namespace(ns)


async def test_settle_with_a_namespace_warms_its_read_path(
    config: KhoraConfig, stack_name: str, embedder: Any
) -> None:
    engine_kwargs = {"settle_after_chunks": 0, "warm_up_recalls": 7}
    async with Khora(config=config, embedder=embedder, engine_kwargs=engine_kwargs) as kb:
        ns = (await kb.create_namespace("warm", namespace=f"warm-{uuid.uuid4().hex[:8]}")).namespace_id
        try:
            await kb.remember_batch(_items(4), namespace=ns)
            before = await kb.stats(ns)
            searched: list[str] = []
            vectors = kb.engine.stack.vectors
            search = vectors.search

            async def counted(namespace_id: str, *args: Any, **kwargs: Any) -> Any:
                searched.append(namespace_id)
                return await search(namespace_id, *args, **kwargs)

            vectors.search = counted
            try:
                report = await kb.settle(namespace=ns)
            finally:
                del vectors.search
            steps = _STEPS if stack_name == "postgres" else set()
            assert set(report) == steps | {"warm_up_recalls", "warm_up_s"}, report
            assert report["warm_up_recalls"] == 7
            assert searched and set(searched) == {ns}  # it recalled, in that namespace only
            assert await kb.stats(ns) == before  # a warm-up reads, never writes
            with pytest.raises(NamespaceNotFoundError):
                await kb.settle(namespace=f"missing-{uuid.uuid4().hex[:8]}")
        finally:
            await kb.delete_namespace(ns)


def test_sync_twin(tmp_path: Any, embedder: Any) -> None:
    with KhoraSync(
        data_dir=str(tmp_path / "d"), embedder=embedder, engine_kwargs={"warm_up_recalls": 4}
    ) as kb:
        assert kb.settle() == {}
        ns = kb.create_namespace("warm", namespace="warm").namespace_id
        kb.remember("Marie Curie worked in Paris.", namespace=ns)
        report = kb.settle(namespace=ns)
        assert report["warm_up_recalls"] == 4 and report["warm_up_s"] >= 0
        assert kb.unsettled() == []


async def test_only_khora_tables_are_vacuumed() -> None:
    from khora_core.storage.postgres.settle import settle

    with pytest.raises(InvalidInputError):
        await settle(None, tables=("pg_class",))  # type: ignore[arg-type]
