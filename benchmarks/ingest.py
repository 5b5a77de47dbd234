"""Ingestion throughput: remember_batch against the embedder alone, per stack, with peak memory.

    python -m benchmarks.ingest [--stack all|sqlite_lance|postgres] [--corpus hotpotqa] [--limit N] [--join 1]
                                [--repeat N]

A development corpus (``--corpus musique|hotpotqa|2wikimultihopqa|locomo|all``, or a
comma-separated list) is remembered with ``Khora.remember_batch`` (offline extractor, the
real all-MiniLM-L6-v2 embedder, no cache) into a fresh namespace of each stack. Right before
each ingest, the same embedder encodes the very chunk texts the pipeline will produce
(same chunker, same token budget, same slices), which is the physical limit on these CPUs;
the ratio of the two rates is the figure of merit. Before anything is timed, each stack
remembers ``--warmup`` documents (default 500, hash vectors, a scratch namespace deleted
again): a Neo4j server that has just started spends tens of CPU-seconds compiling its write
paths during the first thousands of writes, which a long-running deployment has behind it.
Target (issue): at least 0.75 of the embedder-alone rate into the embedded store and 0.60
into PostgreSQL + Neo4j, peak memory under 2 GiB for 10,000 passages. A last table shows how much of ``remember_batch``'s wall
time had an embedding call in flight, how much of it went to entity names and at which
precision, how many texts besides the chunks it embedded, and the *ceiling ratio*: the
embedder-alone time over that time plus the names' time, i.e. the ratio a pipeline that
did nothing else would reach. Names are float32 unless the CPU computes bfloat16 natively
(AVX512-BF16 or AMX), so the ceiling depends on the machine (``docs/benchmarks.md``).
The *CPU ratio* is the ratio per CPU-second of the whole machine (``/proc/stat``, database
servers included) instead of per wall second. The encoder alone keeps every core busy, so
the wall ratio is at most the CPU ratio; the CPU ratio says how much work the pipeline adds
to the encoder's, which moves less with the machine's speed than the wall ratio does.

"LLM calls saved by the skeleton": with an LLM extractor, one call per *core* chunk; the
skeleton (``skeleton_core_ratio`` 0.5) picks the core per document, so a one-chunk passage is
always core. ``--join N`` joins N consecutive passages into one document to show the saving
on longer documents; ``--skeleton-scope batch`` chooses the core among all chunks of the
``remember_batch`` call instead (fewer chunks extracted, so fewer entity names to embed). Peak memory is the process's peak resident set (``ru_maxrss``, reset
before each stack on Linux); it includes the embedding model and torch. The PostgreSQL and
Neo4j servers' memory is not counted.

On shared machines one round's ratio moves a lot from run to run, mostly in the
embedder-alone time (``docs/benchmarks.md``), so compare medians: ``--repeat N`` runs N rounds per stack
(each: the embedder alone, then ``remember_batch`` into a fresh namespace), lists them, and
reports the median round (the lower middle one for an even N) in the tables; peak memory is
the highest of any round.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import STACK_CHOICES, print_table, stack_configs
from benchmarks._corpora import (
    corpus_names,
    machine_busy_seconds,
    passages,
    peak_rss_mib,
    remove_dir,
    reset_peak_rss,
)
from khora_core import Khora
from khora_core.embedding.base import embed_names
from khora_core.embedding.factory import build_embedder
from khora_core.embedding.precision import native_bfloat16
from khora_core.ingest.chunking import TextSpan, chunk_text
from khora_core.models import RememberResult


class _InFlight:
    """Wall time during which at least one of some calls is in flight (overlaps count once)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._active = 0
        self._since = 0.0

    def enter(self) -> None:
        if self._active == 0:
            self._since = time.perf_counter()
        self._active += 1

    def leave(self) -> None:
        self._active -= 1
        if self._active == 0:
            self.seconds += time.perf_counter() - self._since


