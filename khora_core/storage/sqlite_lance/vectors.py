"""Vector search for the embedded store: exact cosine over an in-memory matrix.

Chunk vectors live durably in LanceDB (``lance.py``); each namespace's vectors are loaded
once into a unit-normalised float32 matrix and searched with one matrix-vector product.
That is exact (recall 1.0) and faster than LanceDB's own flat scan, where its approximate
index loses recall on clustered embeddings (figures in ``docs/benchmarks.md``). The price
is memory (n x dim x 4 bytes per loaded namespace) and a one-off load on a namespace's
first search.

Consistency: every write bumps ``namespaces.vector_version`` in its SQLite transaction. A
search compares that counter with its cached snapshot and reloads from LanceDB when the
cache is older (another process wrote). The writing process patches its own cache in place
(append rows, mark deleted ones dead) while it commits, so it never reloads. Snapshots are
immutable views, so a search never sees a half-applied change; and a hit is only returned
when its chunk row exists in SQLite, so vectors of an unfinished or failed write are never
visible.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from khora_core.errors import InvalidInputError
from khora_core.models import ChunkHit
from khora_core.storage.protocols import SearchPage
from khora_core.storage.sqlite_lance.db import Database
from khora_core.storage.sqlite_lance.filtering import PreparedFilter, prepare
from khora_core.storage.sqlite_lance.lance import LanceVectors
from khora_core.storage.sqlite_lance.rows import fetch_chunks


def normalise(matrix: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32 (into ``out`` if given)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if out is None:
        out = np.empty(matrix.shape, dtype=np.float32)
    if matrix.ndim == 1:
        np.divide(matrix, max(float(np.linalg.norm(matrix)), 1e-12), out=out)
        return out
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))  # no n x dim temporary
    np.divide(matrix, np.maximum(norms, 1e-12)[:, None], out=out)
    return out


def dot_rows(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix @ q`` without BLAS threads.

    The scan is memory-bound; numpy's single-threaded einsum loop measured 6-9 ms at
    100k x 384 where multi-threaded OpenBLAS took 16-24 ms (p95 up to 125 ms) on a busy
    2-core machine: BLAS worker threads fight the embedder and the event loop for cores.
    """
    return np.einsum("ij,j->i", matrix, q)


def query_vector(vector: Sequence[float], dim: int) -> np.ndarray:
    q = np.asarray(vector, dtype=np.float32).reshape(-1)
    if q.shape[0] != dim:
        raise InvalidInputError(
            f"Query vector has {q.shape[0]} dimensions; this store holds {dim}-dimensional ones"
        )
    return normalise(q)


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of one namespace's vectors at ``version``.

    ``ids`` and ``row_of`` are shared with later snapshots (appends only add entries past
    ``n``), so readers must bound row numbers by ``n`` and check ``alive``.
    """

    version: int
    n: int
    matrix: np.ndarray
    ids: list[str]
    row_of: dict[str, int]
    alive: np.ndarray
    dead: int

    def rows_for(self, chunk_ids: Sequence[str]) -> np.ndarray:
        rows = [r for r in (self.row_of.get(c) for c in chunk_ids) if r is not None and r < self.n]
        out = np.asarray(rows, dtype=np.int64)
        return out[self.alive[out]] if out.size else out

    def scores(self, q: np.ndarray) -> np.ndarray:
        """Cosine of ``q`` (unit length) with every row; dead rows score ``-inf``."""
        scores = dot_rows(self.matrix, q)
        if self.dead:
            scores[~self.alive] = -np.inf
        return scores

    def top(self, scores: np.ndarray, k: int, rows: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The best ``k`` (row, cosine) pairs from ``scores``, over all live rows or ``rows``.

        Ties break by row (insertion order), so results are deterministic.
        """
        if rows is None:
            k = min(k, self.n - self.dead)
        else:
            scores = scores[rows]
            k = min(k, rows.size)
        if k <= 0:
            return []
        size = scores.size
        part = np.argpartition(scores, size - k)[size - k :] if k < size else np.arange(size)
        cand = part if rows is None else rows[part]
        order = np.lexsort((cand, -scores[part]))
        return [(int(cand[i]), float(scores[part[i]])) for i in order]


