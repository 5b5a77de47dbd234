"""Shared benchmark helpers: data paths, a disk-cached embedder, stack configs, tables."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from khora_core import KhoraConfig
from khora_core.embedding.base import embed_names

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("KHORA_DATA_ROOT", ROOT.parent / "shared" / "data"))
CACHE = Path(os.environ.get("KHORA_BENCH_CACHE", Path.home() / ".cache" / "khora" / "bench"))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


class CachedEmbedder:
    """Wraps Khora's default embedder with an on-disk cache keyed by text hash.

    Benchmarks embed the same corpora many times (per stack, per run); the cache makes
    the embedding cost paid once per machine while every vector is still a real
    all-MiniLM-L6-v2 embedding. With ``live_queries=True`` questions are always embedded
    by the model (what a timed ``recall()`` must pay); passages and names stay cached.
    """

    def __init__(self, inner: Any | None = None, *, live_queries: bool = False) -> None:
        from khora_core.embedding.factory import build_embedder

        self.inner = inner or build_embedder(None)
        self.live_queries = live_queries
        self.name = f"cached:{self.inner.name}"
        self.dimension = self.inner.dimension
        CACHE.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(CACHE / "embeddings.sqlite"), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (k TEXT PRIMARY KEY, v BLOB)")
        self.hits = 0
        self.misses = 0

    def _key(self, text: str, kind: str) -> str:
        # Vectors of a bfloat16 pass (EmbeddingConfig.precision) are kept apart.
        precision = getattr(self.inner, "precision", "float32")
        model = self.inner.name if precision == "float32" else f"{self.inner.name}@{precision}"
        return hashlib.sha256(f"{model}|{kind}|{text}".encode()).hexdigest()

    async def _embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        keys = [self._key(t, kind) for t in texts]
        found: dict[str, list[float]] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            q = f"SELECT k, v FROM emb WHERE k IN ({','.join('?' * len(part))})"
            for k, v in self._db.execute(q, part):
                found[k] = np.frombuffer(v, dtype=np.float32).tolist()
        missing = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            miss_texts = [texts[i] for i in missing]
            if kind == "q":
                vecs = [await self.inner.embed_query(t) for t in miss_texts]
            elif kind.startswith("n"):
                vecs = await embed_names(self.inner, miss_texts)
            else:
                vecs = await self.inner.embed_documents(miss_texts)
            rows = []
            for i, v in zip(missing, vecs, strict=True):
                found[keys[i]] = list(v)
                rows.append((keys[i], np.asarray(v, dtype=np.float32).tobytes()))
            self._db.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)", rows)
            self._db.commit()
        return [found[k] for k in keys]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts, "d")

    async def embed_query(self, text: str) -> list[float]:
        if self.live_queries:
            return list(await self.inner.embed_query(text))
        return (await self._embed([text], "q"))[0]

    def live(self) -> CachedEmbedder:
        """The same cache, embedding questions live (for timed recalls)."""
        twin = CachedEmbedder.__new__(CachedEmbedder)
        twin.__dict__.update(self.__dict__)
        twin.live_queries = True
        return twin

    async def embed_names(self, texts: Sequence[str]) -> list[list[float]]:
        # Cached apart from documents: the local embedder may encode names at another precision.
        return await self._embed(texts, f"n-{getattr(self.inner, 'name_precision', 'float32')}")


FOLDS = ("A", "B")


def fold_of(question_id: str) -> str:
    """The question's fixed fold: ``A`` (where settings are chosen) or ``B`` (reported beside
    it, never tuned on), by the first byte of the SHA-256 of its id."""
    return FOLDS[hashlib.sha256(str(question_id).encode()).digest()[0] % 2]


_WORD = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens, the plain BM25 baseline's tokenizer."""
    return _WORD.findall(text.lower())


class PlainBM25:
    """Okapi BM25 (``k1 = 1.2``, ``b = 0.75``) over a fixed list of texts: the plain baseline."""

    def __init__(self, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(tokens(t)) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / max(1, len(self.docs))
        self.df: Counter[str] = Counter(t for d in self.docs for t in d)
        self.k1, self.b = k1, b
        self.postings: dict[str, list[int]] = {}
        for i, d in enumerate(self.docs):
            for t in d:
                self.postings.setdefault(t, []).append(i)

    def rank(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best texts, best first (ties by index)."""
        n = len(self.docs)
        scores: dict[int, float] = {}
        for t in set(tokens(query)):
            df = self.df.get(t, 0)
            if not df:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for i in self.postings[t]:
                tf = self.docs[i][t]
                norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                scores[i] = scores.get(i, 0.0) + idf * tf * (self.k1 + 1) / (tf + norm)
        return sorted(scores, key=lambda i: (-scores[i], i))[:k]


def preset_sections(name: str, *, skeleton_scope: str | None = None, **query: Any) -> dict[str, Any]:
    """``KhoraConfig`` sections of the named read-path preset (``retrieval.presets``), with
    extra ``query`` settings on top (benchmarks turn the adaptive limit off) and, when given,
    the write path's ``skeleton_scope``."""
    from khora_core.retrieval.presets import PRESETS

    if name not in PRESETS:
        raise SystemExit(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    sections: dict[str, Any] = {"preset": name, "query": dict(query)}
    if skeleton_scope is not None:
        sections["vectorcypher"] = {"skeleton_scope": skeleton_scope}
    return sections


#: What ``--stack`` takes: both stacks, the embedded store, or PostgreSQL + Neo4j.
STACK_CHOICES = ("all", "sqlite_lance", "postgres")


def stack_configs(which: str, *, data_dir: str | None = None, **sections: Any) -> dict[str, KhoraConfig]:
    """``{"sqlite_lance": cfg, "postgres": cfg}`` for the stacks asked for (``all`` = both
    when the PostgreSQL/Neo4j env variables are set, as ``make bench-*`` does). ``data_dir``
    keeps the embedded store in that folder (a fresh temporary one otherwise)."""
    out: dict[str, KhoraConfig] = {}
    if which in ("all", "sqlite_lance"):
        tmp = data_dir or tempfile.mkdtemp(prefix="khora-bench-")
        out["sqlite_lance"] = KhoraConfig(storage={"data_dir": tmp, "database_url": None}, **sections)
    if which in ("all", "postgres") and os.environ.get("KHORA_DATABASE_URL"):
        out["postgres"] = KhoraConfig(**sections)
    elif which == "postgres":
        raise SystemExit("postgres stack asked for but KHORA_DATABASE_URL is not set (use make bench-*)")
    return out


@contextmanager
def timer() -> Iterator[dict[str, float]]:
    box: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        yield box
    finally:
        box["s"] = time.perf_counter() - t0


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    def fmt(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    cells = [[fmt(c) for c in r] for r in rows]
    widths = [max([len(str(h)), *(len(r[i]) for r in cells)]) for i, h in enumerate(header)]
    print(f"\n## {title}\n")
    print("| " + " | ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
