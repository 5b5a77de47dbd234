"""recall() latency per routed complexity on both stacks, beside a plain langchain-postgres PGVector.

    python -m benchmarks.latency [--stack all|sqlite_lance|postgres] [--corpus all] [--limit N]
                                 [--max-questions N] [--no-pgvector] [--warmup N] [--no-gc-freeze]

Every development corpus (multi-hop passages and LoCoMo turns, about 11,800 passages) is
remembered into one namespace per stack with the offline extractor; passage embeddings come
from the on-disk cache so re-runs are quick. Then the embedder is switched to the real model
for everything (``SwitchableEmbedder.live``): each timed ``recall()`` embeds its question
(and any entity mentions) with all-MiniLM-L6-v2, as a user's call would.

Each development question (multi-hop + LoCoMo, shuffled) is recalled in the default HYBRID
mode with the heuristic router, ``limit=10``; latencies are grouped by
``engine_info["routing"]["complexity"]``. The same questions are then recalled in VECTOR mode.
On PostgreSQL the same chunk texts and vectors are loaded into a langchain-postgres
``PGVector`` collection (v1 API, psycopg 3, same database) and ``similarity_search(q, k=10)``
is timed with the query embedded by the same model: as shipped (no vector index: an exact
scan) and with an HNSW index on its table. Targets (issue): p95 at most 40 ms SIMPLE, 80 ms
MODERATE, 150 ms COMPLEX; VECTOR within 1.3x of plain PGVector.

Before timing, ``--warmup`` questions (default 1,000) are recalled untimed. The postgres
stack depends on how long Neo4j has been running: COMPLEX p50 was 97 ms on a server started
minutes before with 10 warm-up questions, 81 ms with 1,000, and 62 ms on one that had been
up an hour and answered thousands of recalls (the JVM compiling its read paths is the
likely cause; not proven). Then the process freezes what is alive (``gc.freeze()``), as a serving
process would after start-up: importing torch and sentence-transformers leaves about 500,000
objects that every full collection walks (about 0.3 s on these CPUs), and one such pause on
a 13-question group is its p95. A table reports the full collections during timing;
``--no-gc-freeze`` times without the freeze.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import time
import uuid
from collections import defaultdict
from typing import Any

from benchmarks._common import STACK_CHOICES, pct, print_table, stack_configs
from benchmarks._corpora import SwitchableEmbedder, corpus_names, passages, questions, remove_dir
from benchmarks.ingest import chunk_texts
from khora_core import Khora, SearchMode

TARGET_P95 = {"simple": 40.0, "moderate": 80.0, "complex": 150.0}
K = 10


STAGES = ("understand", "embed", "link", "channels", "fuse", "rerank", "assemble", "total")


async def time_recalls(
    kb: Khora, ns: str, qs: list[str], mode: SearchMode
) -> list[tuple[float, str, dict[str, float]]]:
    """(wall ms, routed complexity, the engine's stage timings) per question."""
    out = []
    for q in qs:
        t0 = time.perf_counter()
        res = await kb.recall(q, namespace=ns, limit=K, mode=mode)
        ms = (time.perf_counter() - t0) * 1000
        info = res.engine_info
        out.append((ms, str(info.get("routing", {}).get("complexity", "?")), dict(info.get("timings", {}))))
    return out


def _lc_embeddings(embedder: SwitchableEmbedder, vectors: dict[str, list[float]]) -> Any:
    """LangChain ``Embeddings`` over the same model: documents from the cache, queries live."""
    from langchain_core.embeddings import Embeddings

    inner = embedder.inner

    class BenchEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [vectors[t] for t in texts]

        def embed_query(self, text: str) -> list[float]:
            # The model call itself, synchronously (what a sync LangChain embedder does).
            return inner._encode([text])[0]

    return BenchEmbeddings()


def pgvector_timings(
    url: str, embeddings: Any, texts: list[str], vectors: list[list[float]], qs: list[str]
) -> dict:
    """Load a PGVector collection and time ``similarity_search`` without and with HNSW (blocking)."""
    import sqlalchemy
    from langchain_postgres import PGVector

    connection = "postgresql+psycopg://" + url.split("://", 1)[1]
    name = f"khora-bench-{uuid.uuid4().hex[:8]}"
    store = PGVector(
        embeddings=embeddings,
        connection=connection,
        collection_name=name,
        embedding_length=len(vectors[0]),
        use_jsonb=True,
    )
    out: dict[str, list[float]] = {}
    index = f"khora_bench_hnsw_{uuid.uuid4().hex[:8]}"
    try:
        t0 = time.perf_counter()
        for lo in range(0, len(texts), 1000):
            store.add_embeddings(
                texts=texts[lo : lo + 1000],
                embeddings=vectors[lo : lo + 1000],
                metadatas=[{} for _ in texts[lo : lo + 1000]],
                ids=[str(uuid.uuid4()) for _ in texts[lo : lo + 1000]],
            )
        print(f"[pgvector] {len(texts)} texts loaded in {time.perf_counter() - t0:.1f}s", flush=True)
        with store._make_sync_session() as session:
            session.execute(sqlalchemy.text("ANALYZE langchain_pg_embedding"))
            session.commit()
        for label in ("PGVector (as shipped, exact scan)", "PGVector + HNSW index"):
            if "HNSW" in label:
                with store._make_sync_session() as session:
                    session.execute(
                        sqlalchemy.text(
                            f"CREATE INDEX {index} ON langchain_pg_embedding "
                            "USING hnsw (embedding vector_cosine_ops)"
                        )
                    )
                    session.execute(sqlalchemy.text("ANALYZE langchain_pg_embedding"))
                    session.commit()
            for q in qs[:10]:  # warm-up
                store.similarity_search(q, k=K)
            lat = []
            for q in qs:
                t0 = time.perf_counter()
                store.similarity_search(q, k=K)
                lat.append((time.perf_counter() - t0) * 1000)
            out[label] = lat
    finally:
        with store._make_sync_session() as session:
            session.execute(sqlalchemy.text(f"DROP INDEX IF EXISTS {index}"))
            session.commit()
        store.delete_collection()
    return out


class FullCollections:
    """Counts the interpreter's full (generation 2) collections while the block runs; with
    ``freeze``, first moves every object alive into the permanent generation (``gc.freeze``,
    undone on exit), as a serving process does once it has started."""

    def __init__(self, *, freeze: bool) -> None:
        self.freeze = freeze
        self.frozen = 0
        self.pauses_ms: list[float] = []
        self._since = 0.0

    def _track(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._since = time.perf_counter()
        else:
            self.pauses_ms.append((time.perf_counter() - self._since) * 1000)

    def __enter__(self) -> FullCollections:
        if self.freeze:
            gc.collect()
            gc.freeze()
            self.frozen = gc.get_freeze_count()
        gc.callbacks.append(self._track)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._track)
        if self.freeze:
            gc.unfreeze()


async def run_stack(
    name: str,
    cfg: Any,
    embedder: SwitchableEmbedder,
    items: list[dict],
    qs: list[str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    embedder.live = False
    result: dict[str, Any] = {}
    async with Khora(config=cfg, embedder=embedder) as kb:
        ns = (await kb.create_namespace("bench-latency")).namespace_id
        try:
            t0 = time.perf_counter()
            outcomes = await kb.remember_batch(items, namespace=ns, progress=args.progress)
            stats = await kb.stats(ns)
            failed = sum(1 for o in outcomes if isinstance(o, Exception))
            print(
                f"[{name}] {len(items)} passages in {time.perf_counter() - t0:.1f}s: {stats.chunks} chunks, "
                f"{stats.entities} entities, {stats.relationships} relationships, {failed} failures",
                flush=True,
            )
            result["chunks"] = stats.chunks
            embedder.live = True
            # Warm-up, untimed: the model, and a database server that has just started (the
            # Neo4j JVM compiles its read paths over the first thousands of queries). Khora
            # keeps no per-question state, so asking the timed questions here is fair.
            await time_recalls(kb, ns, qs[: max(10, args.warmup)], SearchMode.HYBRID)
            with FullCollections(freeze=not args.no_gc_freeze) as full:
                result["hybrid"] = await time_recalls(kb, ns, qs, SearchMode.HYBRID)
                result["vector"] = await time_recalls(kb, ns, qs, SearchMode.VECTOR)
            result["gc"] = full
            if name == "postgres" and not args.no_pgvector:
                embedder.live = False
                texts = chunk_texts(items, cfg)
                vecs = await embedder.embed_documents(texts)
                lc = _lc_embeddings(embedder, dict(zip(texts, vecs, strict=True)))
                url = str(cfg.storage.database_url or os.environ["KHORA_DATABASE_URL"])
                result["pgvector"] = await asyncio.to_thread(pgvector_timings, url, lc, texts, vecs, qs)
        finally:
            embedder.live = False
            await kb.delete_namespace(ns)
    return result


async def main_async(args: argparse.Namespace) -> None:
    names = corpus_names(args.corpus)
    items = passages(names, args.limit)
    qs = [q["question"] for q in questions(names, args.max_questions)]
    print(f"{len(items)} passages from {', '.join(names)}; {len(qs)} questions")
    embedder = SwitchableEmbedder()
    results: dict[str, dict[str, Any]] = {}
    for name, cfg in stack_configs(args.stack).items():
        try:
            results[name] = await run_stack(name, cfg, embedder, items, qs, args)
        finally:
            if name == "sqlite_lance":
                remove_dir(cfg.storage.data_dir)
    rows = []
    for name, r in results.items():
        groups: dict[str, list[float]] = defaultdict(list)
        for ms, complexity, _ in r["hybrid"]:
            groups[complexity].append(ms)
        for complexity in ("simple", "moderate", "complex", *sorted(set(groups) - set(TARGET_P95))):
            lat = groups.get(complexity, [])
            if not lat:
                continue
            p95 = pct(lat, 95)
            target = TARGET_P95.get(complexity)
            ok = "" if target is None else ("yes" if p95 <= target else "no")
            rows.append(
                [
                    name,
                    f"HYBRID {complexity}",
                    len(lat),
                    round(pct(lat, 50), 1),
                    round(p95, 1),
                    target or "",
                    ok,
                ]
            )
        all_h = [ms for ms, _, _ in r["hybrid"]]
        rows.append(
            [name, "HYBRID all", len(all_h), round(pct(all_h, 50), 1), round(pct(all_h, 95), 1), "", ""]
        )
        vec = [ms for ms, _, _ in r["vector"]]
        rows.append([name, "VECTOR", len(vec), round(pct(vec, 50), 1), round(pct(vec, 95), 1), "", ""])
    print_table(
        f"recall() latency in ms, limit={K}, heuristic router, query embedding included",
        ["stack", "mode / complexity", "queries", "p50", "p95", "target p95", "meets"],
        rows,
    )
    rows = []
    for name, r in results.items():
        by_label = defaultdict(list)
        for rec in r["hybrid"]:
            by_label[f"HYBRID {rec[1]}"].append(rec)
        by_label["VECTOR"] = r["vector"]
        order = ["HYBRID simple", "HYBRID moderate", "HYBRID complex"]
        for label in sorted(by_label, key=lambda g: (order.index(g) if g in order else len(order), g)):
            recs = by_label[label]
            cells = [pct([t.get(f"{st}_ms", 0.0) for _, _, t in recs], 50) for st in STAGES]
            wall = pct([m for m, _, _ in recs], 50)
            rows.append([name, label, len(recs), *[round(c, 1) for c in cells], round(wall, 1)])
    print_table(
        "Stage medians in ms (engine_info timings: the wait at each stage, so work overlapping an "
        "earlier stage, such as linking during the embedding, counts there; wall = the whole recall() call)",
        ["stack", "mode / complexity", "queries", *STAGES, "wall"],
        rows,
    )
    print_table(
        "Full garbage collections during the timed recalls (a full collection walks every "
        "object alive: about 0.3 s once torch and sentence-transformers are imported, unless "
        "they were frozen first; --no-gc-freeze to see it)",
        ["stack", "objects frozen before timing", "full collections", "longest ms"],
        [
            [
                name,
                r["gc"].frozen,
                len(r["gc"].pauses_ms),
                round(max(r["gc"].pauses_ms, default=0.0), 1),
            ]
            for name, r in results.items()
        ],
    )
    pg = results.get("postgres", {})
    if pg.get("pgvector"):
        vec = [ms for ms, _, _ in pg["vector"]]
        rows = [["Khora VECTOR (postgres)", len(vec), round(pct(vec, 50), 1), round(pct(vec, 95), 1), "", ""]]
        for label, lat in pg["pgvector"].items():
            r50, r95 = pct(vec, 50) / pct(lat, 50), pct(vec, 95) / pct(lat, 95)
            rows.append(
                [
                    label,
                    len(lat),
                    round(pct(lat, 50), 1),
                    round(pct(lat, 95), 1),
                    round(r50, 2),
                    round(r95, 2),
                ]
            )
        print_table(
            f"Top-{K} on the same PostgreSQL and embeddings ({pg['chunks']} chunks); target VECTOR within 1.3x",
            ["search", "queries", "p50 ms", "p95 ms", "VECTOR/this p50", "VECTOR/this p95"],
            rows,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="all", choices=STACK_CHOICES)
    parser.add_argument("--corpus", default="all", help="all, or a comma-separated list of corpora")
    parser.add_argument("--limit", type=int, default=None, help="at most N passages")
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument("--no-pgvector", action="store_true", help="skip the langchain-postgres baseline")
    parser.add_argument(
        "--warmup",
        type=int,
        default=1000,
        help="questions recalled (untimed) before timing, at least 10 (default 1000)",
    )
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="time without gc.freeze() after start-up (full collections then pause ~0.3 s)",
    )
    parser.add_argument("--progress", action="store_true", help="progress bar while remembering")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
