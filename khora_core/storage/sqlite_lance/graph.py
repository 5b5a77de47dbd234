"""``GraphStore`` for the embedded store: the entity graph in SQLite.

Traversals (walks, the chunks entities reach, the graph around chunks) come from
``SqliteTraversal`` (``graph_traversal.py``; the walks themselves are in ``traversal.py``).
Entity vector search is an exact cosine over a cached matrix of the namespace's entity
embeddings.

Embeddings are returned by the point lookups (``get_entity``, ``get_entities``,
``find_entities_by_name``, ``search_entities_by_vector``); listings and traversals leave
``Entity.embedding`` as ``None`` to stay light.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from khora_core.errors import InvalidInputError
from khora_core.models import Entity, Relationship
from khora_core.storage.protocols import EntityHit
from khora_core.storage.sqlite_lance.db import Database
from khora_core.storage.sqlite_lance.documents import require_namespace
from khora_core.storage.sqlite_lance.graph_rows import (
    delete_entity_rows,
    fold,
    refresh_mention_counts,
    upsert_entities,
    upsert_relationships,
)
from khora_core.storage.sqlite_lance.graph_traversal import SqliteTraversal
from khora_core.storage.sqlite_lance.rows import IN_JSON, fetch_entities, json_ids
from khora_core.storage.sqlite_lance.schema import (
    ENTITY_COLUMNS,
    ENTITY_SELECT,
    entity_from_row,
)
from khora_core.storage.sqlite_lance.vectors import EntityVectorCache, query_vector
from khora_core.storage.words import name_words

#: Most candidates one word of a name adds in ``find_entities_by_words``.
WORD_FANOUT = 50


class SqliteGraphStore(SqliteTraversal):
    """Entities, ``MENTIONED_IN``, typed relationships and ``AT_TIME`` links in SQLite."""

    def __init__(self, db: Database, entity_vectors: EntityVectorCache, dim: int) -> None:
        self._db = db
        self._vectors = entity_vectors
        self._dim = dim

    # -- entities ----------------------------------------------------------------------------

    async def get_entity(self, namespace_id: str, entity_id: str) -> Entity | None:
        found = await self.get_entities(namespace_id, [entity_id])
        return found[0] if found else None

    async def get_entities(self, namespace_id: str, entity_ids: Sequence[str]) -> list[Entity]:
        ids = list(dict.fromkeys(entity_ids))

        def run(conn: sqlite3.Connection) -> list[Entity]:
            found = fetch_entities(conn, namespace_id, ids, embeddings=True)
            return [found[i] for i in ids if i in found]

        return await self._db.read(run) if ids else []

    async def list_entities(
        self, namespace_id: str, *, offset: int = 0, limit: int = 100, type: str | None = None
    ) -> list[Entity]:
        """Entities by mention count (most mentioned first), then name."""
        sql = f"SELECT {ENTITY_SELECT} FROM entities e WHERE e.namespace_id = ?"
        params: list[Any] = [namespace_id]
        if type is not None:
            sql += " AND e.type = ?"
            params.append(type)
        sql += " ORDER BY e.mention_count DESC, e.name_lower, e.id LIMIT ? OFFSET ?"
        params += [max(0, limit), max(0, offset)]
        return await self._db.read(lambda conn: [entity_from_row(r) for r in conn.execute(sql, params)])

    async def find_entities_by_name(self, namespace_id: str, names: Sequence[str]) -> list[Entity]:
        """Exact, case-insensitive matches on name or alias."""
        keys = json_ids(sorted({fold(n) for n in names if n and n.strip()}))
        # Two index lookups joined by UNION: an OR across the two tables scans every entity.
        sql = (
            f"SELECT {ENTITY_SELECT}, e.embedding FROM entities e WHERE e.namespace_id = ? AND e.id IN ("
            f"SELECT n.id FROM entities n WHERE n.namespace_id = ? AND n.name_lower IN {IN_JSON} UNION "
            f"SELECT a.entity_id FROM entity_aliases a WHERE a.namespace_id = ? AND a.alias_lower IN {IN_JSON}"
            ") ORDER BY e.mention_count DESC, e.id"
        )
        params = (namespace_id, namespace_id, keys, namespace_id, keys)
        return await self._db.read(
            lambda conn: [entity_from_row(r, r[ENTITY_COLUMNS]) for r in conn.execute(sql, params)]
        )

    async def find_entities_by_words(
        self, namespace_id: str, texts: Sequence[str], *, limit: int
    ) -> list[list[Entity]]:
        """For each text, up to ``limit`` entities whose name shares a word with it
        (:func:`~khora_core.storage.words.name_words`), those sharing the rarest words
        first (the sum of 1 / the word's entity count), then shorter names.

        A word names at most :data:`WORD_FANOUT` candidates (a common word such as "river"
        adds little to the score and would otherwise read thousands of rows).
        """
        count_sql = (
            "SELECT word, COUNT(*) FROM entity_words WHERE namespace_id = ? "
            "AND word IN (SELECT value FROM json_each(?)) GROUP BY word"
        )
        ids_sql = "SELECT entity_id FROM entity_words WHERE namespace_id = ? AND word = ? LIMIT ?"

        def run(conn: sqlite3.Connection) -> list[list[Entity]]:
            scored: list[dict[str, float]] = []
            for text in texts:
                words = name_words(text)
                score: dict[str, float] = {}
                if words and limit > 0:
                    counts = conn.execute(count_sql, (namespace_id, json_ids(words))).fetchall()
                    for word, n in sorted(counts, key=lambda wc: (wc[1], wc[0])):
                        for (eid,) in conn.execute(ids_sql, (namespace_id, word, WORD_FANOUT)):
                            score[eid] = score.get(eid, 0.0) + 1.0 / n
                # Shorter names break ties among the best-scored (a few times ``limit``).
                best = sorted(score, key=lambda e: (-score[e], e))[: max(0, limit) * 4]
                scored.append({e: score[e] for e in best})
            found = fetch_entities(conn, namespace_id, {e for s in scored for e in s})
            return [
                sorted(
                    (found[e] for e in s if e in found), key=lambda ent: (-s[ent.id], len(ent.name), ent.id)
                )[: max(0, limit)]
                for s in scored
            ]

        return await self._db.read_tx(run, what="find entities by name words")

    async def search_entities_by_vector(
        self, namespace_id: str, vector: Sequence[float], *, limit: int, min_similarity: float = 0.0
    ) -> list[EntityHit]:
        """Entities by cosine similarity of their embedding (``score`` is the raw cosine)."""
        return (
            await self.search_entities_by_vectors(
                namespace_id, [vector], limit=limit, min_similarity=min_similarity
            )
        )[0]

    async def search_entities_by_vectors(
        self,
        namespace_id: str,
        vectors: Sequence[Sequence[float]],
        *,
        limit: int,
        min_similarity: float = 0.0,
    ) -> list[list[EntityHit]]:
        """``search_entities_by_vector`` for several vectors, in one pass over the matrix."""
        if not vectors:
            return []
        qs = np.stack([query_vector(v, self._dim) for v in vectors])

        def run(conn: sqlite3.Connection) -> list[list[EntityHit]]:
            empty: list[list[EntityHit]] = [[] for _ in vectors]
            row = conn.execute(
                "SELECT graph_version FROM namespaces WHERE namespace_id = ?", (namespace_id,)
            ).fetchone()
            if row is None or limit <= 0:
                return empty
            ids, matrix = self._vectors.matrix(conn, namespace_id, int(row[0]))
            if not ids or matrix.shape[1] != qs.shape[1]:
                return empty
            scores = np.einsum("ij,kj->ki", matrix, qs)  # one memory pass, no BLAS threads
            k = min(limit, len(ids))
            picks: list[list[tuple[str, float]]] = []
            for q, s in zip(qs, scores, strict=True):
                if not np.isfinite(q).all() or not q.any():  # no direction: no cosine, no hit
                    picks.append([])
                    continue
                top = np.argpartition(-s, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
                top = top[np.lexsort((top, -s[top]))]
                picks.append([(ids[i], float(s[i])) for i in top if s[i] >= min_similarity])
            found = fetch_entities(conn, namespace_id, {i for p in picks for i, _ in p}, embeddings=False)
            return [[EntityHit(entity=found[i], score=s) for i, s in p if i in found] for p in picks]

        return await self._db.read_tx(run, what="search entities")

    # -- writes outside a document -----------------------------------------------------------

    async def upsert_graph(
        self,
        namespace_id: str,
        *,
        entities: Sequence[Entity] = (),
        relationships: Sequence[Relationship] = (),
    ) -> None:
        """Insert or merge entities (by id) and relationships (by id) in one transaction.

        Raises:
            NamespaceNotFoundError: the namespace does not exist.
            InvalidInputError: a relationship names an entity that is not stored or given.
        """

        foreign = [e.id for e in entities if e.namespace_id != namespace_id]
        foreign += [r.id for r in relationships if r.namespace_id != namespace_id]
        if foreign:
            raise InvalidInputError(f"Entities/relationships {foreign[:5]} belong to another namespace")

        def run(conn: sqlite3.Connection) -> None:
            require_namespace(conn, namespace_id)
            upsert_entities(conn, namespace_id, list(entities), self._dim)
            upsert_relationships(conn, namespace_id, list(relationships))
            refresh_mention_counts(conn, namespace_id, [e.id for e in entities])
            conn.execute(
                "UPDATE namespaces SET graph_version = graph_version + 1 WHERE namespace_id = ?",
                (namespace_id,),
            )

        if entities or relationships:
            await self._db.transaction(run, what="write graph")

    async def delete_entities(self, namespace_id: str, entity_ids: Sequence[str]) -> int:
        """Delete entities with their mentions and relationships; returns how many went."""

        def run(conn: sqlite3.Connection) -> int:
            gone = delete_entity_rows(conn, namespace_id, list(entity_ids))
            conn.execute(
                "UPDATE namespaces SET graph_version = graph_version + 1 WHERE namespace_id = ?",
                (namespace_id,),
            )
            return gone

        return await self._db.transaction(run, what="delete entities") if entity_ids else 0

    async def delete_relationships(self, namespace_id: str, relationship_ids: Sequence[str]) -> int:
        """Delete relationships by id (their entities stay); returns how many went."""

        def run(conn: sqlite3.Connection) -> int:
            gone = conn.execute(
                f"DELETE FROM relationships WHERE namespace_id = ? AND id IN {IN_JSON}",
                (namespace_id, json_ids(relationship_ids)),
            ).rowcount
            conn.execute(
                "UPDATE namespaces SET graph_version = graph_version + 1 WHERE namespace_id = ?",
                (namespace_id,),
            )
            return int(gone)

        return await self._db.transaction(run, what="delete relationships") if relationship_ids else 0
