"""recall() latency per routed complexity on both stacks, beside a plain langchain-postgres PGVector.

    python -m benchmarks.latency [--stack all|sqlite_lance|postgres] [--corpus all] [--limit N]
                                 [--max-questions N] [--no-pgvector] [--warmup N] [--no-gc-freeze]
    python -m benchmarks.latency --fresh [--no-settle] [--passes 3] [--warm-up-recalls 3000] [--limit 3000]
                                 [--max-questions 100]

Every development corpus (multi-hop passages and LoCoMo turns, about 11,800 passages) is
remembered into one namespace per stack with the offline extractor; passage embeddings come
from the on-disk cache so re-runs are quick. Then the embedder is switched to the real model
for everything (``SwitchableEmbedder.live``): each timed ``recall()`` embeds its question
(and any entity mentions) with all-MiniLM-L6-v2, as a user's call would.

Each timed question (multi-hop + LoCoMo, shuffled) is recalled in the default HYBRID mode
with the heuristic router, ``limit=10``; latencies are grouped by
``engine_info["routing"]["complexity"]``. The same questions are then recalled in VECTOR
mode. Before timing, ``--warmup`` other questions (default 1,000; never a timed one, so no
timed question finds pages its own warm-up cached) are recalled untimed: the model, and a
database server that has just started (the Neo4j JVM compiles its read paths over the
first thousands of queries). Then the process freezes what is alive (``gc.freeze()``), as
a serving process would after start-up: importing torch and sentence-transformers leaves
about 500,000 objects that every full collection walks (about 0.3 s on these CPUs). A
table reports the full collections during timing; ``--no-gc-freeze`` times without the
freeze.

On PostgreSQL, ``KhoraVectorStore.similarity_search`` and langchain-postgres
``PGVector.similarity_search`` (v1 API, psycopg 3, the same chunk texts and vectors in the
same database) are timed interleaved question by question with ``k=10``, each after the
same ``--vectorstore-warmup`` untimed questions: PGVector as shipped (no vector index: an
exact scan) and with an HNSW index on its table. Target: Khora within 1.2x of PGVector +
HNSW at p50 and p95. Targets for recall (p95): 40 ms SIMPLE, 80 ms MODERATE, 150 ms COMPLEX.

``--fresh`` starts its own new PostgreSQL and Neo4j (``tools.services``), remembers
``--limit`` passages (3,000 of hotpotqa + musique by default) into the embedded store and
then the servers, and from the first second after the load times three consecutive passes
(``--passes``) of ``--max-questions`` questions (100) in VECTOR, HYBRID and ALL, the two
stacks interleaved question by question. It reports p50 / p95 / p99 per pass, mode and
stack, the targets (every pass's p95 within 1.5x the embedded store's, passes within 20%),
the servers' CPU, Neo4j's JIT compile time and autovacuum runs per pass, and stage medians.
After the load each stack is settled and warmed up as a service would before taking traffic
(``Khora.settle(namespace=...)``: on PostgreSQL + Neo4j, VACUUM (ANALYZE), Neo4j's indexes
and plans; then, on both stacks, recalls cut from the namespace's documents: Khora's default
of 300, then on while Neo4j's JVM still compiles, up to 3,000 and 120 s;
``--warm-up-recalls`` sets the most) unless ``--no-settle``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks._common import STACK_CHOICES, pct, print_table, stack_configs
from benchmarks._corpora import SwitchableEmbedder, corpus_names, passages, questions, remove_dir
from benchmarks.ingest import chunk_texts
from khora_core import Khora, SearchMode

TARGET_P95 = {"simple": 40.0, "moderate": 80.0, "complex": 150.0}
K = 10


STAGES = ("understand", "embed", "link", "channels", "fuse", "rerank", "assemble", "total")


def split_questions(names: list[str], timed: int | None, warmup: int) -> tuple[list[str], list[str]]:
    """(timed questions, warm-up questions): disjoint, so that no timed question finds its
    own pages in a cache its warm-up filled. The timed ones are the first ``timed`` of the
    shuffled development questions (all but ``warmup`` when None); the warm-up takes the
    others, repeated to ``warmup`` when there are fewer."""
    pool = [q["question"] for q in questions(names)]
    n = len(pool) - min(warmup, len(pool) // 2) if timed is None else min(timed, len(pool) - 1)
    timed_qs, rest = pool[:n], pool[n:]
    warm = [rest[i % len(rest)] for i in range(warmup)] if rest else []
    return timed_qs, warm


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


def vectorstore_timings(
    url: str,
    cfg: Any,
    ns: str,
    embedder: SwitchableEmbedder,
    embeddings: Any,
    texts: list[str],
    vectors: list[list[float]],
    warm_qs: list[str],
    qs: list[str],
) -> dict[str, list[float]]:
    """``KhoraVectorStore.similarity_search`` and langchain-postgres ``PGVector.similarity_search``
    on the same PostgreSQL, same model, same ``k``, interleaved question by question (which
    goes first alternates), each after the same untimed warm-up questions (blocking).

    PGVector holds the same chunk texts and vectors (v1 API, psycopg 3, one collection) and
    is timed as shipped (no vector index: an exact scan) and with an HNSW index on its
    table. The Khora store reads the namespace ``run_stack`` loaded, through its own
    ``KhoraSync`` on the same embedder (questions embedded live by both).
    """
    # Kept whole (~85 lines): both stores share one setup, warm-up and teardown around the
    # interleaved loop, which is the measurement.
    import sqlalchemy
    from langchain_postgres import PGVector

    from khora_core import KhoraSync
    from khora_integrations.langchain import KhoraVectorStore

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
    kb = KhoraSync(config=cfg, embedder=embedder).open()
    khora = KhoraVectorStore(kb, namespace=ns)
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
        for variant in ("as shipped, exact scan", "+ HNSW index"):
            if "HNSW" in variant:
                with store._make_sync_session() as session:
                    session.execute(
                        sqlalchemy.text(
                            f"CREATE INDEX {index} ON langchain_pg_embedding "
                            "USING hnsw (embedding vector_cosine_ops)"
                        )
                    )
                    session.execute(sqlalchemy.text("ANALYZE langchain_pg_embedding"))
                    session.commit()
            searches = {
                f"PGVector ({variant})": lambda q: store.similarity_search(q, k=K),
                f"KhoraVectorStore (PGVector {variant})": lambda q: khora.similarity_search(q, k=K),
            }
            for q in warm_qs:  # the same untimed warm-up for both
                for search in searches.values():
                    search(q)
            lat: dict[str, list[float]] = {label: [] for label in searches}
            for i, q in enumerate(qs):
                order = list(searches) if i % 2 == 0 else list(reversed(searches))
                for label in order:
                    t0 = time.perf_counter()
                    searches[label](q)
                    lat[label].append((time.perf_counter() - t0) * 1000)
            out.update(lat)
    finally:
        with store._make_sync_session() as session:
            session.execute(sqlalchemy.text(f"DROP INDEX IF EXISTS {index}"))
            session.commit()
        store.delete_collection()
        kb.close()
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
    warm_qs: list[str],
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
            # Warm-up, untimed, on questions that are not timed: the model, and a database
            # server that has just started (the Neo4j JVM compiles its read paths over the
            # first thousands of queries).
            await time_recalls(kb, ns, warm_qs, SearchMode.HYBRID)
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
                embedder.live = True
                vs_warm = warm_qs[: args.vectorstore_warmup]
                result["pgvector"] = await asyncio.to_thread(
                    vectorstore_timings, url, cfg, ns, embedder, lc, texts, vecs, vs_warm, qs
                )
        finally:
            embedder.live = False
            await kb.delete_namespace(ns)
    return result


async def main_async(args: argparse.Namespace) -> None:
    names = corpus_names(args.corpus or "all")
    items = passages(names, args.limit)
    qs, warm_qs = split_questions(names, args.max_questions, max(10, args.warmup))
    print(f"{len(items)} passages from {', '.join(names)}; {len(qs)} timed questions, {len(warm_qs)} warm-up")
    embedder = SwitchableEmbedder()
    results: dict[str, dict[str, Any]] = {}
    for name, cfg in stack_configs(args.stack).items():
        try:
            results[name] = await run_stack(name, cfg, embedder, items, warm_qs, qs, args)
        finally:
            if name == "sqlite_lance":
                remove_dir(cfg.storage.data_dir)
    _print_latency(results)
    _print_stages(results)
    _print_gc(results)
    _print_vectorstore(results)


def _print_latency(results: dict[str, dict[str, Any]]) -> None:
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


def _print_stages(results: dict[str, dict[str, Any]]) -> None:
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


def _print_gc(results: dict[str, dict[str, Any]]) -> None:
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


def _print_vectorstore(results: dict[str, dict[str, Any]]) -> None:
    pg = results.get("postgres", {})
    if pg.get("pgvector"):
        rows = []
        lat = pg["pgvector"]
        for variant in ("as shipped, exact scan", "+ HNSW index"):
            base, ours = lat[f"PGVector ({variant})"], lat[f"KhoraVectorStore (PGVector {variant})"]
            for label, values in ((f"PGVector ({variant})", base), ("KhoraVectorStore", ours)):
                rows.append(
                    [
                        label,
                        len(values),
                        round(pct(values, 50), 1),
                        round(pct(values, 95), 1),
                        round(pct(values, 50) / pct(base, 50), 2),
                        round(pct(values, 95) / pct(base, 95), 2),
                    ]
                )
        print_table(
            f"similarity_search(q, k={K}) on the same PostgreSQL and embeddings ({pg['chunks']} chunks), "
            "interleaved, same untimed warm-up; target KhoraVectorStore within 1.2x of PGVector + HNSW",
            ["search", "queries", "p50 ms", "p95 ms", "/PGVector p50", "/PGVector p95"],
            rows,
        )


# -- --fresh: new servers, a bulk load, three passes from the first second ------------------

FRESH_MODES = (SearchMode.VECTOR, SearchMode.HYBRID, SearchMode.ALL)
FRESH_PASSES = 3
#: What the --fresh run is held to (issue #41): each pass's p95 on PostgreSQL + Neo4j within
#: this many times the embedded store's p95 for the same mode and pass ...
FRESH_P95_RATIO = 1.5
#: ... and the passes' p95 within this fraction of each other (max / min - 1).
FRESH_PASS_SPREAD = 0.20


def _proc_stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from the state on (field 3)


class ServerCPU:
    """CPU-seconds the PostgreSQL and Neo4j servers of a ``tools.services`` folder have used
    (PostgreSQL: the postmaster, its reaped children and its live backends and workers;
    Neo4j: the JVM, every thread). Linux ``/proc``; zeros elsewhere."""

    def __init__(self, state: Path) -> None:
        self.tick = os.sysconf("SC_CLK_TCK")
        self.pg = self._pid(state / "postgres" / "pgdata" / "postmaster.pid")
        self.neo = self._pid(state / "neo4j" / "neo4j.pid")

    @staticmethod
    def _pid(path: Path) -> int | None:
        try:
            return int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def read(self) -> dict[str, float]:
        out = {"postgres": 0.0, "neo4j": 0.0}
        if self.neo is not None and (f := _proc_stat(self.neo)):
            out["neo4j"] = (int(f[11]) + int(f[12])) / self.tick
        if self.pg is not None and (f := _proc_stat(self.pg)):
            total = sum(int(v) for v in f[11:15])  # utime, stime, cutime, cstime
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit() and (c := _proc_stat(int(entry.name))) and c[1] == str(self.pg):
                    total += int(c[11]) + int(c[12])
            out["postgres"] = total / self.tick
        return out


async def _autovacuum_runs(kb: Khora) -> tuple[int, int]:
    """(autovacuum runs, autoanalyze runs) on Khora's tables so far (server statistics)."""
    row = await kb.engine.stack.documents.pool.fetchrow(
        "SELECT coalesce(sum(autovacuum_count), 0) AS v, coalesce(sum(autoanalyze_count), 0) AS a "
        "FROM pg_stat_user_tables WHERE relname LIKE 'khora%'"
    )
    return int(row["v"]), int(row["a"])


