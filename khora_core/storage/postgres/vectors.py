"""Chunk vector search on pgvector's HNSW index (cosine)."""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import asyncpg
import numpy as np

from khora_core.config import StorageConfig
from khora_core.errors import InvalidInputError
from khora_core.models import ChunkHit
from khora_core.storage.postgres.pool import PgPool
from khora_core.storage.postgres.rows import CHUNK_COLUMNS, chunk_from_row, vector_array
from khora_core.storage.protocols import SearchPage

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter

__all__ = ["PostgresVectorIndex"]

_MAX_FETCH = 10_000
#: pgvector's upper bound for hnsw.ef_search.
_MAX_EF_SEARCH = 1000

_SEARCH_SQL = """
SELECT {columns}, 1 - (c.embedding <=> $2) AS score
FROM khora_chunks c
WHERE c.namespace_id = $1 AND c.embedding IS NOT NULL AND ({filter})
ORDER BY c.embedding <=> $2
LIMIT $3
"""

# With a filter the ordering expression is one the HNSW index cannot serve ("+ 0"), so the
# planner ranks exactly the rows the namespace and filter select. An HNSW walk under a
# selective filter loses neighbours: measured recall@10 0.67 at 9% selectivity over 100k
# chunks, even with iterative scans (benchmarks/storage.py).
_EXACT_SEARCH_SQL = """
SELECT {columns}, 1 - (c.embedding <=> $2) AS score
FROM khora_chunks c
WHERE c.namespace_id = $1 AND c.embedding IS NOT NULL AND ({filter})
ORDER BY (c.embedding <=> $2) + 0
LIMIT $3
"""