class TimedEmbedder:
    """Passes calls to the real embedder and measures the wall time during which at least
    one embedding call is in flight (concurrent calls are counted once), the part of it
    spent on entity names (``embed_names``), and the texts."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.texts = 0
        self.calls = 0
        self._any = _InFlight()
        self._names = _InFlight()

    @property
    def seconds(self) -> float:
        return self._any.seconds

    @property
    def name_seconds(self) -> float:
        return self._names.seconds

    async def _timed(self, coro: Any, n: int, *, names: bool = False) -> Any:
        clocks = (self._any, self._names) if names else (self._any,)
        for clock in clocks:
            clock.enter()
        try:
            return await coro
        finally:
            for clock in clocks:
                clock.leave()
            self.texts += n
            self.calls += 1

    async def embed_documents(self, texts: Any) -> list[list[float]]:
        return await self._timed(self.inner.embed_documents(texts), len(texts))

    async def embed_query(self, text: str) -> list[float]:
        return await self._timed(self.inner.embed_query(text), 1)

    async def embed_names(self, texts: Any) -> list[list[float]]:
        return await self._timed(embed_names(self.inner, texts), len(texts), names=True)


def joined(items: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """Every ``n`` consecutive passages as one document (``n`` = 1: unchanged)."""
    if n <= 1:
        return items
    out = []
    for lo in range(0, len(items), n):
        part = items[lo : lo + n]
        out.append(
            {
                "content": "\n\n".join(p["content"] for p in part),
                "title": part[0].get("title"),
                "source_type": part[0].get("source_type"),
            }
        )
    return out


def chunk_texts(items: list[dict[str, Any]], cfg: Any) -> list[str]:
    """The chunk texts ``remember_batch`` will embed (same chunker and budget; duplicates once)."""
    texts: list[str] = []
    for content in dict.fromkeys(it["content"] for it in items):
        spans = chunk_text(
            content, max_tokens=cfg.ingest.chunk_tokens, overlap_tokens=cfg.ingest.chunk_overlap_tokens
        ) or [TextSpan(0, len(content), content, 1)]
        texts += [s.text for s in spans]
    return texts


async def embed_alone(embedder: Any, texts: list[str], slice_size: int) -> float:
    t0 = time.perf_counter()
    for lo in range(0, len(texts), slice_size):
        await embedder.embed_documents(texts[lo : lo + slice_size])
    return time.perf_counter() - t0


class WarmupEmbedder:
    """Deterministic unit vectors from a hash of the text, at the real model's dimension:
    the warm-up exercises the stores (and the Neo4j JVM's compiler) without the encoder."""

    name = "warm-up-hash"

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension

    async def embed_documents(self, texts: Any) -> list[list[float]]:
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dimension)
            out.append((v / np.linalg.norm(v)).tolist())
        return out

    async def embed_query(self, text: str) -> list[float]:
        return (await self.embed_documents([text]))[0]


async def warm_up(name: str, cfg: Any, dimension: int, items: list[dict[str, Any]]) -> None:
    """Remember ``items`` into a scratch namespace and delete it: a database server that has
    just started (the Neo4j JVM compiles its hot paths during the first thousands of writes)
    is not what a long-running deployment sees."""
    if not items:
        return
    t0 = time.perf_counter()
    async with Khora(config=cfg, embedder=WarmupEmbedder(dimension)) as kb:
        ns = (await kb.create_namespace("bench-ingest-warm-up")).namespace_id
        try:
            await kb.remember_batch(items, namespace=ns)
        finally:
            await kb.delete_namespace(ns)
    print(
        f"[{name}] warm-up: {len(items)} documents in {time.perf_counter() - t0:.1f}s (not timed)", flush=True
    )


async def run_stack(
    name: str, cfg: Any, embedder: Any, items: list[dict[str, Any]], warmup: int = 0, repeat: int = 1
) -> list[dict[str, Any]]:
    """Warm the stack up once, then ``repeat`` rounds of embedder-alone then ``remember_batch``."""
    await warm_up(name, cfg, embedder.dimension, items[-warmup:] if warmup > 0 else [])
    texts = chunk_texts(items, cfg)
    rounds = []
    for i in range(repeat):
        if repeat > 1:
            print(f"[{name}] round {i + 1} of {repeat}", flush=True)
        rounds.append(await _round(name, cfg, embedder, items, texts))
    return rounds