async def fresh_async(args: argparse.Namespace) -> None:
    # Kept whole (~85 lines): servers started, loaded and timed in one sequence whose order
    # is what is measured (the first second after the load).
    from tools.services import neo4j as neo4j_service
    from tools.services import postgres as postgres_service

    names = corpus_names(args.corpus or "hotpotqa,musique")
    items = passages(names, args.limit or 3000)
    pool = [q["question"] for q in questions(names)]
    qs = pool[: args.max_questions or 100]
    print(
        f"{len(items)} passages from {', '.join(names)}; {len(qs)} questions x {len(FRESH_MODES)} modes "
        f"x {args.passes} passes per stack; settle and warm up after the load: {not args.no_settle}"
    )
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    state = Path(tempfile.mkdtemp(prefix="khora-fresh-"))
    t0 = time.perf_counter()
    env = postgres_service.start(state / "postgres", fsync=False)
    env.update(neo4j_service.start(state / "neo4j", watch_parent=True))
    os.environ.update(env)
    print(f"[services] both servers started in {time.perf_counter() - t0:.1f}s", flush=True)
    cpu = ServerCPU(state)
    embedder = SwitchableEmbedder()
    kbs: dict[str, Khora] = {}
    try:
        cfgs = stack_configs("all")
        for name in ("sqlite_lance", "postgres"):  # the server stack loads last: timing starts on it
            engine_kwargs: dict[str, Any] = {"settle_after_chunks": 0}
            if args.warm_up_recalls is not None:
                engine_kwargs["warm_up_recalls"] = args.warm_up_recalls
            kwargs = {"engine_kwargs": engine_kwargs}
            kb = kbs[name] = await Khora(config=cfgs[name], embedder=embedder, **kwargs).open()
            ns = (await kb.create_namespace("bench-fresh", namespace="bench-fresh")).namespace_id
            embedder.live = False
            t0 = time.perf_counter()
            outcomes = await kb.remember_batch(items, namespace=ns, progress=args.progress)
            stats = await kb.stats(ns)
            failed = sum(1 for o in outcomes if isinstance(o, Exception))
            loaded_s = time.perf_counter() - t0
            embedder.live = True  # the warm-up embeds its questions as a service would
            settled = "not run" if args.no_settle else (await kb.settle(namespace=ns) or "nothing to do")
            embedder.live = False
            print(
                f"[{name}] {len(items)} passages in {loaded_s:.1f}s: {stats.chunks} chunks, "
                f"{stats.entities} entities, {failed} failures; settle(namespace=...): {settled}",
                flush=True,
            )
        pg = kbs["postgres"]
        embedder.live = True
        for q in pool[len(qs) : len(qs) + 5]:  # the model's first calls, not the servers'
            await embedder.embed_query(q)
        print(f"[postgres] unsettled right after the load: {await pg.unsettled() or 'nothing'}", flush=True)
        store = sum(f.stat().st_size for f in (state / "neo4j" / "home" / "data").rglob("*") if f.is_file())
        db_size = await pg.engine.stack.documents.pool.fetchval("SELECT pg_database_size(current_database())")
        print(
            f"[services] Neo4j data folder {store / 2**20:.0f} MiB, PostgreSQL database {db_size / 2**20:.0f} MiB"
        )
        loaded = time.perf_counter()
        passes: list[dict[str, Any]] = []
        with FullCollections(freeze=not args.no_gc_freeze):
            for number in range(1, args.passes + 1):
                record: dict[str, Any] = {"pass": number, "start_s": time.perf_counter() - loaded}
                cpu0, av0, own0 = cpu.read(), await _autovacuum_runs(pg), time.process_time()
                jit0 = await pg.engine.stack.compile_ms()
                lat: dict[tuple[str, str], list[tuple[float, dict[str, float]]]] = defaultdict(list)
                for mode in FRESH_MODES:
                    for i, q in enumerate(qs):
                        order = list(kbs) if i % 2 == 0 else list(reversed(kbs))
                        for name in order:
                            t1 = time.perf_counter()
                            res = await kbs[name].recall(q, namespace="bench-fresh", limit=K, mode=mode)
                            ms = (time.perf_counter() - t1) * 1000
                            lat[(mode.value, name)].append((ms, dict(res.engine_info.get("timings", {}))))
                cpu1, av1 = cpu.read(), await _autovacuum_runs(pg)
                jit1 = await pg.engine.stack.compile_ms()
                record.update(
                    end_s=time.perf_counter() - loaded,
                    lat=lat,
                    cpu={k: cpu1[k] - cpu0[k] for k in cpu1},
                    python_cpu=time.process_time() - own0,
                    jit=None if jit0 is None or jit1 is None else (jit1 - jit0) / 1000.0,
                    autovacuum=av1[0] - av0[0],
                    autoanalyze=av1[1] - av0[1],
                )
                passes.append(record)
                print(f"[pass {number}] done at {record['end_s']:.1f}s after the load", flush=True)
        print(f"[postgres] unsettled after the passes: {await pg.unsettled() or 'nothing'}")
        print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    finally:
        embedder.live = False
        for kb in kbs.values():
            await kb.aclose()
        neo4j_service.stop(state / "neo4j")
        postgres_service.stop(state / "postgres")
        remove_dir(cfgs["sqlite_lance"].storage.data_dir if "cfgs" in locals() else None)
        remove_dir(state)
    _report_fresh(passes)


