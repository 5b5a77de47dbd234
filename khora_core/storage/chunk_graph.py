"""Which of a result's entities recall keeps, and the graph read that finds them.

``rank_chunk_entities`` is the rule: an entity named by more of the returned chunks comes
first, then the one the question linked more strongly (``entity_scores``), then the one
mentioned more often in the whole namespace, then by name and id, so that the order is
total and every store gives the same one. ``read_chunk_graph`` applies it over
``entities_for_chunks`` and ``relationships_among``: two reads, which the embedded store
makes in-process; the Neo4j store ranks in the Cypher statement that also reads the
relationships, one round trip instead of two (``neo4j.lookups.CHUNK_GRAPH``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from khora_core.models import Entity
from khora_core.storage.protocols import ChunkGraph, EntityRef

__all__ = ["rank_chunk_entities", "read_chunk_graph"]


def rank_chunk_entities(
    chunk_ids: Sequence[str],
    chunk_entities: Mapping[str, Sequence[Entity]],
    *,
    entity_scores: Mapping[str, float] | None = None,
    limit: int,
) -> list[Entity]:
    """The ``limit`` best entities of the chunks (module docstring)."""
    scores = entity_scores or {}
    seen_in: dict[str, int] = {}
    by_id: dict[str, Entity] = {}
    for cid in dict.fromkeys(chunk_ids):
        for e in {e.id: e for e in chunk_entities.get(cid, ())}.values():
            by_id.setdefault(e.id, e)
            seen_in[e.id] = seen_in.get(e.id, 0) + 1
    ranked = sorted(
        by_id.values(),
        key=lambda e: (-seen_in[e.id], -scores.get(e.id, 0.0), -e.mention_count, e.name, e.id),
    )
    return ranked[: max(0, limit)]


async def read_chunk_graph(
    store: Any,
    namespace_id: str,
    chunk_ids: Sequence[str],
    *,
    entity_scores: Mapping[str, float] | None = None,
    max_entities: int = 30,
    max_relationships: int = 100,
    per_pair: int | None = None,
) -> ChunkGraph:
    """``GraphStore.chunk_graph`` from the store's ``entities_for_chunks`` and
    ``relationships_among``."""
    if not chunk_ids:
        return ChunkGraph()
    chunk_entities = await store.entities_for_chunks(namespace_id, chunk_ids)
    kept = rank_chunk_entities(chunk_ids, chunk_entities, entity_scores=entity_scores, limit=max_entities)
    relationships = (
        await store.relationships_among(
            namespace_id, [e.id for e in kept], limit=max_relationships, per_pair=per_pair
        )
        if kept
        else []
    )
    return ChunkGraph(
        chunk_entities={cid: [EntityRef.of(e) for e in ents] for cid, ents in chunk_entities.items()},
        entities=kept,
        relationships=relationships,
    )
