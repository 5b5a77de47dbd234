"""Entity name vectors in PostgreSQL: the entity vector search of the PostgreSQL + Neo4j stack.

Neo4j holds the entities; ``khora_entity_vectors`` holds a copy of each entity's name vector
under pgvector's HNSW index (cosine), beside the chunk vectors, and entity linking searches
it instead of Neo4j's vector index. On the same 16,815 entity vectors a top-10 took 0.8 ms
here against 6.8 ms there, and a Neo4j call costs about 1.2 ms before any work
(``docs/operations.md``).

The copy is an index over Neo4j, never a second source of truth:

* a hit is returned only when Neo4j holds the entity: its fields are read there by id, in one
  statement for all the vectors of a search. A vector whose entity is gone (an orphan
  removed with its last document, a failed write compensated) is dropped from the result
  and deleted by the search that met it, unless it was written after that search began (a
  writer re-creating the entity meanwhile keeps its vector);
* the stack writes an entity's vector once its graph has landed in Neo4j (``write_many``,
  ``upsert_graph``), and a failure there is compensated like a failed graph write;
* ``delete_entities`` and ``delete_namespace`` remove their vectors at once;
* a store whose entities were written before this table existed is copied from Neo4j once,
  when the stack opens (:func:`copy_from_graph`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import asyncpg
import numpy as np

from khora_core.errors import InvalidInputError
from khora_core.models import Entity, Namespace
from khora_core.storage.postgres.pool import PgPool
from khora_core.storage.protocols import EntityHit

__all__ = ["COPIED_SETTING", "EntityVectors", "copy_from_graph"]

#: ``khora_settings`` key set once the vectors of the entities stored before this table were
#: copied from Neo4j.
COPIED_SETTING = "entity_vectors_copied"
#: Entities per page when copying a namespace from Neo4j.
_COPY_PAGE = 5_000
#: Most candidates one vector asks for while hits are dropped for entities Neo4j lacks.
_MAX_FETCH = 1_000

# One row per entity, sent with ``executemany`` (pipelined): an array of vectors is not a
# parameter every pgvector codec version can encode.
_UPSERT = """
INSERT INTO khora_entity_vectors (namespace_id, entity_id, embedding) VALUES ($1, $2, $3)
ON CONFLICT (namespace_id, entity_id)
DO UPDATE SET embedding = EXCLUDED.embedding, written_at = statement_timestamp()
"""

_COPY = """
INSERT INTO khora_entity_vectors (namespace_id, entity_id, embedding) VALUES ($1, $2, $3)
ON CONFLICT (namespace_id, entity_id) DO NOTHING
"""

_SEARCH = """
SELECT entity_id, 1 - (embedding <=> $2) AS score
FROM khora_entity_vectors
WHERE namespace_id = $1
ORDER BY embedding <=> $2
LIMIT $3
"""

#: Only vectors written before the search began: a writer that re-created the entity since
#: keeps its vector.
_DELETE_STALE = """
DELETE FROM khora_entity_vectors
WHERE namespace_id = $1 AND entity_id = ANY($2::text[]) AND written_at < $3
"""

#: Looks up the namespace's entities in Neo4j by id (fields only): ``{id: Entity}``.
EntityLookup = Callable[[str, Sequence[str]], Awaitable[Mapping[str, Entity]]]


class EntityVectors:
    """``khora_entity_vectors``: write, delete and search entity name vectors (module doc)."""

    def __init__(self, pool: PgPool) -> None:
        self._pool = pool

    async def upsert(self, namespace_id: str, entities: Sequence[Entity]) -> None:
        """Store the vectors of ``entities`` that carry one; a later vector of an id wins.

        Raises:
            InvalidInputError: an embedding has the wrong dimension.
        """
        latest: dict[str, np.ndarray] = {}
        for entity in entities:
            if entity.embedding is not None:
                latest[entity.id] = self._checked(entity.embedding, f"entity {entity.id!r}")
        if latest:
            await _write_rows(self._pool, _UPSERT, namespace_id, list(latest.items()))

    async def delete(self, namespace_id: str, entity_ids: Sequence[str]) -> None:
        """Remove the vectors of ``entity_ids`` in the namespace."""
        if entity_ids:
            await self._pool.fetch(
                "DELETE FROM khora_entity_vectors WHERE namespace_id = $1 AND entity_id = ANY($2::text[])",
                namespace_id,
                list(dict.fromkeys(entity_ids)),
            )

    async def search(
        self,
        namespace_id: str,
        vectors: Sequence[Sequence[float]],
        *,
        limit: int,
        min_similarity: float,
        lookup: EntityLookup,
    ) -> list[list[EntityHit]]:
        """For each vector, the namespace's ``limit`` entities nearest by raw cosine, of at least
        ``min_similarity``, nearest first (ties by id), with their fields from ``lookup``.

        Raises:
            InvalidInputError: a vector has the wrong dimension.
        """
        queries = [self._checked(v, "query vector") for v in vectors]
        out: list[list[EntityHit]] = [[] for _ in queries]
        if limit <= 0:
            return out
        pending = list(range(len(queries)))
        fetch = limit
        while pending:
            asked = [queries[i] for i in pending]
            started, found = await self._pool.read(
                functools.partial(_nearest, namespace_id=namespace_id, queries=asked, fetch=fetch)
            )
            wanted = list(dict.fromkeys(eid for rows in found for eid, _ in rows))
            entities = await lookup(namespace_id, wanted) if wanted else {}
            gone = [eid for eid in wanted if eid not in entities]
            if gone:
                await self._pool.fetch(_DELETE_STALE, namespace_id, gone, started)
            again: list[int] = []
            for i, rows in zip(pending, found, strict=True):
                hits = [
                    EntityHit(entity=entities[eid], score=score)
                    for eid, score in rows
                    if eid in entities and score >= min_similarity
                ]
                reached_floor = bool(rows) and rows[-1][1] < min_similarity
                if len(hits) < limit and len(rows) == fetch and not reached_floor and fetch < _MAX_FETCH:
                    again.append(i)  # some candidates named entities Neo4j lacks: ask for more
                hits.sort(key=lambda h: (-h.score, h.entity.id))
                out[i] = hits[:limit]
            pending, fetch = again, min(fetch * 4, _MAX_FETCH)
        return out

    def _checked(self, vector: Sequence[float], what: str) -> np.ndarray:
        q = np.asarray(vector, dtype=np.float32)
        if q.ndim != 1 or q.shape[0] != self._pool.dim:
            raise InvalidInputError(
                f"{what} has {q.shape[-1] if q.ndim else 0} dimensions, the store holds {self._pool.dim}"
            )
        return q


async def _nearest(
    conn: asyncpg.Connection, namespace_id: str, queries: Sequence[np.ndarray], fetch: int
) -> tuple[Any, list[list[tuple[str, float]]]]:
    """(the server's time before the first search, ``[(entity id, cosine)]`` per query, nearest
    first); a zero vector, which has no cosine, finds nothing."""
    started = await conn.fetchval("SELECT statement_timestamp()")
    found = []
    for q in queries:
        rows = await conn.fetch(_SEARCH, namespace_id, q, fetch)
        found.append([(r["entity_id"], float(r["score"])) for r in rows if not math.isnan(float(r["score"]))])
    return started, found


async def _write_rows(pool: PgPool, sql: str, namespace_id: str, rows: list[tuple[str, np.ndarray]]) -> None:
    """``sql`` once per ``(entity id, vector)`` of ``rows``, in one transaction."""
    async with pool.transaction() as conn:
        await conn.executemany(sql, [(namespace_id, eid, vector) for eid, vector in rows])


async def copy_from_graph(
    pool: PgPool,
    namespaces: Callable[[], Awaitable[Sequence[Namespace]]],
    page: Callable[[str, str, int], Awaitable[list[tuple[str, list[float]]]]],
) -> int:
    """Copy the name vectors of every entity of every namespace from Neo4j, once per
    database: ``page(namespace, after_id, size)`` gives a namespace's entities with a vector,
    by id, after ``after_id``. Vectors already here are kept. Does nothing once
    ``COPIED_SETTING`` is set; returns how many vectors it read."""
    if await pool.fetchval("SELECT value FROM khora_settings WHERE key = $1", COPIED_SETTING):
        return 0
    read = 0
    for namespace_id in [n.namespace_id for n in await namespaces()]:
        after = ""
        while True:
            rows = await page(namespace_id, after, _COPY_PAGE)
            if not rows:
                break
            vectors = [(eid, np.asarray(v, dtype=np.float32)) for eid, v in rows]
            kept = [(eid, v) for eid, v in vectors if v.shape == (pool.dim,)]
            if kept:
                await _write_rows(pool, _COPY, namespace_id, kept)
            read += len(rows)
            after = rows[-1][0]
            if len(rows) < _COPY_PAGE:
                break
    await pool.fetch(
        "INSERT INTO khora_settings (key, value) VALUES ($1, 'yes') ON CONFLICT (key) DO NOTHING",
        COPIED_SETTING,
    )
    return read