def _report_fresh(passes: list[dict[str, Any]]) -> None:
    # Kept whole (~90 lines): the table and the verdict come from the same pass over the runs.
    rows = []
    verdict = []
    for mode in FRESH_MODES:
        p95s = []
        for rec in passes:
            emb = [ms for ms, _ in rec["lat"][(mode.value, "sqlite_lance")]]
            for name in ("sqlite_lance", "postgres"):
                values = [ms for ms, _ in rec["lat"][(mode.value, name)]]
                ratio = pct(values, 95) / pct(emb, 95)
                if name == "postgres":
                    p95s.append(pct(values, 95))
                rows.append(
                    [
                        rec["pass"],
                        mode.value.upper(),
                        name,
                        len(values),
                        round(pct(values, 50), 1),
                        round(pct(values, 95), 1),
                        round(pct(values, 99), 1),
                        round(ratio, 2) if name == "postgres" else "",
                    ]
                )
        worst = max(
            pct([ms for ms, _ in rec["lat"][(mode.value, "postgres")]], 95)
            / pct([ms for ms, _ in rec["lat"][(mode.value, "sqlite_lance")]], 95)
            for rec in passes
        )
        spread = max(p95s) / min(p95s) - 1
        verdict.append(
            [
                mode.value.upper(),
                round(worst, 2),
                "yes" if worst <= FRESH_P95_RATIO else "no",
                f"{spread:.0%}",
                "yes" if spread <= FRESH_PASS_SPREAD else "no",
            ]
        )
    print_table(
        f"recall() ms per pass, fresh servers, passes straight after the bulk load (limit={K}, query "
        "embedding included, the two stacks interleaved question by question)",
        ["pass", "mode", "stack", "queries", "p50", "p95", "p99", "p95 / embedded p95"],
        rows,
    )
    print_table(
        f"PostgreSQL + Neo4j against the targets: every pass's p95 within {FRESH_P95_RATIO}x the embedded "
        f"store's, passes within {FRESH_PASS_SPREAD:.0%} of each other (p95 max/min - 1)",
        ["mode", "worst p95 ratio", "meets", "pass spread", "meets"],
        verdict,
    )
    print_table(
        "What ran meanwhile, per pass (CPU-seconds; Neo4j JIT: its JVM's compile time, within its CPU; "
        "autovacuum/autoanalyze: runs on Khora's tables)",
        [
            "pass",
            "from s",
            "to s",
            "PostgreSQL CPU s",
            "Neo4j CPU s",
            "Neo4j JIT s",
            "benchmark CPU s",
            "autovacuum",
            "autoanalyze",
        ],
        [
            [
                r["pass"],
                round(r["start_s"], 1),
                round(r["end_s"], 1),
                round(r["cpu"]["postgres"], 1),
                round(r["cpu"]["neo4j"], 1),
                "n/a" if r["jit"] is None else round(r["jit"], 1),
                round(r["python_cpu"], 1),
                r["autovacuum"],
                r["autoanalyze"],
            ]
            for r in passes
        ],
    )
    rows = []
    for rec in passes:
        for mode in FRESH_MODES:
            recs = rec["lat"][(mode.value, "postgres")]
            cells = [pct([t.get(f"{st}_ms", 0.0) for _, t in recs], 50) for st in STAGES]
            rows.append([rec["pass"], mode.value.upper(), *[round(c, 1) for c in cells]])
    print_table(
        "PostgreSQL + Neo4j stage medians in ms per pass (engine_info timings)",
        ["pass", "mode", *STAGES],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="all", choices=STACK_CHOICES)
    parser.add_argument(
        "--corpus",
        default=None,
        help="all, or a comma-separated list of corpora (default all; hotpotqa,musique with --fresh)",
    )
    parser.add_argument("--limit", type=int, default=None, help="at most N passages (3,000 with --fresh)")
    parser.add_argument("--max-questions", type=int, default=None, help="timed questions (100 with --fresh)")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start new servers, bulk-load, time three passes per mode from the first second beside "
        "the embedded store (starts and stops its own PostgreSQL and Neo4j)",
    )
    parser.add_argument(
        "--no-settle", action="store_true", help="with --fresh: no settle and warm-up after the load"
    )
    parser.add_argument(
        "--passes",
        type=int,
        default=FRESH_PASSES,
        help=f"with --fresh: consecutive passes per mode ({FRESH_PASSES}; more show how long the servers' "
        "background work lasts)",
    )
    parser.add_argument(
        "--warm-up-recalls",
        type=int,
        default=None,
        help="with --fresh: the most recalls of the warm-up after the load (Khora's default, 3,000, unless given)",
    )
    parser.add_argument(
        "--vectorstore-warmup",
        type=int,
        default=100,
        help="untimed similarity_search questions before the vector-store comparison (each store)",
    )
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
    args = parser.parse_args()
    asyncio.run(fresh_async(args) if args.fresh else main_async(args))


if __name__ == "__main__":
    main()
