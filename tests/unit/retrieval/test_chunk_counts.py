"""The read path's cached namespace chunk counts: reused for ``ttl`` seconds, re-counted
after a write through the engine, per namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from khora_core import Khora, KhoraConfig
from khora_core.retrieval.chunk_counts import ChunkCounts
from tests.fixtures.embedders import RecordingEmbedder


@pytest.fixture
async def kb(tmp_path: Path) -> AsyncIterator[Khora]:
    config = KhoraConfig(storage={"data_dir": str(tmp_path / "data"), "database_url": None})
    k = await Khora(config=config, embedder=RecordingEmbedder()).open()
    try:
        yield k
    finally:
        await k.aclose()


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_count_is_reused_until_its_ttl_passes(kb: Khora) -> None:
    ns = (await kb.create_namespace("a")).namespace_id
    await kb.remember("Maya Chen founded Northwind Robotics in Lisbon.", namespace=ns)
    clock = _Clock()
    counts = ChunkCounts(kb.engine.stack.documents, ttl=30.0, clock=clock)
    assert await counts.get(ns) == 1
    # a write this cache does not hear about (another process, say)
    await kb.remember("Omar Haddad joined Northwind Robotics as its first engineer.", namespace=ns)
    clock.now += 29.0
    assert await counts.get(ns) == 1
    clock.now += 1.0
    assert await counts.get(ns) == 2
    await kb.remember("Rye bread is baked at noon.", namespace=ns)
    assert await counts.get(ns) == 2  # counted just now
    counts.invalidate(ns)
    assert await counts.get(ns) == 3


async def test_writes_through_the_engine_drop_their_namespace_count(kb: Khora) -> None:
    a = (await kb.create_namespace("a")).namespace_id
    b = (await kb.create_namespace("b")).namespace_id
    counts = kb.engine.retrieval.chunk_counts
    assert (await counts.get(a), await counts.get(b)) == (0, 0)
    first = await kb.remember("Maya Chen founded Northwind Robotics in Lisbon.", namespace=a)
    assert (await counts.get(a), await counts.get(b)) == (1, 0)
    await kb.remember_batch([{"content": "Omar Haddad joined."}, {"content": "Lina Berg left."}], namespace=b)
    assert (await counts.get(a), await counts.get(b)) == (1, 2)
    assert await kb.forget(namespace=a, document_id=first.document_id)
    assert await counts.get(a) == 0
    assert await kb.delete_namespace(b)
    assert await counts.get(b) == 0


async def test_a_negative_ttl_is_refused(kb: Khora) -> None:
    with pytest.raises(ValueError, match="ttl"):
        ChunkCounts(kb.engine.stack.documents, ttl=-1.0)
