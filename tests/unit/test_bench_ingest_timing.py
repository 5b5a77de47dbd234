"""The ingest benchmark's embedder clock: overlapping calls count once, and the entity
names' share is kept apart (the "of which names s" and "ceiling ratio" columns)."""

from __future__ import annotations

import asyncio

import pytest

import benchmarks.ingest as bench


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Inner:
    """An embedder whose calls take ``seconds`` of the fake clock, released by the test."""

    name = "fake"
    dimension = 2
    name_precision = "float32"

    def __init__(self) -> None:
        self.gates: list[asyncio.Event] = []

    async def _wait(self, texts: list[str]) -> list[list[float]]:
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        return [[1.0, 0.0] for _ in texts]

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return await self._wait(texts)

    async def embed_query(self, text: str) -> list[float]:
        return (await self._wait([text]))[0]

    async def embed_names(self, texts: list[str]) -> list[list[float]]:
        return await self._wait(texts)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_overlapping_calls_count_once_and_names_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(bench.time, "perf_counter", clock)
    inner = _Inner()
    timed = bench.TimedEmbedder(inner)

    chunks = asyncio.ensure_future(timed.embed_documents(["a", "b", "c"]))
    await _settle()
    clock.now += 2.0  # chunks alone for 2 s
    names = asyncio.ensure_future(timed.embed_names(["Ada", "Bob"]))
    await _settle()
    clock.now += 1.0  # both in flight for 1 s
    inner.gates[0].set()
    await chunks
    clock.now += 3.0  # names alone for 3 s
    inner.gates[1].set()
    await names
    clock.now += 10.0  # nothing in flight: not counted

    assert timed.seconds == pytest.approx(6.0)
    assert timed.name_seconds == pytest.approx(4.0)
    assert (timed.texts, timed.calls) == (5, 2)


def test_name_precision_resolves_auto_for_this_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    inner = _Inner()
    assert bench.name_precision(inner) == "float32"
    inner.name_precision = "auto"
    monkeypatch.setattr(bench, "native_bfloat16", lambda: True)
    assert bench.name_precision(inner) == "bfloat16"
    monkeypatch.setattr(bench, "native_bfloat16", lambda: False)
    assert bench.name_precision(inner) == "float32"
    assert bench.name_precision(object()) == "n/a"
