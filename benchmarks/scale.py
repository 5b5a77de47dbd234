"""Storage and read path at growing sizes: ingest rate, recall latency, memory, disk (issue #38 item 5).

    python -m tools.services run -- python -m benchmarks.scale [--stack all|sqlite_lance|postgres]
        [--sizes 10000,100000] [--queries 100] [--budget-s 480] [--profile]

One namespace per stack grows to each size in turn (chunks); at each size the benchmark
prints the ingest rate of the chunks added since the previous size, recall p50 / p95 per
mode (vector, keyword, graph, and hybrid grouped by routed complexity), the process's
resident and peak memory, and the store's size on disk, then the ratio of each figure to
the previous size's. A growth step that passes ``--budget-s`` of ingest is cut at the next
10,000 chunks, measured there, and is the last (the run says so). ``--profile`` also prints,
at each size, how often the timed HYBRID recalls called each store method and how long
those calls took (nested calls of one store counted at both levels).

What is written, and how (stated so the figures can be judged):

* **Texts**: the development passages (multi-hop + LoCoMo), repeated in order, five
  chunks to a document; BM25 indexes them as usual.
* **Vectors**: the passages' real all-MiniLM-L6-v2 vectors where the benchmark embedding
  cache holds them (never embedded here), else random unit vectors; the copies past the
  first round are perturbed (gaussian noise, cosine 0.95-0.98 to the original,
  renormalised). Questions use their cached query vectors, else a perturbed passage vector.
* **Graph**: the offline extractor runs on ``--sample`` passages; each chunk then gets as
  many entity mentions and relationships as a sampled chunk had (the empirical
  distribution), its entities drawn by Zipf (s = 1) popularity from a pool that grows
  with the store by Heaps' law (pool = distinct names of the sample x (chunks / sample
  size)^0.75), named after the sample's real names. An entity's name vector is its name's
  cached all-MiniLM-L6-v2 vector (random where the cache lacks it), perturbed as chunk
  copies are for the later copies of a name ("Paris 3"). So the degree distribution has
  the hubs real graphs have, and the entity vector index holds vectors shaped like real
  names' (random unit vectors, which this benchmark used before 2026-12-06, are the
  worst case for an HNSW index and match no question).
* **Writes** go straight to the stack (``stack.write_many`` of 40 documents): the storage
  path without the encoder or the extractor, which ``benchmarks.ingest`` measures.
* **Recall** is ``Khora.recall(limit=10)`` with the default preset; the question embedder
  returns the precomputed vectors (its entity mentions their cached vectors, else hash
  vectors), so the figures are the read path without the encoder. After each growth step the store is settled and
  warmed up as a service would before taking traffic (``Khora.settle(namespace=...)``:
  on PostgreSQL + Neo4j, VACUUM (ANALYZE) and Neo4j's indexes and plans; on both stacks,
  Khora's warm-up recalls cut from the namespace's documents, never a timed question), and
  each mode is then warmed with a few of the timed questions; the settle and the warm-up
  are timed apart from recall. So the first size is measured warm, as the later ones are,
  and the growth ratios compare like with like.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import inspect
import itertools
import math
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import CACHE, STACK_CHOICES, pct, print_table, stack_configs
from benchmarks._corpora import CORPORA, passages, questions
from khora_core import Khora
from khora_core.errors import KhoraError
from khora_core.models import Chunk, Document, Entity, Mention, Relationship, WriteBatch

DIM = 384
CHUNKS_PER_DOC = 5
DOCS_PER_WRITE = 40
HEAPS_BETA = 0.75
#: The cache kinds entity names are embedded under (``benchmarks._common.CachedEmbedder.embed_names``).
NAME_KINDS = ("n-auto", "n-bfloat16", "n-float32")
MODES = ("vector", "keyword", "graph", "hybrid")
_IDS = uuid.UUID("0b5e3c1a-7d2f-4e6a-9c8b-1f2e3d4c5b6a")


# -- inputs ----------------------------------------------------------------------------------


def cached_vectors(texts: list[str], kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The cached all-MiniLM-L6-v2 vectors of ``texts`` (``kind`` "d" or "q"): (vectors, found mask).
    Looks up ``benchmarks._common.CachedEmbedder``'s cache by its keys; embeds nothing."""
    import sqlite3

    out = np.zeros((len(texts), DIM), dtype=np.float32)
    found = np.zeros(len(texts), dtype=bool)
    path = CACHE / "embeddings.sqlite"
    if not path.exists():
        return out, found
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    keys = [
        hashlib.sha256(f"sentence-transformers:all-MiniLM-L6-v2|{kind}|{t}".encode()).hexdigest()
        for t in texts
    ]
    index = {k: i for i, k in enumerate(keys)}
    try:
        for lo in range(0, len(keys), 500):
            part = keys[lo : lo + 500]
            for k, v in db.execute(f"SELECT k, v FROM emb WHERE k IN ({','.join('?' * len(part))})", part):
                vec = np.frombuffer(v, dtype=np.float32)
                if vec.shape == (DIM,):
                    out[index[k]], found[index[k]] = vec, True
    except sqlite3.Error:
        pass
    finally:
        db.close()
    return out, found


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def perturbed(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``rows`` (unit vectors) plus gaussian noise sized for a cosine of 0.95-0.98 to each
    (not renormalised)."""
    target = rng.uniform(0.95, 0.98, size=len(rows))
    sigma = np.sqrt((1.0 / target**2 - 1.0) / DIM).astype(np.float32)
    return rows + rng.standard_normal(rows.shape, dtype=np.float32) * sigma[:, None]


class GraphProfile:
    """What the offline extractor finds per chunk on a sample of the development passages."""

    def __init__(self, texts: list[str]) -> None:
        from khora_core.ingest.extract_offline import OfflineExtractor

        extractor = OfflineExtractor()
        self.mentions: list[int] = []
        self.relations: list[int] = []
        names: dict[str, tuple[str, str]] = {}  # lower-cased -> (name as extracted, type)
        rel_types: set[str] = set()
        for i, text in enumerate(texts):
            ex = extractor.extract_chunk(f"s{i}", text)
            distinct = {e.name.lower(): e for e in ex.entities}
            self.mentions.append(len(distinct))
            self.relations.append(len(ex.relations))
            for key, e in distinct.items():
                names.setdefault(key, (e.name, e.type))
            rel_types.update(r.type for r in ex.relations)
        self.sample = len(texts)
        order = sorted(names)
        self.names = [names[k][0] for k in order]
        self.types = [names[k][1] for k in order]
        self.rel_types = sorted(rel_types) or ["RELATED_TO"]

    def describe(self) -> str:
        m, r = np.asarray(self.mentions), np.asarray(self.relations)
        return (
            f"offline extractor on {self.sample} passages: entities/chunk mean {m.mean():.2f} "
            f"(p50 {np.percentile(m, 50):.0f}, p95 {np.percentile(m, 95):.0f}, max {m.max()}), "
            f"relationships/chunk mean {r.mean():.2f} (p95 {np.percentile(r, 95):.0f}), "
            f"{len(self.names)} distinct names"
        )


class Generator:
    """Chunk ``i``'s text, vector, entities and relationships, deterministic in ``i``."""

    def __init__(
        self, texts: list[str], base: np.ndarray, profile: GraphProfile, ns: str, names: np.ndarray
    ) -> None:
        """``names``: a unit vector per name of ``profile.names``."""
        self.texts, self.base, self.profile, self.ns, self.names = texts, base, profile, ns, names
        self.seen: set[int] = set()

    def pool(self, i: int) -> int:
        d = len(self.profile.names)
        return max(d, int(d * ((i + 1) / self.profile.sample) ** HEAPS_BETA))

    def entity_name(self, r: int) -> str:
        d = len(self.profile.names)
        name = self.profile.names[r % d]
        return name if r < d else f"{name} {r // d}"

    def entity_vector(self, r: int) -> list[float]:
        """The vector of the name entity ``r`` copies; a later copy's is perturbed as chunk
        copies are (cosine 0.95-0.98 to it)."""
        d = len(self.profile.names)
        vec = self.names[r % d : r % d + 1]
        if r >= d:
            vec = perturbed(vec, np.random.default_rng(r))
        return (vec[0] / np.linalg.norm(vec[0])).tolist()

    def entity_id(self, r: int) -> str:
        return str(uuid.uuid5(_IDS, f"{self.ns}|e{r}"))

    def vectors(self, lo: int, hi: int) -> np.ndarray:
        m = len(self.texts)
        rows = np.arange(lo, hi) % m
        out = self.base[rows].copy()
        copies = np.arange(lo, hi) >= m
        if copies.any():
            out[copies] = perturbed(out[copies], np.random.default_rng(lo))
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def document(self, first: int, now: datetime) -> WriteBatch:
        """The document of chunks ``first`` .. ``first + CHUNKS_PER_DOC - 1``."""
        rng = np.random.default_rng(first + 7)
        doc_id = str(uuid.uuid5(_IDS, f"{self.ns}|d{first}"))
        vecs = self.vectors(first, first + CHUNKS_PER_DOC)
        chunks, entities, mentions, rels, pos = [], {}, [], [], 0
        parts = []
        for k in range(CHUNKS_PER_DOC):
            i = first + k
            text = f"{self.texts[i % len(self.texts)]} [{i}]"
            parts.append(text)
            chunk_id = str(uuid.uuid5(_IDS, f"{self.ns}|c{i}"))
            chunks.append(
                Chunk(
                    id=chunk_id,
                    namespace_id=self.ns,
                    document_id=doc_id,
                    index=k,
                    content=text,
                    start_char=pos,
                    end_char=pos + len(text),
                    token_count=len(text.split()),
                    embedding=vecs[k].tolist(),
                    created_at=now,
                )
            )
            pos += len(text) + 2
            s = int(rng.integers(len(self.profile.mentions)))
            n_ent, n_rel = self.profile.mentions[s], self.profile.relations[s]
            pool = self.pool(i)
            ranks = sorted({int(math.exp(u * math.log(pool + 1))) - 1 for u in rng.random(n_ent)})
            for r in ranks:
                eid = self.entity_id(r)
                if eid not in entities:
                    new = r not in self.seen
                    self.seen.add(r)
                    entities[eid] = Entity(
                        id=eid,
                        namespace_id=self.ns,
                        name=self.entity_name(r),
                        type=self.profile.types[r % len(self.profile.types)],
                        embedding=self.entity_vector(r) if new else None,
                    )
                mentions.append(Mention(entity_id=eid, chunk_id=chunk_id, document_id=doc_id))
            for j in range(n_rel if len(ranks) > 1 else 0):
                a, b = rng.choice(len(ranks), size=2, replace=False)
                rels.append(
                    Relationship(
                        id=str(uuid.uuid5(_IDS, f"{self.ns}|r{i}-{j}")),
                        namespace_id=self.ns,
                        source_id=self.entity_id(ranks[int(a)]),
                        target_id=self.entity_id(ranks[int(b)]),
                        type=self.profile.rel_types[(i + j) % len(self.profile.rel_types)],
                        document_id=doc_id,
                        chunk_id=chunk_id,
                    )
                )
        content = "\n\n".join(parts)
        document = Document(
            id=doc_id,
            namespace_id=self.ns,
            content=content,
            content_hash=hashlib.sha256(content.encode()).hexdigest(),
            created_at=now,
        )
        return WriteBatch(
            document=document,
            chunks=chunks,
            entities=list(entities.values()),
            mentions=mentions,
            relationships=rels,
        )


class PrecomputedEmbedder:
    """Questions get their precomputed vectors; other texts (the questions' entity mentions)
    their cached all-MiniLM-L6-v2 vectors where the benchmark cache holds them, else a hash
    vector. Nothing is embedded."""

    name = "precomputed"
    dimension = DIM

    def __init__(self, queries: dict[str, np.ndarray]) -> None:
        self.queries = queries
        self._texts: dict[str, list[float]] = {}  # looked up once, not on every recall

    @staticmethod
    def _hash(text: str) -> list[float]:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        return unit(np.random.default_rng(seed), 1)[0].tolist()

    async def embed_documents(self, texts: Any) -> list[list[float]]:
        texts = list(texts)
        new = [t for t in dict.fromkeys(texts) if t not in self._texts]
        if new:
            vecs, found = cached_vectors(new, "d")
            for t, v, ok in zip(new, vecs, found, strict=True):
                self._texts[t] = v.tolist() if ok else self._hash(t)
        return [self._texts[t] for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        vec = self.queries.get(text)
        return vec.tolist() if vec is not None else self._hash(text)


# -- measurements ----------------------------------------------------------------------------


def memory_mib() -> tuple[float, float]:
    """(resident, peak resident) MiB of this process."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":", 1)
            fields[key] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", float("nan")), fields.get("VmHWM", float("nan"))


def du_mib(path: Path) -> float:
    if not path.exists():
        return float("nan")
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=False).stdout
    return int(out.split()[0]) / 1024 if out else float("nan")


async def disk_mib(kb: Khora, name: str, data_dir: str | None) -> tuple[float, float]:
    """(primary store MiB, graph store MiB). PostgreSQL: Khora's tables and indexes; Neo4j: its
    database and transaction-log folders (under KHORA_SERVICES_DIR, which `tools.services` sets;
    n/a without it)."""
    if name == "sqlite_lance":
        return du_mib(Path(str(data_dir))), 0.0
    pool = kb.engine.stack.documents.pool
    pg = await pool.fetchval(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'r' AND c.relname LIKE 'khora%' AND n.nspname = current_schema()"
    )
    services = os.environ.get("KHORA_SERVICES_DIR")
    neo = float("nan")
    if services:
        data = Path(services) / "neo4j"
        found = [p for p in data.rglob("databases") if p.is_dir()] + [
            p for p in data.rglob("transactions") if p.is_dir()
        ]
        if found:
            neo = sum(du_mib(p) for p in found)
    return int(pg) / 2**20, neo


class StoreCallTimer:
    """``--profile``: times every public async method of the stack's document, vector,
    keyword and graph stores while ``on`` (the timed HYBRID recalls). A store method that
    calls another of its own public methods is timed at both levels."""

    def __init__(self, stack: Any) -> None:
        self.on = False
        self.calls: dict[str, list[float]] = defaultdict(list)
        from khora_core.storage import protocols

        kinds = {
            "documents": protocols.DocumentStore,
            "vectors": protocols.VectorIndex,
            "keywords": protocols.KeywordIndex,
            "graph": protocols.GraphStore,
        }
        for part, protocol in kinds.items():
            store = getattr(stack, part)  # the protocol's methods: a store may delegate them
            for attr in sorted(set(dir(type(store))) | set(dir(protocol))):
                method = None if attr.startswith("_") else getattr(store, attr, None)
                if method is not None and inspect.iscoroutinefunction(method):
                    setattr(store, attr, self._timed(f"{part}.{attr}", method))

    def _timed(self, name: str, method: Any) -> Any:
        @functools.wraps(method)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.on:
                return await method(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self.calls[name].append((time.perf_counter() - t0) * 1000)

        return timed

    def report(self, label: str, recalls: int) -> None:
        rows = sorted(self.calls.items(), key=lambda kv: -sum(kv[1]))
        print_table(
            f"{label}: store calls during {recalls} timed HYBRID recalls",
            ["call", "calls/recall", "p50 ms", "p95 ms", "ms/recall"],
            [
                [
                    name,
                    f"{len(v) / recalls:.2f}",
                    f"{pct(v, 50):.2f}",
                    f"{pct(v, 95):.2f}",
                    f"{sum(v) / recalls:.2f}",
                ]
                for name, v in rows
            ],
        )
        self.calls.clear()


async def time_recalls(
    kb: Khora, ns: str, qs: list[str], timer: StoreCallTimer | None = None
) -> dict[str, list[float]]:
    lat: dict[str, list[float]] = defaultdict(list)
    for mode in MODES:  # warm-up, untimed: each mode's statements planned before its first timing
        for q in qs[:5]:
            await kb.recall(q, namespace=ns, limit=10, mode=mode)
    for mode in MODES:
        if timer is not None:
            timer.on = mode == "hybrid"
        for q in qs:
            t0 = time.perf_counter()
            res = await kb.recall(q, namespace=ns, limit=10, mode=mode)
            ms = (time.perf_counter() - t0) * 1000
            lat[mode].append(ms)
            if mode == "hybrid":
                complexity = (res.engine_info or {}).get("routing", {}).get("complexity", "?")
                lat[f"hybrid/{complexity}"].append(ms)
    if timer is not None:
        timer.on = False
    return lat


async def run_stack(name: str, cfg: Any, gen_inputs: dict[str, Any], args: argparse.Namespace) -> list[dict]:
    sizes = sorted(int(s) for s in args.sizes.split(","))
    qvecs: dict[str, np.ndarray] = gen_inputs["queries"]
    qs = list(qvecs)
    rows: list[dict] = []
    async with Khora(config=cfg, embedder=PrecomputedEmbedder(qvecs)) as kb:
        ns = (await kb.create_namespace("scale", namespace=f"scale-{uuid.uuid4().hex[:8]}")).namespace_id
        gen = Generator(
            gen_inputs["texts"], gen_inputs["base"], gen_inputs["profile"], ns, gen_inputs["names"]
        )
        stack = kb.engine.stack
        timer = StoreCallTimer(stack) if args.profile else None
        done = 0
        for size in sizes:
            now = datetime.now(timezone.utc)
            t0 = time.perf_counter()
            mark, cut = done, False
            while done < size:
                docs = min(DOCS_PER_WRITE, (size - done) // CHUNKS_PER_DOC) or 1
                batches = [gen.document(done + d * CHUNKS_PER_DOC, now) for d in range(docs)]
                await stack.write_many(ns, batches)
                done += docs * CHUNKS_PER_DOC
                if done - mark >= 10_000:
                    spent = time.perf_counter() - t0
                    print(f"[{name}]   {done:,} chunks, {spent:.0f} s into this step", flush=True)
                    mark = done
                    if spent > args.budget_s and done < size:
                        print(
                            f"[{name}] step cut at {done:,} chunks (--budget-s {args.budget_s})", flush=True
                        )
                        cut = True
                        break
            ingest_s = time.perf_counter() - t0
            added = done - (rows[-1]["chunks"] if rows else 0)
            t1 = time.perf_counter()
            settled = await kb.settle(namespace=ns)
            warm_up_s = float(settled.get("warm_up_s", 0.0))
            settle_s = time.perf_counter() - t1 - warm_up_s
            stats = await kb.stats(ns)
            lat = await time_recalls(kb, ns, qs, timer)
            if timer is not None:
                timer.report(f"[{name}] {done:,} chunks", len(qs))
            rss, peak = memory_mib()
            primary, graph = await disk_mib(kb, name, cfg.storage.data_dir)
            row = {
                "chunks": done,
                "entities": stats.entities,
                "relationships": stats.relationships,
                "ingest_rate": added / ingest_s,
                "settle_s": settle_s,
                "warm_up_s": warm_up_s,
                "lat": lat,
                "rss": rss,
                "peak": peak,
                "disk": primary,
                "graph_disk": graph,
            }
            rows.append(row)
            print(
                f"[{name}] {done:,} chunks ({stats.entities:,} entities, {stats.relationships:,} relationships): "
                f"{row['ingest_rate']:,.0f} chunks/s, settle {settle_s:.1f} s, warm-up {warm_up_s:.1f} s, hybrid p95 "
                f"{pct(lat['hybrid'], 95):.1f} ms, RSS {rss:,.0f} MiB, disk {primary:,.0f}+{graph:,.0f} MiB",
                flush=True,
            )
            if cut:
                break
        try:
            await kb.delete_namespace(ns)
        except KhoraError as exc:  # report the figures anyway; the error is a finding too
            print(f"[{name}] delete_namespace failed: {type(exc).__name__}: {str(exc)[:300]}")
    return rows


def report(name: str, rows: list[dict]) -> None:
    keys = [k for k in rows[0]["lat"] if k in MODES] + sorted(k for k in rows[0]["lat"] if "/" in k)
    header = ["chunks", "entities", "rels", "ingest chunks/s", "settle s", "warm-up s"]
    header += [f"{k} p50/p95 ms" for k in keys]
    header += ["RSS MiB", "peak MiB", "disk MiB" if name == "sqlite_lance" else "PG MiB"]
    if name != "sqlite_lance":
        header.append("Neo4j MiB")
    table = []
    for r in rows:
        cells: list[Any] = [
            r["chunks"],
            r["entities"],
            r["relationships"],
            round(r["ingest_rate"]),
            round(r["settle_s"], 1),
            round(r["warm_up_s"], 1),
        ]
        for k in keys:
            v = r["lat"].get(k, [])
            cells.append(f"{pct(v, 50):.1f} / {pct(v, 95):.1f} (n={len(v)})" if v else "-")
        cells += [round(r["rss"]), round(r["peak"]), round(r["disk"])]
        if name != "sqlite_lance":
            cells.append(round(r["graph_disk"]) if not math.isnan(r["graph_disk"]) else "n/a")
        table.append(cells)
    print_table(f"{name}: growth", header, table)
    ratios = []
    for prev, cur in itertools.pairwise(rows):
        cells = [f"{prev['chunks']:,} -> {cur['chunks']:,}", f"{cur['chunks'] / prev['chunks']:.1f}x"]
        cells.append(f"{cur['ingest_rate'] / prev['ingest_rate']:.2f}")
        for k in MODES:
            cells.append(f"{pct(cur['lat'][k], 95) / pct(prev['lat'][k], 95):.2f}")
        cells += [f"{cur['rss'] / prev['rss']:.2f}", f"{cur['disk'] / max(prev['disk'], 1e-9):.2f}"]
        ratios.append(cells)
    if ratios:
        print_table(
            f"{name}: ratio to the previous size",
            ["step", "size", "ingest rate", *(f"{k} p95" for k in MODES), "RSS", "disk"],
            ratios,
        )


async def main_async(args: argparse.Namespace) -> None:
    items = passages(CORPORA)
    texts = [it["content"] for it in items]
    base, found = cached_vectors(texts, "d")
    rng = np.random.default_rng(0)
    missing = int((~found).sum())
    if missing:
        base[~found] = unit(rng, missing)
    print(
        f"{len(texts):,} development passages; {int(found.sum()):,} with cached all-MiniLM-L6-v2 vectors, "
        f"{missing:,} with random unit vectors; copies perturbed to cosine 0.95-0.98"
    )
    qtexts = [q["question"] for q in questions(CORPORA, args.queries)]
    qbase, qfound = cached_vectors(qtexts, "q")
    if (~qfound).any():
        picks = rng.integers(len(texts), size=int((~qfound).sum()))
        noisy = base[picks] + rng.standard_normal((len(picks), DIM), dtype=np.float32) * 0.04
        qbase[~qfound] = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    print(
        f"{len(qtexts)} questions; {int(qfound.sum())} with cached query vectors, the rest perturbed passage vectors"
    )
    sample_rows = np.random.default_rng(1).choice(
        len(texts), size=min(args.sample, len(texts)), replace=False
    )
    profile = GraphProfile([texts[i] for i in sample_rows])
    print(profile.describe())
    names = unit(rng, len(profile.names))
    named = np.zeros(len(profile.names), dtype=bool)
    for kind in NAME_KINDS:
        vecs, found = cached_vectors(profile.names, kind)
        take = found & ~named
        names[take] = vecs[take]
        named |= found
    print(
        f"entity name vectors: {int(named.sum()):,} of {len(named):,} names cached (all-MiniLM-L6-v2), "
        "the rest random unit vectors; later copies of a name perturbed to cosine 0.95-0.98"
    )
    inputs = {
        "texts": texts,
        "base": base,
        "profile": profile,
        "names": names,
        "queries": dict(zip(qtexts, qbase, strict=True)),
    }

    data_dir = tempfile.mkdtemp(prefix="khora-scale-")
    try:
        for name, cfg in stack_configs(args.stack, data_dir=data_dir).items():
            t0 = time.perf_counter()
            rows = await run_stack(name, cfg, inputs, args)
            print(f"[{name}] {time.perf_counter() - t0:.0f} s in all")
            if rows:
                report(name, rows)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", choices=STACK_CHOICES, default="all")
    parser.add_argument("--sizes", default="10000,100000", help="chunk counts, comma-separated")
    parser.add_argument("--queries", type=int, default=100, help="timed questions per mode")
    parser.add_argument(
        "--profile", action="store_true", help="time each store call of the timed HYBRID recalls"
    )
    parser.add_argument("--sample", type=int, default=800, help="passages the graph profile is measured on")
    parser.add_argument(
        "--budget-s", type=float, default=480.0, help="skip a size whose ingest would take longer"
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