async def _round(
    name: str, cfg: Any, embedder: Any, items: list[dict[str, Any]], texts: list[str]
) -> dict[str, Any]:
    busy = machine_busy_seconds()
    alone_s = await embed_alone(embedder, texts, max(256, cfg.embedding.batch_size * 8))
    alone_cpu = _since(busy)
    print(f"[{name}] embedder alone: {len(texts)} chunks in {alone_s:.1f}s", flush=True)
    reset_peak_rss()
    base = peak_rss_mib()
    timed = TimedEmbedder(embedder)
    async with Khora(config=cfg, embedder=timed) as kb:
        ns = (await kb.create_namespace("bench-ingest")).namespace_id
        try:
            busy = machine_busy_seconds()
            t0 = time.perf_counter()
            outcomes = await kb.remember_batch(items, namespace=ns)
            ingest_s = time.perf_counter() - t0
            ingest_cpu = _since(busy)
            peak = peak_rss_mib()
            stats = await kb.stats(ns)
            extractor = type(kb.engine.extractor).__name__
        finally:
            await kb.delete_namespace(ns)
    results = [o for o in outcomes if isinstance(o, RememberResult)]
    stored = [r for r in results if not r.duplicate]
    failures = [o for o in outcomes if not isinstance(o, RememberResult)]
    for f in failures[:3]:
        print(f"[{name}] failed item: {f}")
    chunks = sum(len(r.chunk_ids) for r in stored)
    print(f"[{name}] remember_batch: {len(stored)} documents, {chunks} chunks in {ingest_s:.1f}s", flush=True)
    return {
        "texts": len(texts),
        "alone_s": alone_s,
        "documents": len(stored),
        "duplicates": len(results) - len(stored),
        "failures": len(failures),
        "chunks": chunks,
        "core": sum(r.core_chunk_count for r in stored),
        "ingest_s": ingest_s,
        "alone_cpu_s": alone_cpu,
        "ingest_cpu_s": ingest_cpu,
        "peak_mib": peak,
        "base_mib": base,
        "embed_s": timed.seconds,
        "names_s": timed.name_seconds,
        "name_precision": name_precision(embedder),
        "chunk_precision": name_precision(embedder, "precision"),
        "embed_texts": timed.texts,
        "embed_calls": timed.calls,
        "entities": stats.entities,
        "relationships": stats.relationships,
        "extractor": extractor,
    }


def _since(busy: float | None) -> float | None:
    """Machine CPU-seconds since the reading ``busy`` (None where it cannot be read)."""
    now = machine_busy_seconds()
    return None if busy is None or now is None else now - busy


def _ratio(r: dict[str, Any]) -> float:
    return (r["chunks"] / r["ingest_s"]) / (r["texts"] / r["alone_s"])


def _cpu_ratio(r: dict[str, Any]) -> float | str:
    """Like the ratio, per machine CPU-second instead of per wall second: the embedder
    alone's CPU per chunk over ``remember_batch``'s (database servers included); "n/a"
    where the machine's CPU time cannot be read."""
    alone, ingest = r.get("alone_cpu_s"), r.get("ingest_cpu_s")
    if not alone or not ingest:
        return "n/a"
    return round((r["chunks"] / ingest) / (r["texts"] / alone), 3)


def _cpu(seconds: float | None) -> float | str:
    return "n/a" if seconds is None else round(seconds, 1)