class PostgresVectorIndex:
    """``VectorIndex`` on PostgreSQL + pgvector.

    A query runs with ``hnsw.ef_search`` and, on pgvector 0.8+,
    ``hnsw.iterative_scan = strict_order``: the HNSW index is shared by all namespaces, so
    without iterative scans the namespace and filter predicates could leave fewer than
    ``limit`` rows out of the ``ef_search`` candidates. Pooled connections start with both
    at the pool's settings (``PgPool``), so a query at the default ``ef_search`` is one
    statement; another ``ef_search`` is set for its query alone (``SET LOCAL`` in a
    transaction). ``search`` for the top 50 of 1,000 chunks took 9.6-10.6 ms that way,
    12.6-14.4 ms with a transaction around every query (2 cores).

    Args:
        pool: the opened database.
        config: ``hnsw_ef_search`` (default per query) comes from here (default: the
            pool's config).
    """

    def __init__(self, pool: PgPool, config: StorageConfig | None = None) -> None:
        self._pool = pool
        self.ef_search = int((config or pool.config).hnsw_ef_search)

    async def search(
        self,
        namespace_id: str,
        vector: Sequence[float],
        *,
        limit: int,
        filter: RecallFilter | None = None,
        min_similarity: float = 0.0,
        ef_search: int | None = None,
    ) -> SearchPage:
        """Top ``limit`` chunks of the namespace by cosine similarity to ``vector``.

        ``score`` is the raw cosine (1 - cosine distance); hits below ``min_similarity``
        are dropped. A filter is compiled into the query; what it could not push down is
        checked in memory, fetching more rows when that check drops some.

        Raises:
            InvalidInputError: wrong vector dimension or a negative ``limit``.
            StorageUnavailableError: the server is unreachable.
        """
        if limit < 0:
            raise InvalidInputError(f"limit must be >= 0, got {limit}")
        query = self._checked(vector)
        where, params, pushed, residual_keys, needs_check = "TRUE", [], [], [], False
        if filter is not None:
            from khora_core.filters import compile_postgres

            compiled = compile_postgres(filter, table_alias="c", param_start=4)
            where, params = compiled.sql, list(compiled.params)
            pushed, residual_keys = list(compiled.pushed_keys), list(compiled.residual_keys)
            needs_check = compiled.residual is not None
        if limit == 0:
            return SearchPage(pushed_keys=pushed, post_filtered_keys=residual_keys)
        exact = filter is not None
        sql = (_EXACT_SEARCH_SQL if exact else _SEARCH_SQL).format(columns=CHUNK_COLUMNS, filter=where)
        base_ef = int(ef_search or self.ef_search)
        fetch = limit * 4 if needs_check else limit
        while True:
            ef = max(1, min(_MAX_EF_SEARCH, max(base_ef, fetch)))
            rows = await self._pool.read(
                functools.partial(
                    self._query,
                    sql=sql,
                    ef=ef,
                    namespace_id=namespace_id,
                    query=query,
                    fetch=fetch,
                    params=params,
                )
            )
            hits: list[ChunkHit] = []
            below_threshold = False
            for row in rows:
                score = float(row["score"])
                if math.isnan(score):  # a zero vector has no direction, hence no cosine
                    continue
                if score < min_similarity:
                    below_threshold = True  # rows come nearest first: the rest are farther
                    break
                chunk = chunk_from_row(row)
                # Defensive re-check, always: the SQL should already enforce the pushed part.
                if filter is not None and not filter.matches(chunk.filter_record()):
                    continue
                hits.append(ChunkHit(chunk=chunk, score=score, rank=0))
                if len(hits) == limit:
                    break
            if len(rows) < fetch and not exact and not below_threshold and len(hits) < limit:
                # The index walk ended early: the namespace holds fewer rows, or the walk gave
                # up (hnsw.max_scan_tuples) among other namespaces' vectors. Rank exactly.
                exact = True
                sql = _EXACT_SEARCH_SQL.format(columns=CHUNK_COLUMNS, filter=where)
                continue
            if len(hits) >= limit or below_threshold or len(rows) < fetch or fetch >= _MAX_FETCH:
                break
            fetch = min(fetch * 4, _MAX_FETCH)
        # Same-distance ties come back in index order; make the order deterministic.
        hits.sort(key=lambda h: (-h.score, h.chunk.id))
        for rank, hit in enumerate(hits, 1):
            hit.rank = rank
        return SearchPage(hits=hits, pushed_keys=pushed, post_filtered_keys=residual_keys)

    async def embeddings(self, namespace_id: str, chunk_ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored embeddings of ``chunk_ids`` in the namespace (for MMR over other channels' hits)."""
        ids = list(dict.fromkeys(chunk_ids))
        out: dict[str, list[float]] = {}
        for start in range(0, len(ids), 1000):
            rows = await self._pool.fetch(
                "SELECT id, embedding FROM khora_chunks WHERE namespace_id = $1 AND id = ANY($2::text[])",
                namespace_id,
                ids[start : start + 1000],
            )
            for row in rows:
                if row["embedding"] is not None:
                    out[row["id"]] = vector_array(row["embedding"]).tolist()
        return out

    async def similarities(
        self, namespace_id: str, vector: Sequence[float], chunk_ids: Sequence[str]
    ) -> dict[str, float]:
        """Raw cosine of ``vector`` with each stored chunk in ``chunk_ids``, computed in SQL."""
        return (await self.similarities_many(namespace_id, [vector], chunk_ids))[0]

    async def similarities_many(
        self, namespace_id: str, vectors: Sequence[Sequence[float]], chunk_ids: Sequence[str]
    ) -> list[dict[str, float]]:
        """``similarities`` for each of ``vectors``, in one SQL pass over the chunks' rows
        (batches of 1,000 ids, read side by side on the pool's connections)."""
        qs = [self._checked(v) for v in vectors]
        ids = list(dict.fromkeys(chunk_ids))
        out: list[dict[str, float]] = [{} for _ in qs]
        if not qs or not ids:
            return out
        # One cosine column per vector; only the count of placeholders varies.
        columns = ", ".join(f"1 - (embedding <=> ${3 + i})" for i in range(len(qs)))
        sql = (
            f"SELECT id, {columns} FROM khora_chunks "
            "WHERE namespace_id = $1 AND id = ANY($2::text[]) AND embedding IS NOT NULL"
        )
        # A 100,000-chunk store's graph reach, about 3,600 ids: 14.8 ms p50 side by side
        # against 23.1 one batch after another (19.4 as one statement), the same cosines.
        batches = await asyncio.gather(
            *(
                self._pool.fetch(sql, namespace_id, ids[start : start + 1000], *qs)
                for start in range(0, len(ids), 1000)
            )
        )
        for rows in batches:
            for row in rows:
                for i in range(len(qs)):
                    out[i][row["id"]] = float(row[i + 1])
        return out

    def _checked(self, vector: Sequence[float]) -> np.ndarray:
        """``vector`` as float32, or ``InvalidInputError`` when its dimension is not the store's."""
        q = np.asarray(vector, dtype=np.float32)
        if q.ndim != 1 or q.shape[0] != self._pool.dim:
            raise InvalidInputError(
                f"query vector has {q.shape[-1] if q.ndim else 0} dimensions, the store holds {self._pool.dim}"
            )
        return q

    async def _query(
        self,
        conn: asyncpg.Connection,
        sql: str,
        ef: int,
        namespace_id: str,
        query: np.ndarray,
        fetch: int,
        params: list[object],
    ) -> list[asyncpg.Record]:
        if ef == self._pool.session_ef_search:  # the session's own settings (PgPool)
            return await conn.fetch(sql, namespace_id, query, fetch, *params)
        # The session already scans iteratively; only ef_search differs. SET takes no bind
        # parameters: ef is an int we computed, never user text.
        async with conn.transaction():
            await conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
            return await conn.fetch(sql, namespace_id, query, fetch, *params)