#: Global-ranking candidates to walk before a filtered search switches to SQLite's match list.
_PREPASS_AT = 4096


class _Entry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.snap: Snapshot | None = None
        self.buffer: np.ndarray | None = None


class ChunkVectorCache:
    """Per-namespace snapshots of chunk vectors, loaded lazily from LanceDB."""

    def __init__(self, lance: LanceVectors, dim: int) -> None:
        self.lance = lance
        self.dim = dim
        self._entries: dict[str, _Entry] = {}
        self._guard = threading.Lock()

    def entry(self, namespace_id: str) -> _Entry:
        with self._guard:
            return self._entries.setdefault(namespace_id, _Entry())

    def forget(self, namespace_id: str) -> None:
        with self._guard:
            self._entries.pop(namespace_id, None)

    def snapshot(self, namespace_id: str, version: int) -> Snapshot:
        """The namespace's vectors as of ``version`` or later (reloading when the cache is older).

        A newer snapshot serves an older read too: its extra rows have no SQLite row in the
        reader's snapshot and are dropped when the hits are fetched. Counters only grow (a
        re-created namespace starts at its creation time in microseconds).
        """
        entry = self.entry(namespace_id)
        snap = entry.snap
        if snap is not None and snap.version >= version:
            return snap
        with entry.lock:
            snap = entry.snap
            if snap is None or snap.version < version:
                ids, raw = self.lance.load(namespace_id)
                snap = self._build(entry, version, ids, raw)
            return snap

    def _build(
        self, entry: _Entry, version: int, ids: list[str], matrix: np.ndarray, *, normalised: bool = False
    ) -> Snapshot:
        row_of: dict[str, int] = {}
        alive = np.ones(len(ids), dtype=bool)
        for row, cid in enumerate(ids):
            old = row_of.get(cid)
            if old is not None:  # a retried write can leave a duplicate: keep the newest row
                alive[old] = False
            row_of[cid] = row
        capacity = max(1024, int(len(ids) * 1.25))
        buffer = np.empty((capacity, self.dim), dtype=np.float32)
        if normalised:
            buffer[: len(ids)] = matrix
        else:
            normalise(matrix, out=buffer[: len(ids)])
        entry.buffer = buffer
        entry.snap = Snapshot(
            version, len(ids), buffer[: len(ids)], list(ids), row_of, alive, int((~alive).sum())
        )
        return entry.snap

    def apply(
        self,
        entry: _Entry,
        prev_version: int,
        new_version: int,
        added_ids: Sequence[str],
        added: np.ndarray | None,
        removed_ids: Sequence[str],
    ) -> None:
        """Patch the cache after a committed write (call with ``entry.lock`` held)."""
        try:
            self._apply(entry, prev_version, new_version, added_ids, added, removed_ids)
        except Exception:  # the write is committed; a reload from LanceDB will catch up
            entry.snap = None

    def _apply(
        self,
        entry: _Entry,
        prev_version: int,
        new_version: int,
        added_ids: Sequence[str],
        added: np.ndarray | None,
        removed_ids: Sequence[str],
    ) -> None:
        snap = entry.snap
        if snap is None:
            return
        if snap.version != prev_version or entry.buffer is None:
            entry.snap = None  # someone else changed the store meanwhile: reload lazily
            return
        alive = snap.alive.copy()
        dead = snap.dead
        for cid in removed_ids:
            row = snap.row_of.pop(cid, None)
            if row is not None and row < snap.n and alive[row]:
                alive[row] = False
                dead += 1
        n, buffer, ids, row_of = snap.n, entry.buffer, snap.ids, snap.row_of
        if len(added_ids):
            if added is None:  # apply() drops the snapshot, as for any failed patch
                raise ValueError("added chunk ids without their vectors")
            if n + len(added_ids) > buffer.shape[0]:
                grown = np.empty((max(2 * buffer.shape[0], n + len(added_ids)), self.dim), dtype=np.float32)
                grown[:n] = buffer[:n]
                buffer = entry.buffer = grown
            normalise(added, out=buffer[n : n + len(added_ids)])  # past every reader's ``n``
            alive = np.concatenate([alive, np.ones(len(added_ids), dtype=bool)])
            for offset, cid in enumerate(added_ids):
                old = row_of.get(cid)
                if old is not None and alive[old]:
                    alive[old] = False
                    dead += 1
                ids.append(cid)
                row_of[cid] = n + offset
            n += len(added_ids)
        if dead > max(1024, n // 4):
            keep = np.flatnonzero(alive[:n])
            self._build(entry, new_version, [ids[i] for i in keep], buffer[keep], normalised=True)
            return
        entry.snap = Snapshot(new_version, n, buffer[:n], ids, row_of, alive, dead)


def _vector_version(conn: sqlite3.Connection, namespace_id: str) -> int | None:
    row = conn.execute(
        "SELECT vector_version FROM namespaces WHERE namespace_id = ?", (namespace_id,)
    ).fetchone()
    return None if row is None else int(row[0])


class SqliteLanceVectorIndex:
    """``VectorIndex``: exact cosine search; the filter is pushed into SQLite."""

    def __init__(self, db: Database, cache: ChunkVectorCache, dim: int) -> None:
        self._db = db
        self._cache = cache
        self._dim = dim

    async def search(
        self,
        namespace_id: str,
        vector: Sequence[float],
        *,
        limit: int,
        filter: Any = None,
        min_similarity: float = 0.0,
        ef_search: int | None = None,
    ) -> SearchPage:
        """Top ``limit`` chunks by cosine similarity; ``score`` is the raw cosine.

        ``ef_search`` is accepted for protocol compatibility; the search is exact. Hits carry
        their unit-normalised embedding.
        """
        q = query_vector(vector, self._dim)
        prepared = prepare(filter)
        page = SearchPage(
            pushed_keys=list(prepared.pushed_keys) if prepared else [],
            post_filtered_keys=list(prepared.residual_keys) if prepared else [],
        )
        if limit <= 0:
            return page
        page.hits = await self._db.read_tx(
            self._search, namespace_id, q, limit, prepared, float(min_similarity), what="search vectors"
        )
        return page

    async def embeddings(self, namespace_id: str, chunk_ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored (unit-normalised) embeddings of ``chunk_ids`` in the namespace."""
        ids = list(dict.fromkeys(chunk_ids))
        return await self._db.read_tx(self._embeddings, namespace_id, ids, what="read embeddings")

    async def similarities(
        self, namespace_id: str, vector: Sequence[float], chunk_ids: Sequence[str]
    ) -> dict[str, float]:
        """Raw cosine of ``vector`` with each stored chunk in ``chunk_ids`` (unknown ids absent)."""
        return (await self.similarities_many(namespace_id, [vector], chunk_ids))[0]

    async def similarities_many(
        self, namespace_id: str, vectors: Sequence[Sequence[float]], chunk_ids: Sequence[str]
    ) -> list[dict[str, float]]:
        """``similarities`` for each of ``vectors``, gathering the chunks' rows once."""
        qs = [query_vector(v, self._dim) for v in vectors]
        ids = list(dict.fromkeys(chunk_ids))

        def run(conn: sqlite3.Connection) -> list[dict[str, float]]:
            version = _vector_version(conn, namespace_id)
            if version is None or not ids or not qs:
                return [{} for _ in qs]
            snap = self._cache.snapshot(namespace_id, version)
            looked_up = [(cid, snap.row_of.get(cid)) for cid in ids]
            rows = [(cid, r) for cid, r in looked_up if r is not None and r < snap.n and snap.alive[r]]
            if not rows:
                return [{} for _ in qs]
            gathered = snap.matrix[[r for _, r in rows]]
            return [
                {cid: float(v) for (cid, _), v in zip(rows, dot_rows(gathered, q), strict=True)} for q in qs
            ]

        return await self._db.read_tx(run, what="score chunks")

    def _embeddings(
        self, conn: sqlite3.Connection, namespace_id: str, ids: list[str]
    ) -> dict[str, list[float]]:
        version = _vector_version(conn, namespace_id)
        if version is None or not ids:
            return {}
        snap = self._cache.snapshot(namespace_id, version)
        out: dict[str, list[float]] = {}
        for cid in ids:
            row = snap.row_of.get(cid)
            if row is not None and row < snap.n and snap.alive[row]:
                out[cid] = snap.matrix[row].tolist()
        return out

    def _search(
        self,
        conn: sqlite3.Connection,
        namespace_id: str,
        q: np.ndarray,
        limit: int,
        prepared: PreparedFilter | None,
        min_similarity: float,
    ) -> list[ChunkHit]:
        version = _vector_version(conn, namespace_id)
        if version is None:
            return []
        snap = self._cache.snapshot(namespace_id, version)
        rows = None
        hits: list[ChunkHit] = []
        done = 0
        k = limit * 4 if prepared is not None else limit + 8
        scores = snap.scores(q)
        while True:
            ranked = snap.top(scores, k, rows)
            batch = [(row, s) for row, s in ranked[done:] if s >= min_similarity]
            # Walking the global ranking, the pushed filter is applied as the rows are fetched;
            # once the ranking is restricted to SQLite's matches (``rows``) it already holds.
            pushed = prepared if rows is None else None
            chunks = fetch_chunks(conn, namespace_id, [snap.ids[row] for row, _ in batch], pushed)
            for row, score in batch:
                chunk = chunks.get(snap.ids[row])
                if chunk is None or (prepared is not None and not prepared.matches(chunk)):
                    continue
                chunk.embedding = snap.matrix[row].tolist()
                hits.append(ChunkHit(chunk=chunk, score=score, rank=len(hits) + 1))
                if len(hits) == limit:
                    return hits
            if len(ranked) < k or len(batch) < len(ranked) - done:
                return hits  # every candidate seen, or the rest is below min_similarity
            done, k = len(ranked), k * 4
            if (
                rows is None
                and prepared is not None
                and prepared.pushes
                and k > max(_PREPASS_AT, snap.n // 8)
            ):
                # A selective filter: rank only the chunks SQLite says match. Same answer as
                # walking further down the global ranking, in one more round instead of many.
                sql = f"SELECT c.id FROM chunks c WHERE c.namespace_id = ? AND ({prepared.sql})"
                rows = snap.rows_for([r[0] for r in conn.execute(sql, [namespace_id, *prepared.params])])
                hits, done, k = [], 0, limit * 4


class EntityVectorCache:
    """Entity embeddings of a namespace as one matrix, reloaded when ``graph_version`` moves.

    Entity vectors live in SQLite next to their rows (a BLOB), so merging an entity updates
    its vector in the same transaction; the matrix makes the search one product.
    """

    def __init__(self) -> None:
        self._cache: dict[str, tuple[int, list[str], np.ndarray]] = {}
        self._lock = threading.Lock()

    def forget(self, namespace_id: str) -> None:
        with self._lock:
            self._cache.pop(namespace_id, None)

    def matrix(
        self, conn: sqlite3.Connection, namespace_id: str, version: int
    ) -> tuple[list[str], np.ndarray]:
        with self._lock:
            cached = self._cache.get(namespace_id)
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        rows = conn.execute(
            "SELECT id, embedding FROM entities WHERE namespace_id = ? AND embedding IS NOT NULL",
            (namespace_id,),
        ).fetchall()
        ids = [r[0] for r in rows]
        dim = len(rows[0][1]) // 4 if rows else 0
        blobs = [r[1] for r in rows if len(r[1]) == dim * 4]
        ids = [r[0] for r in rows if len(r[1]) == dim * 4]
        matrix = (
            normalise(np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), dim))
            if ids
            else np.zeros((0, 0), dtype=np.float32)
        )
        with self._lock:
            self._cache[namespace_id] = (version, ids, matrix)
        return ids, matrix
