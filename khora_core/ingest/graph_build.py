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
* Name vectors come from a batch-scoped :class:`~khora_core.ingest.names.NameVectors`
  (each name embedded at most once per ``remember_batch``; stored entities' embeddings
  reused). The resolver asks only for the names whose vector decides a close-spelling
  merge (:meth:`~khora_core.ingest.resolve.EntityResolver.plan`). Which entities carry a
  vector of their own is ``IngestConfig.entity_vectors``: ``"all"``, or ``"repeated"``,
  the entities mentioned in two chunks or more (a new entity that one chunk mentions gets
  its vector when a later write mentions it again). ``DATE`` entities never get one: the
  resolver never compares dates by similarity, and recall links dates by name.

The work is split so that a caller can embed the names of many documents in one call:
:func:`resolve_names` (the resolution, embedding the few names it needs),
:func:`assemble_graph` (sync: link and assemble; entities without their vector),
:func:`names_to_embed` and :func:`attach_embeddings`. :func:`build_graph` runs the four
for one document.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from khora_core.ingest.extract_base import ChunkExtraction, ExtractedEntity
from khora_core.ingest.keywords import KeywordMatcher
from khora_core.ingest.names import NameVectors
from khora_core.ingest.resolve import (
    KHORA_ENTITY_NAMESPACE,
    EntityResolver,
    Resolution,
    ResolvedEntity,
    normalise_name,
)
from khora_core.models import Entity, Mention, Relationship

__all__ = [
    "EntityVectors",
    "GraphParts",
    "assemble_graph",
    "attach_embeddings",
    "build_graph",
    "extracted_mentions",
    "names_to_embed",
    "relationship_id",
    "resolve_names",
]

#: Which entities carry a name vector (``IngestConfig.entity_vectors``).
EntityVectors = Literal["all", "repeated"]


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
    #: Ids of the entities that get no vector in this write (``entity_vectors="repeated"``).
    vectorless: set[str] = field(default_factory=set)


def _wants_vector(ent: Entity, parts: GraphParts) -> bool:
    return ent.embedding is None and ent.type != "DATE" and ent.id not in parts.vectorless


def names_to_embed(parts: GraphParts) -> list[str]:
    """Names of the entities in ``parts`` that still need a vector."""
    return list(dict.fromkeys(e.name for e in parts.entities if _wants_vector(e, parts)))


def attach_embeddings(parts: GraphParts, names: NameVectors) -> None:
    """Give every entity that needs a vector its name's vector from ``names`` (when held)."""
    for ent in parts.entities:
        if _wants_vector(ent, parts):
            ent.embedding = names.as_list(ent.name)


def extracted_mentions(extractions: Mapping[str, ChunkExtraction]) -> list[ExtractedEntity]:
    """Every entity mention of the chunks whose extraction succeeded."""
    return [e for ex in extractions.values() if not ex.failed for e in ex.entities]


async def resolve_names(
    resolver: EntityResolver,
    extractions: Mapping[str, ChunkExtraction],
    existing: Sequence[Entity],
    names: NameVectors,
) -> Resolution:
    """Resolve a document's mentions against ``existing``, embedding only the names whose
    vector decides a merge (none, for most documents).

    Raises:
        KhoraError: the embedder failed.
    """
    names.seed(existing)
    plan = resolver.plan(extracted_mentions(extractions), existing=existing)
    await names.ensure(plan.wanted)
    return plan.finish(names.mapping(plan.wanted))


async def build_graph(
    *,
    namespace_id: str,
    document_id: str,
    chunk_ids: Sequence[str],
    chunk_texts: Sequence[str],
    extractions: Mapping[str, ChunkExtraction],
    existing: Sequence[Entity],
    resolver: EntityResolver,
    names: NameVectors,
    entity_vectors: EntityVectors = "all",
) -> GraphParts:
    """Resolve, link and assemble one document, embedding the names it needs.

    Args:
        namespace_id: the namespace written to.
        document_id: the new document.
        chunk_ids: all chunk ids of the document, in order.
        chunk_texts: their texts.
        extractions: extraction results of the core chunks, by chunk id.
        existing: stored entities whose name or alias matched a candidate name.
        resolver: merges mentions into entities.
        names: the name-vector cache (embeds what it does not hold).
        entity_vectors: which entities get a vector (see the module docstring).

    Raises:
        KhoraError: the embedder failed.
    """
    parts = assemble_graph(
        namespace_id=namespace_id,
        document_id=document_id,
        chunk_ids=chunk_ids,
        chunk_texts=chunk_texts,
        extractions=extractions,
        existing=existing,
        resolution=await resolve_names(resolver, extractions, existing, names),
        entity_vectors=entity_vectors,
    )
    await names.ensure(names_to_embed(parts))
    attach_embeddings(parts, names)
    return parts


