"""The ingest benchmark's embedder clock: overlapping calls count once, and the entity
names' share is kept apart (the "of which names s" and "ceiling ratio" columns)."""

from __future__ import annotations

import asyncio
import os

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
    inner.precision = "bfloat16"  # chunks and questions (EmbeddingConfig.precision)
    assert bench.name_precision(inner, "precision") == "bfloat16"


def _round(alone_s: float, ingest_s: float, peak: float) -> dict[str, float]:
    return {"texts": 100, "alone_s": alone_s, "chunks": 100, "ingest_s": ingest_s, "peak_mib": peak}


def test_repeated_rounds_report_the_median_round_and_the_highest_peak() -> None:
    # ratios 0.5, 0.8, 0.7 (alone / ingest, as the chunk counts are equal)
    rounds = [_round(10, 20, 900), _round(8, 10, 1200), _round(7, 10, 1000)]
    rep = bench._representative(rounds)
    assert rep["alone_s"] == 7 and rep["ingest_s"] == 10  # the 0.7 round, not the best one
    assert rep["median_ratio"] == pytest.approx(0.7)
    assert rep["peak_mib"] == 1200 and rep["rounds"] == rounds
    # an even count reports the lower middle round (0.5, 0.7, 0.8, 0.9 -> 0.7)
    rep = bench._representative([*rounds, _round(9, 10, 800)])
    assert rep["median_ratio"] == pytest.approx(0.7)
    # one round is its own median
    assert bench._representative(rounds[:1])["median_ratio"] == pytest.approx(0.5)


def test_machine_busy_seconds_counts_busy_time_only(tmp_path) -> None:
    from benchmarks._corpora import machine_busy_seconds

    hz = os.sysconf("SC_CLK_TCK")
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text(
        f"cpu  {3 * hz} {hz} {2 * hz} {500 * hz} {40 * hz} 0 {hz} 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
    )
    assert machine_busy_seconds(stat) == pytest.approx(7.0)
    assert machine_busy_seconds(tmp_path / "missing") is None
    stat.write_text("intr 1 2 3\n")
    assert machine_busy_seconds(stat) is None


def test_cpu_ratio_is_per_machine_cpu_second() -> None:
    r = {
        "chunks": 1000,
        "texts": 1000,
        "alone_s": 10.0,
        "ingest_s": 14.0,
        "alone_cpu_s": 20.0,
        "ingest_cpu_s": 25.0,
    }
    assert bench._cpu_ratio(r) == pytest.approx(0.8)
    assert bench._ratio(r) == pytest.approx(10 / 14)
    assert bench._cpu_ratio({**r, "ingest_cpu_s": None}) == "n/a"
    assert bench._cpu_ratio({k: v for k, v in r.items() if k != "alone_cpu_s"}) == "n/a"
