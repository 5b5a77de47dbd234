"""``GraphStore`` on Neo4j 5: entity and chunk nodes, ``MENTIONED_IN``, ``RELATES``, ``AT_TIME``.

Every query is parameterised and names the namespace in each ``MATCH``; relationship types
are a property (``RELATES {type}``), so user text never becomes Cypher text. Statements
run through ``sessions.Sessions``, which translates driver errors (``errors.py``); their
Cypher is in ``lookups.py``, ``search.py``, ``entity_vectors.py`` and ``write.py``.
Traversals (walks, the chunks entities reach, the graph around chunks) come from
``Neo4jTraversal`` (``graph_traversal.py``). Point lookups (``get_entity``,
``get_entities``, ``find_entities_by_name``) return entity embeddings; searches, listings
and traversals leave ``Entity.embedding`` as ``None`` to stay light.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import neo4j

from khora_core.models import Entity, Relationship, WriteBatch
from khora_core.storage.neo4j import write
from khora_core.storage.neo4j.entity_vectors import EntityCounts, search_entity_vectors
from khora_core.storage.neo4j.errors import translated
from khora_core.storage.neo4j.graph_traversal import Neo4jTraversal
from khora_core.storage.neo4j.lookups import (
    COUNT_ENTITIES,
    COUNT_RELATIONSHIPS,
    FIND_BY_NAME,
    FIND_BY_WORDS,
    GRAPH_DOCUMENT_IDS,
    LIST_ENTITIES,
)
from khora_core.storage.neo4j.records import (
    entity_from_props,
    fold,
    present,
)
from khora_core.storage.neo4j.schema import NAME_WORDS_INDEX, ensure_schema
from khora_core.storage.neo4j.search import (
    GET_ENTITIES,
)
from khora_core.storage.neo4j.sessions import Sessions
from khora_core.storage.protocols import EntityHit
from khora_core.storage.words import name_words

__all__ = ["Neo4jGraphStore"]

_NAMESPACE_LABELS = ("Chunk", "Entity", "EntityAlias", "TimeNode")
_DELETE_SLICE = 5000


class Neo4jGraphStore(Neo4jTraversal):
    """The graph half of the ``postgres`` stack, on Neo4j 5 (Community or Enterprise).

    Construction does no I/O; call ``await ensure_schema()`` once before use (the queries
    rely on its constraints, indexes and vector index).

    Args:
        driver: an open ``neo4j.AsyncDriver`` (see ``open_driver``); the caller owns and
            closes it.
        database: the Neo4j database holding the graph.
        embedding_dim: dimension of entity embeddings (the vector index is built for it).
    """

    def __init__(
        self, driver: neo4j.AsyncDriver, *, database: str = "neo4j", embedding_dim: int = 384
    ) -> None:
        self._driver = driver
        self._database = database
        self._db = Sessions(driver, database)
        self._dim = int(embedding_dim)
        #: Sizes entity vector searches; cleared by every write through ``_write``.
        self._entity_counts = EntityCounts()
        # One write transaction at a time per store: concurrent writes that share entities
        # deadlocked on Neo4j's node and relationship-group locks even with sorted rows
        # (each deadlock costs a retry after a ~1 s back-off; a forget beside eight writers
        # ran out of the driver's retry time), and one server gains little from parallel
        # writes anyway. Made per event loop (a lock belongs to one).
        self._write_lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    async def _write(self, work: Any, *args: Any) -> Any:
        """``work(tx, *args)`` in one managed write transaction, one at a time per store; the
        entity counts are stale after it."""
        loop = asyncio.get_running_loop()
        if self._write_lock is None or self._write_lock[0] is not loop:
            self._write_lock = (loop, asyncio.Lock())
        async with self._write_lock[1]:
            try:
                return await self._db.write(work, *args)
            finally:
                self._entity_counts.clear()

    # -- schema and maintenance --------------------------------------------------------------

    async def ensure_schema(self) -> None:
        """Create the constraints and indexes (idempotent) and wait for them to be online.

        Raises:
            ConfigError: the vector index exists for another embedding dimension.
            StorageUnavailableError: Neo4j cannot be reached.
        """
        async with translated():
            await ensure_schema(self._driver, database=self._database, embedding_dim=self._dim)

    async def write_batch(self, namespace_id: str, batch: WriteBatch) -> None:
        """Land the graph part of ``batch`` in one transaction (replaced documents removed first).

        Calls on one store run one at a time (see ``__init__``).

        Raises:
            InvalidInputError: a mention or relationship names an unknown entity or chunk,
                or an embedding has the wrong dimension; nothing was written.
        """
        await self.write_batches(namespace_id, [batch])

    async def write_batches(self, namespace_id: str, batches: Sequence[WriteBatch]) -> None:
        """:meth:`write_batch` for several batches in one transaction (all or none), with one
        statement per kind of row instead of one per batch."""
        await self._write(write.write_batches_tx, namespace_id, list(batches), self._dim)

    async def delete_document(self, namespace_id: str, document_id: str) -> bool:
        """Remove a document's chunks, links, relationships, orphaned entities and empty
        time nodes; returns whether the graph held anything of it."""
        return await self._write(write.delete_document_tx, namespace_id, document_id)

    async def delete_namespace(self, namespace_id: str) -> bool:
        """Remove every node of the namespace (with its relationships); returns whether any existed."""
        removed = 0
        # Relationships go first, in slices: the nodes of one slice can carry millions of them
        # (popular entities), more than one transaction may hold. DETACH DELETE of 5,000
        # nodes of a 30,000-chunk namespace failed with MemoryPoolOutOfMemoryError at
        # Neo4j's dbms.memory.transaction.total.max (issue #38, benchmarks/scale.py).
        for label in _NAMESPACE_LABELS:
            # The label comes from the fixed tuple above, never from the caller.
            edges = (
                f"MATCH (n:{label} {{namespace_id: $ns}})-[r]->() WITH r LIMIT $size "
                "DELETE r RETURN count(*) AS n"
            )
            while await self._write(self._delete_slice, edges, namespace_id, _DELETE_SLICE * 4) > 0:
                pass
        for label in _NAMESPACE_LABELS:
            nodes = (
                f"MATCH (n:{label} {{namespace_id: $ns}}) WITH n LIMIT $size "
                "DETACH DELETE n RETURN count(*) AS n"
            )
            while (gone := await self._write(self._delete_slice, nodes, namespace_id, _DELETE_SLICE)) > 0:
                removed += gone
        return removed > 0

    @staticmethod
    async def _delete_slice(
        tx: neo4j.AsyncManagedTransaction, query: str, namespace_id: str, size: int
    ) -> int:
        record = await (await tx.run(query, {"ns": namespace_id, "size": size})).single()
        return int(record["n"]) if record else 0

    async def count_entities(self, namespace_id: str) -> int:
        rows = await self._db.fetch(COUNT_ENTITIES, ns=namespace_id)
        return int(rows[0]["n"]) if rows else 0

    async def document_ids(self, namespace_id: str) -> set[str]:
        """The ids of the documents whose chunks the graph holds."""
        rows = await self._db.fetch(GRAPH_DOCUMENT_IDS, ns=namespace_id)
        return {str(r["d"]) for r in rows if r["d"] is not None}

    async def count_relationships(self, namespace_id: str) -> int:
        rows = await self._db.fetch(COUNT_RELATIONSHIPS, ns=namespace_id)
        return int(rows[0]["n"]) if rows else 0

    # -- entities ----------------------------------------------------------------------------

    async def get_entity(self, namespace_id: str, entity_id: str) -> Entity | None:
        found = await self.get_entities(namespace_id, [entity_id])
        return found[0] if found else None

    async def get_entities(self, namespace_id: str, entity_ids: Sequence[str]) -> list[Entity]:
        ids = list(dict.fromkeys(entity_ids))
        if not ids:
            return []
        rows = await self._db.fetch_rows(GET_ENTITIES, ns=namespace_id, ids=ids)
        found = {
            r["e"]["id"]: entity_from_props(r["e"], with_embedding=True) for r in rows if present(r["e"])
        }
        return [found[i] for i in ids if i in found]

    async def list_entities(
        self, namespace_id: str, *, offset: int = 0, limit: int = 100, type: str | None = None
    ) -> list[Entity]:
        """Entities by mention count (most mentioned first), then name."""
        rows = await self._db.fetch_rows(
            LIST_ENTITIES, ns=namespace_id, type=type, offset=max(0, offset), limit=max(0, limit)
        )
        return [entity_from_props(r["e"]) for r in rows if present(r["e"])]

    async def find_entities_by_name(self, namespace_id: str, names: Sequence[str]) -> list[Entity]:
        """Exact, case-insensitive matches on name or alias."""
        keys = sorted({fold(n) for n in names if n and n.strip()})
        if not keys:
            return []
        rows = await self._db.fetch_rows(FIND_BY_NAME, ns=namespace_id, keys=keys)
        found = {
            r["e"]["id"]: entity_from_props(r["e"], with_embedding=True) for r in rows if present(r["e"])
        }
        return sorted(found.values(), key=lambda e: (-e.mention_count, e.id))

    async def find_entities_by_words(
        self, namespace_id: str, texts: Sequence[str], *, limit: int
    ) -> list[list[Entity]]:
        """For each text, up to ``limit`` entities whose name shares a word with it
        (:func:`~khora_core.storage.words.name_words`), best first by the full-text
        index's BM25 score (rare words and short names first).

        The words (letters and digits only) are each quoted and OR-ed into a Lucene query
        that is passed as a parameter: no text reaches Cypher or the query syntax.
        """
        queries = [" OR ".join(f'"{w}"' for w in name_words(t)) for t in texts]
        asked = [pos for pos, q in enumerate(queries) if q]  # a text without words asks nothing
        out: list[list[Entity]] = [[] for _ in texts]
        if not asked or limit <= 0:
            return out
        rows = await self._db.fetch(
            FIND_BY_WORDS,
            ns=namespace_id,
            queries=[queries[pos] for pos in asked],
            index=NAME_WORDS_INDEX,
            k=int(limit),
        )
        for r in rows:
            out[asked[r["i"]]] = [entity_from_props(e) for e in r["entities"] if present(e)]
        return out

    async def search_entities_by_vector(
        self, namespace_id: str, vector: Sequence[float], *, limit: int, min_similarity: float = 0.0
    ) -> list[EntityHit]:
        """Entities by cosine similarity of their embedding (``score`` is the raw cosine).

        Uses the native vector index, over-fetching and keeping this namespace's hits
        (``entity_vectors.py``).

        Raises:
            InvalidInputError: ``vector`` has the wrong dimension.
        """
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
        """``search_entities_by_vector`` for several vectors, in one statement when the
        index holds enough of the namespace's entities (``entity_vectors.py``)."""
        if not vectors:
            return []
        return await search_entity_vectors(
            self._db, self._entity_counts, namespace_id, vectors, limit, min_similarity, self._dim
        )

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
            InvalidInputError: a relationship names an entity that is not stored or given,
                or an embedding has the wrong dimension.
        """
        if not entities and not relationships:
            return

        async def work(tx: neo4j.AsyncManagedTransaction) -> None:
            await write.merge_entities_tx(tx, namespace_id, entities, self._dim)
            await write.merge_relationships_tx(tx, namespace_id, relationships)
            await write.refresh_mention_counts_tx(tx, namespace_id, [e.id for e in entities])

        await self._write(work)

    async def delete_entities(self, namespace_id: str, entity_ids: Sequence[str]) -> int:
        """Delete entities with their mentions and relationships; returns how many went."""
        return await self._write(write.delete_entities_tx, namespace_id, list(entity_ids))

    async def delete_relationships(self, namespace_id: str, relationship_ids: Sequence[str]) -> int:
        """Delete relationships by id (their entities stay); returns how many went."""
        return await self._write(write.delete_relationships_tx, namespace_id, list(relationship_ids))