def _representative(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median round by ratio (the lower of the two middle ones for an even count), with
    every round kept under ``rounds`` and the highest peak memory of any round."""
    out = dict(sorted(rounds, key=_ratio)[(len(rounds) - 1) // 2])
    out.update(rounds=rounds, median_ratio=_ratio(out), peak_mib=max(r["peak_mib"] for r in rounds))
    return out


def name_precision(embedder: Any, setting: str = "name_precision") -> str:
    """The precision entity names are encoded at: ``EmbeddingConfig.name_precision`` (or the
    ``setting`` given, such as ``precision`` for chunks), with ``auto`` resolved for this CPU
    (bfloat16 only where it is native)."""
    configured = getattr(embedder, setting, None)
    if configured is None:
        return "n/a"
    if configured == "auto":
        return "bfloat16" if native_bfloat16() else "float32"
    return str(configured)


def stack_names(which: str) -> list[str]:
    names = [n for n in ("sqlite_lance", "postgres") if which in ("all", n)]
    if "postgres" in names and not os.environ.get("KHORA_DATABASE_URL"):
        if which == "postgres":
            raise SystemExit("postgres stack asked for but KHORA_DATABASE_URL is not set (use make bench-*)")
        names.remove("postgres")
    return names


async def child_async(args: argparse.Namespace) -> dict[str, Any]:
    """One stack, in its own process so that its peak memory is its own."""
    items = joined(passages(corpus_names(args.corpus), args.limit), args.join)
    embedder = build_embedder(None)
    await embedder.embed_documents(["warm-up: load the model before anything is timed"])
    ((name, cfg),) = stack_configs(args.stack).items()
    if args.skeleton_scope:
        vc = cfg.vectorcypher.model_copy(update={"skeleton_scope": args.skeleton_scope})
        cfg = cfg.model_copy(update={"vectorcypher": vc})
    try:
        result = await run_stack(name, cfg, embedder, items, warmup=args.warmup, repeat=args.repeat)
    finally:
        if name == "sqlite_lance":
            remove_dir(cfg.storage.data_dir)
    return result


def main_parent(args: argparse.Namespace, argv: list[str]) -> None:
    names = corpus_names(args.corpus)
    n_items = len(joined(passages(names, args.limit), args.join))
    scope = args.skeleton_scope or "configured"
    print(
        f"{n_items} documents from {', '.join(names)} (join={args.join}, skeleton scope {scope}); "
        f"one process per stack, each warmed up with {args.warmup} documents first"
    )
    results = _run_stacks(args, argv)
    if args.repeat > 1:
        _print_rounds(args, results)
    _print_ingest(args, results, n_items)
    _print_skeleton(results)
    _print_embedder_time(results)
    _print_notes()


def _run_stacks(args: argparse.Namespace, argv: list[str]) -> dict[str, dict[str, Any]]:
    """Each stack's representative result, from one child process per stack."""
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="khora-bench-ingest-") as tmp:
        for name in stack_names(args.stack):
            out = Path(tmp) / f"{name}.json"
            cmd = [
                sys.executable,
                "-m",
                "benchmarks.ingest",
                *argv,
                "--stack",
                name,
                "--child-json",
                str(out),
            ]
            code = subprocess.call(cmd)
            if code != 0 or not out.exists():
                print(f"[{name}] failed (exit code {code})")
                continue
            results[name] = _representative(json.loads(out.read_text()))
    return results


def _print_rounds(args: argparse.Namespace, results: dict[str, dict[str, Any]]) -> None:
    print_table(
        f"Rounds ({args.repeat} per stack, each: the embedder alone, then remember_batch into a "
        "fresh namespace); the tables below show the median round",
        [
            "stack",
            "round",
            "embedder alone s",
            "remember_batch s",
            "ratio",
            "median ratio",
            "machine CPU s: alone",
            "remember_batch",
            "CPU ratio",
        ],
        [
            [
                n,
                i + 1,
                round(x["alone_s"], 1),
                round(x["ingest_s"], 1),
                round(_ratio(x), 3),
                round(r["median_ratio"], 3),
                _cpu(x.get("alone_cpu_s")),
                _cpu(x.get("ingest_cpu_s")),
                _cpu_ratio(x),
            ]
            for n, r in results.items()
            for i, x in enumerate(r["rounds"])
        ],
    )


def _print_ingest(args: argparse.Namespace, results: dict[str, dict[str, Any]], n_items: int) -> None:
    target = {"sqlite_lance": 0.75, "postgres": 0.60}
    rows = []
    for name, r in results.items():
        alone = r["texts"] / r["alone_s"]
        rate = r["chunks"] / r["ingest_s"]
        rows.append(
            [
                name,
                r["documents"],
                r["chunks"],
                round(r["documents"] / r["ingest_s"], 1),
                round(rate, 1),
                round(alone, 1),
                round(_ratio(r), 3),
                target[name],
                _cpu_ratio(r),
                round(r["base_mib"]),
                round(r["peak_mib"]),
            ]
        )
    print_table(
        f"Ingest of {n_items} documents ({args.corpus}, join={args.join}), offline extractor",
        [
            "stack",
            "docs",
            "chunks",
            "docs/s",
            "chunks/s",
            "embedder alone chunks/s",
            "ratio",
            "target",
            "CPU ratio",
            "RSS before MiB",
            "peak RSS MiB",
        ],
        rows,
    )


