"""The Neo4j graph store's traversals: walks from entities, the chunks they reach, and the
graph around a set of chunks (the ``GraphStore`` methods recall reads through).

``Neo4jGraphStore`` takes these methods from :class:`Neo4jTraversal`; they run through the
store's ``sessions.Sessions`` (``self._db``), their Cypher is in ``lookups.py``, ``search.py``
and ``walk.py``, and they leave ``Entity.embedding`` as ``None`` to stay light.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from khora_core.models import Entity, Relationship
from khora_core.storage.neo4j.lookups import (
    CHUNK_GRAPH,
    CHUNK_MENTIONS,
    DOCUMENTS_FOR_ENTITIES,
    ENTITIES_FOR_CHUNKS,
    ENTITY_REFS_FOR_CHUNKS,
    LIST_RELATIONSHIPS,
    LIST_RELATIONSHIPS_OF,
    RELATIONSHIPS_AMONG_PER_PAIR,
    TIME_NODES,
)
from khora_core.storage.neo4j.mention_rank import read_rank_suffix
from khora_core.storage.neo4j.pair_rank import DENSE_DEGREE
from khora_core.storage.neo4j.records import (
    entity_from_props,
    entity_ref,
    present,
    present_edge,
    relationship_from_props,
)
from khora_core.storage.neo4j.search import (
    chunks_for_entities_tx,
    chunks_for_entity_groups_tx,
    neighbourhood_tx,
)
from khora_core.storage.neo4j.sessions import Sessions
from khora_core.storage.neo4j.walk import walk_distances
from khora_core.storage.protocols import ChunkGraph, EntityRef, Neighbourhood, SearchPage

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter

__all__ = ["Neo4jTraversal"]


class Neo4jTraversal:
    """``GraphStore``'s traversals on Neo4j, for a store that keeps its ``Sessions`` in ``_db``."""

    _db: Sessions

    async def neighbourhood(
        self,
        namespace_id: str,
        entity_ids: Sequence[str],
        *,
        depth: int,
        max_fanout: int = 50,
        relationship_types: Sequence[str] | None = None,
        max_entities: int | None = None,
        max_mentions: int | None = None,
    ) -> Neighbourhood:
        """Entities within ``depth`` (at most 4) ``RELATES`` hops of the seeds, either direction.

        From each entity at most ``max_fanout`` edges are followed, heaviest first;
        relationship types match exactly; with ``max_entities``, the walk stops once that
        many entities beyond the seeds are reached; entities mentioned more than
        ``max_mentions`` times are not walked through.
        """
        types = list(relationship_types) if relationship_types is not None else None
        seeds = list(dict.fromkeys(entity_ids))
        return await self._db.read(
            neighbourhood_tx, namespace_id, seeds, depth, max_fanout, types, max_entities, max_mentions
        )

    async def walk_distances(
        self,
        namespace_id: str,
        entity_ids: Sequence[str],
        *,
        depth: int,
        max_fanout: int = 50,
        relationship_types: Sequence[str] | None = None,
        max_entities: int | None = None,
        max_mentions: int | None = None,
    ) -> dict[str, int]:
        """``neighbourhood(...).distance`` without reading the entities or the edges: one
        auto-commit statement per hop (``walk.py``)."""
        return await walk_distances(
            self._db,
            namespace_id,
            entity_ids,
            depth=depth,
            max_fanout=max_fanout,
            types=list(relationship_types) if relationship_types is not None else None,
            max_entities=max_entities,
            max_mentions=max_mentions,
        )

    async def chunks_for_entities(
        self,
        namespace_id: str,
        entity_ids: Sequence[str],
        *,
        limit: int,
        filter: RecallFilter | None = None,
        temporal_sort: bool = False,
    ) -> SearchPage:
        """Chunks that mention the entities, by total mentions (``temporal_sort``: newest
        ``occurred_at`` first, undated last). ``score`` is the mention count. System-key
        predicates are pushed into the Cypher ``WHERE``; the whole filter is re-checked in
        memory."""
        ids = list(dict.fromkeys(entity_ids))
        return await self._db.read(chunks_for_entities_tx, namespace_id, ids, limit, filter, temporal_sort)

    async def chunks_for_entity_groups(
        self,
        namespace_id: str,
        groups: Sequence[Sequence[str]],
        *,
        limit: int,
        filter: RecallFilter | None = None,
        temporal_sort: bool = False,
    ) -> list[SearchPage]:
        """``chunks_for_entities`` for each group of entities, in one read transaction whose
        first statement pages every group."""
        ids = [list(dict.fromkeys(group)) for group in groups]
        if not ids:
            return []
        return await self._db.read(
            chunks_for_entity_groups_tx, namespace_id, ids, limit, filter, temporal_sort
        )

    async def chunk_mentions(
        self, namespace_id: str, entity_ids: Sequence[str], *, per_entity: int
    ) -> dict[str, dict[str, int]]:
        """For each entity, its ``per_entity`` most-mentioning chunks ``{chunk id: count}``."""
        ids = list(dict.fromkeys(entity_ids))
        if not ids or per_entity <= 0:
            return {}
        rows = await self._db.fetch_rows(CHUNK_MENTIONS, ns=namespace_id, ids=ids, per=int(per_entity))
        return {r["eid"]: dict(map(read_rank_suffix, r["top"])) for r in rows if r["top"]}

    async def entities_for_chunks(
        self, namespace_id: str, chunk_ids: Sequence[str]
    ) -> dict[str, list[Entity]]:
        """Entities mentioned in each chunk (most mentions first); chunks with none are absent."""
        if not chunk_ids:
            return {}
        rows = await self._db.fetch_rows(ENTITIES_FOR_CHUNKS, ns=namespace_id, ids=list(set(chunk_ids)))
        return {r["chunk_id"]: [entity_from_props(e) for e in r["entities"] if present(e)] for r in rows}

    async def entity_refs_for_chunks(
        self, namespace_id: str, chunk_ids: Sequence[str]
    ) -> dict[str, list[EntityRef]]:
        """``entities_for_chunks`` as ``EntityRef``s, in the same order."""
        if not chunk_ids:
            return {}
        rows = await self._db.fetch_rows(ENTITY_REFS_FOR_CHUNKS, ns=namespace_id, ids=list(set(chunk_ids)))
        return {r["chunk_id"]: _refs(r["entities"]) for r in rows}

    async def relationships_among(
        self,
        namespace_id: str,
        entity_ids: Sequence[str],
        *,
        limit: int = 100,
        per_pair: int | None = None,
    ) -> list[Relationship]:
        """Relationships with both ends among ``entity_ids``, heaviest first (ties by id),
        at most ``per_pair`` between one ordered pair when given."""
        if not entity_ids:
            return []
        limit = max(0, int(limit))
        rows = await self._db.fetch_rows(
            RELATIONSHIPS_AMONG_PER_PAIR,
            ns=namespace_id,
            ids=list(set(entity_ids)),
            max_relationships=limit,
            per_pair=limit if per_pair is None else max(0, int(per_pair)),  # `limit` per pair caps nothing
            dense=DENSE_DEGREE,
        )
        return [
            relationship_from_props(r["r"], r["source_id"], r["target_id"]) for r in rows if present_edge(r)
        ]

    async def chunk_graph(
        self,
        namespace_id: str,
        chunk_ids: Sequence[str],
        *,
        entity_scores: Mapping[str, float] | None = None,
        max_entities: int = 30,
        max_relationships: int = 100,
        per_pair: int | None = None,
    ) -> ChunkGraph:
        """The chunks' entities, the best ``max_entities`` of them and the relationships
        among those (``GraphStore.chunk_graph``), in one statement."""
        if not chunk_ids:
            return ChunkGraph()
        max_relationships = max(0, int(max_relationships))
        rows = await self._db.fetch_rows(
            CHUNK_GRAPH,
            ns=namespace_id,
            ids=list(set(chunk_ids)),
            scores={str(k): float(v) for k, v in (entity_scores or {}).items()},
            max_entities=max(0, int(max_entities)),
            max_relationships=max_relationships,
            per_pair=max_relationships if per_pair is None else max(0, int(per_pair)),
            dense=DENSE_DEGREE,
        )
        row = rows[0]
        return ChunkGraph(
            chunk_entities={p["chunk_id"]: _refs(p["entities"]) for p in row["chunks"]},
            entities=[entity_from_props(e) for e in row["kept"] if present(e)],
            relationships=[
                relationship_from_props(r["r"], r["source_id"], r["target_id"])
                for r in row["relationships"]
                if present_edge(r)
            ],
        )

    async def documents_for_entities(
        self, namespace_id: str, entity_ids: Sequence[str]
    ) -> dict[str, list[str]]:
        """The documents that mention each entity (sorted ids); entities with none are absent."""
        if not entity_ids:
            return {}
        rows = await self._db.fetch_rows(DOCUMENTS_FOR_ENTITIES, ns=namespace_id, ids=list(set(entity_ids)))
        return {r["id"]: sorted(r["documents"]) for r in rows}

    async def time_nodes_for_chunk(self, namespace_id: str, chunk_id: str) -> list[str]:
        """The ``AT_TIME`` time-node keys (ISO dates, ``YYYY-MM-DD``) of a chunk."""
        rows = await self._db.fetch_rows(TIME_NODES, ns=namespace_id, id=chunk_id)
        return [r["key"] for r in rows]

    async def list_relationships(
        self,
        namespace_id: str,
        *,
        entity_ids: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        limit: int = 1000,
    ) -> list[Relationship]:
        """Relationships touching any of ``entity_ids`` (all when None), optionally by exact type."""
        params: dict[str, Any] = {
            "ns": namespace_id,
            "types": list(types) if types is not None else None,
            "limit": max(0, limit),
        }
        if entity_ids is None:
            rows = await self._db.fetch_rows(LIST_RELATIONSHIPS, **params)
        else:
            rows = await self._db.fetch_rows(LIST_RELATIONSHIPS_OF, ids=list(set(entity_ids)), **params)
        return [
            relationship_from_props(r["r"], r["source_id"], r["target_id"]) for r in rows if present_edge(r)
        ]


def _refs(rows: Sequence[Any]) -> list[EntityRef]:
    """``entity_ref`` over a statement's lists, skipping entities deleted meanwhile."""
    return [ref for ref in map(entity_ref, rows) if ref is not None]