def assemble_graph(
    *,
    namespace_id: str,
    document_id: str,
    chunk_ids: Sequence[str],
    chunk_texts: Sequence[str],
    extractions: Mapping[str, ChunkExtraction],
    existing: Sequence[Entity],
    resolution: Resolution,
    entity_vectors: EntityVectors = "all",
) -> GraphParts:
    """Link and assemble (see the module docstring); no I/O.

    Entities come back without a vector unless a stored entity already had one; see
    :func:`names_to_embed` and :func:`attach_embeddings`.

    Args:
        resolution: the document's mentions resolved against ``existing``
            (:func:`resolve_names`).
        (others: see :func:`build_graph`)
    """
    targets, records = _link_targets(resolution, existing, namespace_id)
    resolved_ids: dict[str, str | None] = {}

    def resolved_id(name: str) -> str | None:
        """The id of the entity an extracted name resolved to (worked out once per name)."""
        if name not in resolved_ids:
            resolved = resolution.lookup(name)
            resolved_ids[name] = resolved.id(namespace_id) if resolved is not None else None
        return resolved_ids[name]

    per_chunk = _chunk_mentions(chunk_ids, chunk_texts, extractions, targets, resolved_id)
    totals: Counter[str] = Counter()
    mention_rows = []
    for cid, counts in per_chunk.items():
        for eid, n in counts.items():
            totals[eid] += n
            mention_rows.append(Mention(entity_id=eid, chunk_id=cid, document_id=document_id, count=n))
    entities = _mentioned_entities(records, totals, namespace_id)
    relationships = _relationships(chunk_ids, extractions, resolved_id, namespace_id, document_id)
    vectorless: set[str] = set()
    if entity_vectors == "repeated":
        chunks_of = Counter(eid for counts in per_chunk.values() for eid in counts)
        # Mentioned before (stored, or earlier in the batch), or here in two chunks: repeated.
        vectorless = {e.id for e in entities if records[e.id][1] is None and chunks_of[e.id] < 2}
    return GraphParts(
        entities=entities,
        mentions=mention_rows,
        relationships=relationships,
        vectorless=vectorless,
    )


#: A linked entity: its resolved cluster (None for a stored entity the document only names)
#: and its stored version (None for a new one).
_Record = tuple[ResolvedEntity | None, Entity | None]


def _link_targets(
    resolution: Resolution, existing: Sequence[Entity], namespace_id: str
) -> tuple[dict[str, str], dict[str, _Record]]:
    """Every name that can point at an entity, with the entity's id (resolved clusters
    first, then stored entities), and each entity's record by id."""
    targets: dict[str, str] = {}
    records: dict[str, _Record] = {}
    for r in resolution.entities:
        eid = r.id(namespace_id)
        records[eid] = (r, r.existing)
        for name in (r.name, *r.aliases, *r.surface_forms):
            targets.setdefault(name, eid)
    for ent in existing:
        records.setdefault(ent.id, (None, ent))
        for name in (ent.name, *ent.aliases):
            targets.setdefault(name, ent.id)
    return targets, records


def _chunk_mentions(
    chunk_ids: Sequence[str],
    chunk_texts: Sequence[str],
    extractions: Mapping[str, ChunkExtraction],
    targets: Mapping[str, str],
    resolved_id: Callable[[str], str | None],
) -> dict[str, Counter[str]]:
    """Mentions per entity id in each chunk: the keyword matches of every known name, and
    at least one for each entity extracted from the chunk."""
    matcher = KeywordMatcher(n for n in targets if len(normalise_name(n)) >= 2)
    per_chunk: dict[str, Counter[str]] = {}
    for cid, text in zip(chunk_ids, chunk_texts, strict=True):
        counts: Counter[str] = Counter()
        for name, n in matcher.counts(text).items():
            counts[targets[name]] += n
        extraction = extractions.get(cid)
        if extraction is not None and not extraction.failed:
            for mention in extraction.entities:
                eid = resolved_id(mention.name)
                if eid is not None:
                    counts[eid] = max(counts[eid], 1)
        if counts:
            per_chunk[cid] = counts
    return per_chunk


def _mentioned_entities(
    records: Mapping[str, _Record], totals: Counter[str], namespace_id: str
) -> list[Entity]:
    """The entities the document mentions, with its mention count (a stored entity keeps
    its embedding)."""
    entities = []
    for eid, (resolved, stored) in records.items():
        if totals[eid] == 0:
            continue
        if resolved is not None:
            entities.append(
                Entity(
                    id=eid,
                    namespace_id=namespace_id,
                    name=resolved.name,
                    type=resolved.type,
                    aliases=resolved.aliases,
                    description=resolved.description,
                    embedding=stored.embedding if stored is not None else None,
                    mention_count=totals[eid],
                )
            )
        elif stored is not None:
            entities.append(stored.model_copy(update={"mention_count": totals[eid]}))
    return entities


def _relationships(
    chunk_ids: Sequence[str],
    extractions: Mapping[str, ChunkExtraction],
    resolved_id: Callable[[str], str | None],
    namespace_id: str,
    document_id: str,
) -> list[Relationship]:
    """The extracted relations between resolved entities; a repeat adds 1 to the weight."""
    relationships: dict[str, Relationship] = {}
    for cid in chunk_ids:
        extraction = extractions.get(cid)
        if extraction is None or extraction.failed:
            continue
        for rel in extraction.relations:
            sid, tid = resolved_id(rel.source), resolved_id(rel.target)
            if sid is None or tid is None or sid == tid:
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
    return list(relationships.values())