def _print_skeleton(results: dict[str, dict[str, Any]]) -> None:
    print_table(
        "Skeleton: LLM extraction calls (one per core chunk)",
        [
            "stack",
            "extractor",
            "chunks",
            "core chunks",
            "LLM calls saved",
            "saved %",
            "entities",
            "relationships",
            "duplicates",
            "failures",
        ],
        [
            [
                n,
                r["extractor"],
                r["chunks"],
                r["core"],
                r["chunks"] - r["core"],
                round(100 * (r["chunks"] - r["core"]) / max(1, r["chunks"]), 1),
                r["entities"],
                r["relationships"],
                r["duplicates"],
                r["failures"],
            ]
            for n, r in results.items()
        ],
    )


def _print_embedder_time(results: dict[str, dict[str, Any]]) -> None:
    print_table(
        "Where remember_batch spends its time",
        [
            "stack",
            "wall s",
            "in the embedder s",
            "texts embedded",
            "embedder calls",
            "chunk texts",
            "other texts (entity names)",
            "of which names s",
            "name precision",
            "chunk precision",
            "rest s",
            "ceiling ratio",
        ],
        [
            [
                n,
                round(r["ingest_s"], 1),
                round(r["embed_s"], 1),
                r["embed_texts"],
                r.get("embed_calls", ""),
                r["chunks"],
                r["embed_texts"] - r["chunks"],
                round(r["names_s"], 1),
                r["name_precision"],
                r.get("chunk_precision", "n/a"),
                round(r["ingest_s"] - r["embed_s"], 1),
                round(r["alone_s"] / (r["alone_s"] + r["names_s"]), 3),
            ]
            for n, r in results.items()
        ],
    )


def _print_notes() -> None:
    print(
        "\nRSS before = after loading the model and encoding the chunks once (torch included); "
        "peak = the process's peak during remember_batch. Database servers are not counted.\n"
        "Ceiling ratio = embedder alone / (embedder alone + names s): the ratio if the pipeline "
        "did nothing but encode the chunks and the entity names, back to back (the encoder uses "
        "every core, so the names cannot hide behind it). Names are encoded in bfloat16 only "
        "where the CPU computes it natively (EmbeddingConfig.name_precision='auto').\n"
        "CPU ratio = the ratio per machine CPU-second instead of per wall second: the embedder "
        "alone's CPU time per chunk over remember_batch's, read from /proc/stat, so it counts "
        "everything on the machine (the database servers too, and anything else running: run "
        "the benchmark alone). The encoder keeps every core busy, so the wall ratio can reach "
        "at most about the CPU ratio; the CPU ratio moves less with the machine's speed."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="all", choices=STACK_CHOICES)
    parser.add_argument("--corpus", default="hotpotqa")
    parser.add_argument("--limit", type=int, default=None, help="at most N passages")
    parser.add_argument("--join", type=int, default=1, help="join N consecutive passages into one document")
    parser.add_argument(
        "--warmup",
        type=int,
        default=500,
        help="documents remembered (hash vectors, scratch namespace) before anything is timed; 0: none",
    )
    parser.add_argument(
        "--skeleton-scope",
        choices=["document", "batch"],
        default=None,
        help="VectorCypherConfig.skeleton_scope (default: the configured one, 'document')",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds per stack (embedder alone, then remember_batch); the tables show the median round",
    )
    parser.add_argument("--child-json", default=None, help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, not {args.repeat}")
    if args.child_json:
        Path(args.child_json).write_text(json.dumps(asyncio.run(child_async(args))))
    else:
        # drop --stack from what the children get: each child is given its own
        forwarded = [a for i, a in enumerate(argv) if a != "--stack" and (i == 0 or argv[i - 1] != "--stack")]
        main_parent(args, [a for a in forwarded if not a.startswith("--stack=")])


if __name__ == "__main__":
    main()
