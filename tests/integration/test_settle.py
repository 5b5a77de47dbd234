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


_COMPILING = "Neo4j: its JVM compiled for "


async def _writes_unsettled(kb: Khora) -> list[str]:
    """What ``kb.unsettled()`` names that writes left (not Neo4j's JVM compiling, which
    depends on what the server ran before this test)."""
    return [line for line in await kb.unsettled() if not line.startswith(_COMPILING)]


async def _left_unsettled(kb: Khora) -> list[str]:
    """What writes left unsettled (``_writes_unsettled``) once the batch's own statistics
    are in. A PostgreSQL backend reports a transaction's row counts when it next goes idle,
    up to 10 s later if it reported within the last second (``PGSTAT_IDLE_INTERVAL``), so the
    counts of a batch's last writes can land after settle's ANALYZE and name a table again;
    each such table is settled again, for at most 15 s. A settle that analyzes nothing never
    empties the list."""
    left = await _writes_unsettled(kb)
    deadline = time.monotonic() + 15
    while left and time.monotonic() < deadline:
        await asyncio.sleep(1)
        await kb.settle()
        left = await _writes_unsettled(kb)
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
            warm = {"warm_up_recalls", "warm_up_s", "warm_up_stop"}
            if stack_name == "postgres":  # Neo4j says how long its JVM compiled meanwhile
                warm |= {"warm_up_compile_s", "warm_up_last_compile_share"}
            assert set(report) == steps | warm, report
            assert report["warm_up_recalls"] == 7 and report["warm_up_stop"] == "recalls"
            if stack_name == "postgres":
                assert report["warm_up_compile_s"] >= 0
                assert report["warm_up_last_compile_share"] is None  # 7 recalls: no whole round
            assert searched and set(searched) == {ns}  # it recalled, in that namespace only
            assert await kb.stats(ns) == before  # a warm-up reads, never writes
            with pytest.raises(NamespaceNotFoundError):
                await kb.settle(namespace=f"missing-{uuid.uuid4().hex[:8]}")
        finally:
            await kb.delete_namespace(ns)


@pytest.mark.parametrize("stack_name", ["postgres"], indirect=True)
async def test_the_jvm_compile_share_is_read_since_start_then_since_the_last_call(
    config: KhoraConfig, embedder: Any
) -> None:
    async with Khora(config=config, embedder=embedder, engine_kwargs={"settle_after_chunks": 0}) as kb:
        stack = kb.engine.stack
        since_start = await stack.compile_share()
        assert since_start is not None
        share, window_s = since_start
        # the server has compiled, and has run a while; its compiler threads (two here, more
        # on larger machines) may each compile the whole time
        assert 0 < share < 8 and window_s > 1
        await asyncio.sleep(1.1)
        later = await stack.compile_share()
        assert later is not None
        assert 0 <= later[0] < 8 and 1.0 <= later[1] < window_s  # since the first call
        await asyncio.sleep(1.1)
        for _ in range(3):  # a burst of readings, as a warm-up's last round and its report make
            assert await stack.compile_ms() is not None
        after_burst = await stack.compile_share()
        assert after_burst is not None and 1.0 <= after_burst[1] < 5.0  # since `later`, not the start
        compiling = [line for line in await kb.unsettled() if line.startswith(_COMPILING)]
        assert len(compiling) <= 1


def test_unsettled_names_the_jvm_from_a_tenth_of_the_time_compiling() -> None:
    from khora_core.storage.postgres.stack import COMPILING_SHARE, compiling_line

    assert compiling_line(COMPILING_SHARE * 0.99, 30.0) is None
    line = compiling_line(0.234, 12.4)
    assert line is not None and line.startswith(_COMPILING)
    assert "compiled for 2.9 s of the last 12 s" in line
    assert "compiled for 24.8 s of the last 12 s" in (compiling_line(2.0, 12.4) or "")  # two threads


def test_sync_twin(tmp_path: Any, embedder: Any) -> None:
    with KhoraSync(
        data_dir=str(tmp_path / "d"), embedder=embedder, engine_kwargs={"warm_up_recalls": 4}
    ) as kb:
        assert kb.settle() == {}
        ns = kb.create_namespace("warm", namespace="warm").namespace_id
        kb.remember("Marie Curie worked in Paris.", namespace=ns)
        report = kb.settle(namespace=ns)
        assert report["warm_up_recalls"] == 4 and report["warm_up_s"] >= 0
        assert report["warm_up_stop"] == "recalls"
        assert "warm_up_compile_s" not in report  # the embedded store compiles nothing
        assert kb.unsettled() == []


async def test_only_khora_tables_are_vacuumed() -> None:
    from khora_core.storage.postgres.settle import settle

    with pytest.raises(InvalidInputError):
        await settle(None, tables=("pg_class",))  # type: ignore[arg-type]
