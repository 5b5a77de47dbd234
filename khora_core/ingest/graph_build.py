"""Turn one document's extractions into graph records: entities, mentions, relationships.

* Entities: the resolver's clusters (ids from :func:`~khora_core.ingest.resolve.entity_id`,
  or the stored id when a cluster extends a stored entity), plus stored entities that only
  keyword-linked chunks mention. ``mention_count`` is the number of mentions *this
  document* contributes; the storage layer adds it to what is stored.
* Mentions: every chunk (core or not) is scanned for every known name and alias
  (:class:`~khora_core.ingest.keywords.KeywordMatcher`); an entity extracted from a chunk
  counts at least once there even if its name is not found verbatim.
* Relationships: deterministic ids (uuid5 of namespace, source, type, target, document),
  so the same fact stated twice in one document is one edge with ``weight`` = times seen.
* Entity names are embedded in one batch (for the entity vector channel) and the same
  vectors feed the resolver's embedding check.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from khora_core.embedding.base import Embedder
from khora_core.ingest.extract_base import ChunkExtraction
from khora_core.ingest.keywords import KeywordMatcher
from khora_core.ingest.resolve import KHORA_ENTITY_NAMESPACE, EntityResolver, ResolvedEntity, normalise_name
from khora_core.models import Entity, Mention, Relationship

__all__ = ["GraphParts", "build_graph", "relationship_id"]


def relationship_id(
    namespace_id: str, source_id: str, rel_type: str, target_id: str, document_id: str
) -> str:
    """Deterministic relationship id: uuid5 of namespace, endpoints, type and document."""
    key = "\x1f".join((namespace_id, source_id, rel_type, target_id, document_id))
    return str(uuid.uuid5(KHORA_ENTITY_NAMESPACE, key))


@dataclass
class GraphParts:
    """The graph records of one document."""

    entities: list[Entity] = field(default_factory=list)
    mentions: list[Mention] = field(default_factory=list)
    relationships: list[Relationship] = field(default_factory=list)


async def build_graph(
    *,
    namespace_id: str,
    document_id: str,
    chunk_ids: Sequence[str],
    chunk_texts: Sequence[str],
    extractions: Mapping[str, ChunkExtraction],
    existing: Sequence[Entity],
    resolver: EntityResolver,
    embedder: Embedder,
) -> GraphParts:
    """Resolve, link and assemble (see the module docstring).

    Args:
        namespace_id: the namespace written to.
        document_id: the new document.
        chunk_ids: all chunk ids of the document, in order.
        chunk_texts: their texts.
        extractions: extraction results of the core chunks, by chunk id.
        existing: stored entities whose name or alias matched a candidate name.
        resolver: merges mentions into entities.
        embedder: embeds entity names.
    """
    mentions = [e for ex in extractions.values() if not ex.failed for e in ex.entities]
    surface = list(dict.fromkeys(m.name for m in mentions))
    vectors: dict[str, list[float]] = {}
    if surface:
        vectors = dict(zip(surface, await embedder.embed_documents(surface), strict=True))
    resolution = resolver.resolve(mentions, existing=existing, embeddings=vectors)

    # Every name that can point at an entity: resolved clusters first, then stored entities.
    targets: dict[str, str] = {}
    records: dict[str, tuple[ResolvedEntity | None, Entity | None]] = {}
    for r in resolution.entities:
        eid = r.id(namespace_id)
        records[eid] = (r, r.existing)
        for name in (r.name, *r.aliases, *r.surface_forms):
            targets.setdefault(name, eid)
    for ent in existing:
        records.setdefault(ent.id, (None, ent))
        for name in (ent.name, *ent.aliases):
            targets.setdefault(name, ent.id)
    matcher = KeywordMatcher(n for n in targets if len(normalise_name(n)) >= 2)

    per_chunk: dict[str, Counter[str]] = {}
    for cid, text in zip(chunk_ids, chunk_texts, strict=True):
        counts: Counter[str] = Counter()
        for name, n in matcher.counts(text).items():
            counts[targets[name]] += n
        extraction = extractions.get(cid)
        if extraction is not None and not extraction.failed:
            for mention in extraction.entities:
                resolved = resolution.lookup(mention.name)
                if resolved is not None:
                    eid = resolved.id(namespace_id)
                    counts[eid] = max(counts[eid], 1)
        if counts:
            per_chunk[cid] = counts

    totals: Counter[str] = Counter()
    mention_rows = []
    for cid, counts in per_chunk.items():
        for eid, n in counts.items():
            totals[eid] += n
            mention_rows.append(Mention(entity_id=eid, chunk_id=cid, document_id=document_id, count=n))

    # Name vectors: reuse the surface embeddings, embed the rest (canonical or stored names) once.
    missing = []
    for eid, (resolved, stored) in records.items():
        name = resolved.name if resolved is not None else stored.name if stored is not None else ""
        has_vector = name in vectors or (stored is not None and stored.embedding)
        if totals[eid] > 0 and name and not has_vector:
            missing.append(name)
    missing = list(dict.fromkeys(missing))
    if missing:
        vectors.update(zip(missing, await embedder.embed_documents(missing), strict=True))

    entities = []
    for eid, (resolved, stored) in records.items():
        if totals[eid] == 0:
            continue
        if resolved is not None:
            embedding = vectors.get(resolved.name) or (stored.embedding if stored else None)
            entities.append(
                Entity(
                    id=eid,
                    namespace_id=namespace_id,
                    name=resolved.name,
                    type=resolved.type,
                    aliases=resolved.aliases,
                    description=resolved.description,
                    embedding=embedding,
                    mention_count=totals[eid],
                )
            )
        elif stored is not None:
            entities.append(
                stored.model_copy(
                    update={
                        "mention_count": totals[eid],
                        "embedding": stored.embedding or vectors.get(stored.name),
                    }
                )
            )

    relationships: dict[str, Relationship] = {}
    for cid in chunk_ids:
        extraction = extractions.get(cid)
        if extraction is None or extraction.failed:
            continue
        for rel in extraction.relations:
            src, tgt = resolution.lookup(rel.source), resolution.lookup(rel.target)
            if src is None or tgt is None:
                continue
            sid, tid = src.id(namespace_id), tgt.id(namespace_id)
            if sid == tid:
                continue
            rid = relationship_id(namespace_id, sid, rel.type, tid, document_id)
            if rid in relationships:
                relationships[rid].weight += 1.0
                continue
            relationships[rid] = Relationship(
                id=rid,
                namespace_id=namespace_id,
                source_id=sid,
                target_id=tid,
                type=rel.type,
                description=rel.description,
                weight=1.0,
                document_id=document_id,
                chunk_id=cid,
            )
    return GraphParts(entities=entities, mentions=mention_rows, relationships=list(relationships.values()))
