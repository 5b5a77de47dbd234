"""Building the ``RecallResult``: entities, relationships and the documents they cite.

The producer-enforced invariant: every ``document_id`` referenced by a returned chunk,
entity or relationship appears in ``documents``. Documents are fetched through the
namespace-scoped ``DocumentStore.get_documents`` in batches of at most 1,000 ids, so an id
from another namespace can never resolve; a reference whose document is gone (deleted
between search and fetch) is dropped rather than returned dangling.

An entity's ``document_ids`` in a recall result are the result's documents whose returned
chunks mention it (its full source list is ``Khora.get_entity(..., include_sources=True)``).
The chunks' documents are fetched while the graph is read (``GraphStore.chunk_graph``: the
chunks' entities, the ones kept, and the relationships among those; one round trip on
Neo4j), so the store is visited in at most two sequential steps: that, then the documents
of relationships stated in other documents (on the multi-hop development corpora, nearly
every result has some). Reading the relationships among all of the chunks' entities
instead of the kept ones returns several times more relationships than are kept, and was
slower on PostgreSQL + Neo4j.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from khora_core.models import (
    Chunk,
    Document,
    DocumentProjection,
    EntityProjection,
    RecallChunk,
    RelationshipProjection,
)
from khora_core.storage.protocols import EntityRef, StorageStack

__all__ = ["Assembled", "assemble", "fetch_documents", "project_chunks", "to_document_projection"]

#: ``get_documents`` batch size (ids per call).
DOCUMENT_BATCH = 1000


def to_document_projection(doc: Document) -> DocumentProjection:
    """A stored ``Document`` as recall returns it."""
    return DocumentProjection(**doc.model_dump(exclude={"content_hash"}))


async def fetch_documents(
    stack: StorageStack, namespace_id: str, document_ids: Iterable[str]
) -> dict[str, DocumentProjection]:
    """Fetch documents of ``namespace_id`` by id, in batches of ``DOCUMENT_BATCH``."""
    wanted = list(dict.fromkeys(d for d in document_ids if d))
    found: dict[str, DocumentProjection] = {}
    for start in range(0, len(wanted), DOCUMENT_BATCH):
        batch = wanted[start : start + DOCUMENT_BATCH]
        for doc in await stack.documents.get_documents(namespace_id, batch):
            if doc.namespace_id == namespace_id:
                found[doc.id] = to_document_projection(doc)
    return found


@dataclass
class Assembled:
    chunk_entities: dict[str, list[EntityRef]] = field(default_factory=dict)
    entities: list[EntityProjection] = field(default_factory=list)
    relationships: list[RelationshipProjection] = field(default_factory=list)
    documents: dict[str, DocumentProjection] = field(default_factory=dict)


async def assemble(
    stack: StorageStack,
    namespace_id: str,
    chunks: Sequence[Chunk],
    *,
    entity_scores: dict[str, float] | None = None,
    max_entities: int = 30,
    max_relationships: int = 100,
    per_pair: int | None = None,
) -> Assembled:
    """Entities of the chunks, relationships among them, and every cited document.

    Entities are ordered by how many returned chunks mention them, then by their link
    score, then by their total mention count (``storage.chunk_graph.rank_chunk_entities``);
    at most ``max_entities`` are kept. Relationships are the heaviest among the kept
    entities, at most ``per_pair`` between one ordered pair when given.
    """
    entity_scores = entity_scores or {}
    chunk_ids = [c.id for c in chunks]
    chunk_docs = list(dict.fromkeys(c.document_id for c in chunks))
    if not chunk_ids:
        return Assembled()
    graph, documents = await asyncio.gather(
        stack.graph.chunk_graph(
            namespace_id,
            chunk_ids,
            entity_scores=entity_scores,
            max_entities=max_entities,
            max_relationships=max_relationships,
            per_pair=per_pair,
        ),
        fetch_documents(stack, namespace_id, chunk_docs),
    )
    chunk_entities, ranked, relationships = graph.chunk_entities, graph.entities, graph.relationships
    entity_docs: dict[str, list[str]] = {}
    for chunk in chunks:
        for e in chunk_entities.get(chunk.id, []):
            docs = entity_docs.setdefault(e.id, [])
            if chunk.document_id not in docs:
                docs.append(chunk.document_id)

    more = [r.document_id for r in relationships if r.document_id not in documents]
    if more:
        documents.update(await fetch_documents(stack, namespace_id, more))

    names = {e.id: e.name for e in ranked}
    entities = [
        EntityProjection(
            id=e.id,
            name=e.name,
            type=e.type,
            aliases=list(e.aliases),
            description=e.description,
            mention_count=e.mention_count,
            score=entity_scores.get(e.id),
            document_ids=[d for d in entity_docs.get(e.id, []) if d in documents],
            properties=dict(e.properties),
        )
        for e in ranked
    ]
    rels = [
        RelationshipProjection(
            id=r.id,
            source_id=r.source_id,
            source_name=names.get(r.source_id),
            target_id=r.target_id,
            target_name=names.get(r.target_id),
            type=r.type,
            description=r.description,
            weight=r.weight,
            document_id=r.document_id,
            properties=dict(r.properties),
        )
        for r in relationships
        if r.document_id in documents
    ]
    return Assembled(
        chunk_entities=chunk_entities, entities=entities, relationships=rels, documents=documents
    )


def project_chunks(
    final: Sequence[str],
    cands: Mapping[str, Any],
    rel: Mapping[str, float],
    rerank_scores: Mapping[str, float],
    chunk_entities: Mapping[str, list[EntityRef]],
    qvec: Sequence[float] | None,
) -> list[RecallChunk]:
    """``RecallChunk``s in ``final`` order with non-increasing scores, the top one 1.0.

    ``cands`` maps chunk id to a candidate with ``chunk``, ``scores`` and ``ranks``
    (``ranking.Candidate``).
    """
    out: list[RecallChunk] = []
    running: float | None = None
    for cid in final:
        running = rel[cid] if running is None else min(running, rel[cid])
        out.append(
            _to_recall_chunk(cands[cid], running, rerank_scores.get(cid), chunk_entities.get(cid, []), qvec)
        )
    head = out[0].score if out and out[0].score > 0 else 1.0
    for rc in out:
        rc.score = round(rc.score / head, 6)
    return out


def _to_recall_chunk(
    cand: Any,
    score: float,
    rerank_score: float | None,
    entities: list[EntityRef],
    qvec: Sequence[float] | None,
) -> RecallChunk:
    c: Chunk = cand.chunk
    similarity = cand.scores.get("vector")
    if similarity is None and qvec is not None and c.embedding is not None and len(c.embedding) == len(qvec):
        # A chunk the vector channel did not return: its raw cosine from the stored vector.
        similarity = float(sum(a * b for a, b in zip(c.embedding, qvec, strict=True)))
    return RecallChunk(
        id=c.id,
        document_id=c.document_id,
        content=c.content,
        score=score,
        index=c.index,
        start_char=c.start_char,
        end_char=c.end_char,
        occurred_at=c.occurred_at,
        created_at=c.created_at,
        title=c.title,
        metadata=dict(c.metadata),
        channels=list(cand.scores),
        channel_scores=dict(cand.scores),
        channel_ranks=dict(cand.ranks),
        vector_similarity=similarity,
        rerank_score=rerank_score,
        entity_ids=[e.id for e in entities],
        entity_names=[e.name for e in entities],
    )
