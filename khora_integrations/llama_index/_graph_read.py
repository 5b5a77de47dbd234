"""The read side of ``KhoraPropertyGraphStore``: async functions over an open Khora.

Everything goes through the stack's protocols (``kb.engine.stack``): the graph for
entities and relationships, the document store for documents and chunks. Two things the
protocols do not offer are built here on top of them:

* a *scan* of text-chunk nodes by property (``scan_documents``): ``DocumentStore`` has no
  listing, so the chunk vector index is asked for every chunk of the namespace with the
  properties as a pushed-down ``RecallFilter`` and ``min_similarity=-2`` (every cosine
  passes). Exact on the embedded store; on PostgreSQL it is bounded by the index's fetch
  cap (10,000 chunks per call);
* the ``triplet_source_id`` of an entity: the first document that mentions it, else the
  document its first relationship was learned from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.graph_stores.types import ChunkNode, EntityNode, LabelledNode, Relation, Triplet

from khora_core import Khora
from khora_core.errors import RecallFilterValidationError
from khora_core.filters import RecallFilter
from khora_core.ingest.resolve import entity_id
from khora_core.models import Document, Entity, Relationship
from khora_integrations.llama_index._graph_convert import (
    KHORA_ID_KEY,
    chunk_node_id,
    chunk_to_node,
    document_to_node,
    entity_to_node,
    properties_match,
    relationship_to_relation,
)

__all__ = [
    "MAX_SCAN",
    "GraphContext",
    "all_entities",
    "chunk_nodes_by_id",
    "entity_nodes",
    "get_nodes",
    "get_triplets",
    "rel_map",
    "resolve_documents",
    "resolve_entities",
    "scan_documents",
    "triplets",
]

_PAGE = 500
#: Most entities read when the store lists or scans the whole graph (``get()``, schema).
MAX_SCAN = 20_000


@dataclass
class GraphContext:
    """An open Khora and the namespace a store works in, with per-store memory."""

    kb: Khora
    namespace: str
    #: LlamaIndex node id -> Khora document id, for chunk nodes whose text was already
    #: stored under another id (Khora keeps one copy of the same content).
    aliases: dict[str, str] = field(default_factory=dict)

    @property
    def stack(self) -> Any:
        return self.kb.engine.stack

    @property
    def graph(self) -> Any:
        return self.kb.engine.stack.graph

    @property
    def documents(self) -> Any:
        return self.kb.engine.stack.documents

    @property
    def embedder(self) -> Any:
        return self.kb.engine.embedder


def _unique(items: Iterable[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for item in items:
        seen.setdefault(item.id, item)
    return list(seen.values())


async def resolve_entities(ctx: GraphContext, keys: Sequence[str]) -> list[Entity]:
    """Entities named by Khora id, by name (deterministic id) or by name/alias match."""
    keys = [k for k in dict.fromkeys(keys) if isinstance(k, str) and k.strip()]
    if not keys:
        return []
    ns = ctx.namespace
    by_id = await ctx.graph.get_entities(ns, list(dict.fromkeys([*keys, *(entity_id(ns, k) for k in keys)])))
    by_name = await ctx.graph.find_entities_by_name(ns, keys)
    return _unique([*by_id, *by_name])


async def resolve_documents(ctx: GraphContext, keys: Sequence[str]) -> list[Document]:
    """Documents named by ``external_id`` (LlamaIndex node ids), by Khora id or by alias."""
    keys = [k for k in dict.fromkeys(keys) if isinstance(k, str) and k]
    if not keys:
        return []
    found: list[Document] = []
    for key in keys:
        found.extend(await ctx.documents.find_documents_by_external_id(ctx.namespace, key))
    direct = [*keys, *(ctx.aliases[k] for k in keys if k in ctx.aliases)]
    found.extend(await ctx.documents.get_documents(ctx.namespace, direct))
    return _unique(found)


async def all_entities(ctx: GraphContext) -> list[Entity]:
    out: list[Entity] = []
    while len(out) < MAX_SCAN:
        page = await ctx.graph.list_entities(ctx.namespace, offset=len(out), limit=_PAGE)
        out.extend(page)
        if len(page) < _PAGE:
            break
    return out


async def source_nodes(ctx: GraphContext, document_ids: Iterable[str]) -> dict[str, str]:
    """Khora document id -> the ChunkNode id that stands for it (for ``triplet_source_id``)."""
    ids = [d for d in dict.fromkeys(document_ids) if d]
    docs = await ctx.documents.get_documents(ctx.namespace, ids) if ids else []
    return {d.id: chunk_node_id(d) for d in docs}


async def entity_nodes(ctx: GraphContext, entities: Sequence[Entity]) -> list[EntityNode]:
    """``EntityNode``s with their ``triplet_source_id`` when Khora knows where they came from."""
    ids = [e.id for e in entities]
    first_doc: dict[str, str] = {}
    if ids:
        for eid, docs in (await ctx.graph.documents_for_entities(ctx.namespace, ids)).items():
            if docs:
                first_doc[eid] = docs[0]
        missing = [i for i in ids if i not in first_doc]
        if missing:
            for rel in await ctx.graph.list_relationships(
                ctx.namespace, entity_ids=missing, limit=len(missing) * 4
            ):
                for end in (rel.source_id, rel.target_id):
                    if end in missing:
                        first_doc.setdefault(end, rel.document_id)
    sources = await source_nodes(ctx, first_doc.values())
    return [entity_to_node(e, sources.get(first_doc.get(e.id, ""))) for e in entities]


def _pushable(properties: Mapping[str, Any]) -> RecallFilter | None:
    """The properties Khora can push into a chunk search, as a filter (the rest is re-checked)."""
    parts = []
    for key, value in properties.items():
        if value is None or isinstance(value, (list, dict)) or not isinstance(value, (str, int, float)):
            continue
        try:
            parts.append(RecallFilter.parse({f"metadata.{key}": {"$eq": value}}))
        except RecallFilterValidationError:
            continue  # not a valid metadata path: checked in memory only
    if not parts:
        return None
    combined = parts[0]
    for part in parts[1:]:
        combined = combined & part
    return combined


async def scan_documents(ctx: GraphContext, properties: Mapping[str, Any] | None) -> list[ChunkNode]:
    """Every document of the namespace whose ChunkNode properties match (see the module doc)."""
    stats = await ctx.stack.stats(ctx.namespace)
    if not stats.chunks:
        return []
    dim = int(ctx.embedder.dimension)
    probe = [1.0] + [0.0] * (dim - 1)
    page = await ctx.stack.vectors.search(
        ctx.namespace, probe, limit=int(stats.chunks), filter=_pushable(properties or {}), min_similarity=-2.0
    )
    doc_ids = list(dict.fromkeys(hit.chunk.document_id for hit in page.hits))
    docs = await ctx.documents.get_documents(ctx.namespace, doc_ids) if doc_ids else []
    nodes = [document_to_node(d) for d in docs]
    return [n for n in nodes if properties_match(n.properties, properties)]


async def get_nodes(
    ctx: GraphContext, properties: Mapping[str, Any] | None, ids: Sequence[str] | None
) -> list[LabelledNode]:
    """``PropertyGraphStore.get``: nodes by id (entity names, Khora ids, chunk node ids, Khora
    chunk ids), by properties (every pair must match), or all of them.

    ``ids=[]`` names no node and returns ``[]`` (``PropertyGraphIndex`` asks for the ids of
    the entities it is about to insert, often none: that must not read the whole graph).
    """
    if ids is not None:
        entities = await resolve_entities(ctx, ids)
        nodes: list[LabelledNode] = [*await entity_nodes(ctx, entities), *await chunk_nodes_by_id(ctx, ids)]
    else:
        nodes = [*await entity_nodes(ctx, await all_entities(ctx)), *await scan_documents(ctx, properties)]
    return [n for n in nodes if properties_match(n.properties, properties)]


async def triplets(
    ctx: GraphContext, relationships: Sequence[Relationship], entities: Mapping[str, Entity] | None = None
) -> list[Triplet]:
    """Triplets for Khora relationships; both ends carry the edge's ``triplet_source_id``."""
    known = dict(entities or {})
    wanted = {e for r in relationships for e in (r.source_id, r.target_id)} - set(known)
    if wanted:
        known.update({e.id: e for e in await ctx.graph.get_entities(ctx.namespace, sorted(wanted))})
    sources = await source_nodes(ctx, (r.document_id for r in relationships))
    out: list[Triplet] = []
    for rel in relationships:
        if rel.source_id not in known or rel.target_id not in known:
            continue
        source = sources.get(rel.document_id)
        head = entity_to_node(known[rel.source_id], source)
        tail = entity_to_node(known[rel.target_id], source)
        relation: Relation = relationship_to_relation(rel, head, tail, source)
        out.append((head, relation, tail))
    return out


async def get_triplets(
    ctx: GraphContext,
    entity_names: Sequence[str] | None,
    relation_names: Sequence[str] | None,
    properties: Mapping[str, Any] | None,
    ids: Sequence[str] | None,
    limit: int,
) -> list[Triplet]:
    """``PropertyGraphStore.get_triplets``: each given criterion must hold (nothing given: [])."""
    if not (entity_names or relation_names or properties or ids):
        return []
    named = {e.id for e in await resolve_entities(ctx, entity_names or [])}
    by_id = {e.id for e in await resolve_entities(ctx, ids or [])}
    if (entity_names and not named) or (ids and not by_id):
        return []
    seeds = sorted(named | by_id) or None
    rels = await ctx.graph.list_relationships(
        ctx.namespace, entity_ids=seeds, types=list(relation_names) if relation_names else None, limit=limit
    )
    rels = [
        r
        for r in rels
        if (not named or {r.source_id, r.target_id} & named)
        and (not by_id or {r.source_id, r.target_id} & by_id)
    ]
    found = await triplets(ctx, rels)
    if properties:
        found = [t for t in found if _triplet_matches(t, properties)]
    return found


def _triplet_matches(triplet: Triplet, properties: Mapping[str, Any]) -> bool:
    merged: dict[str, Any] = {}
    for part in (triplet[2], triplet[0], triplet[1]):  # the relation's own properties win
        merged.update(part.properties)
    return properties_match(merged, properties)


async def seed_entity_ids(ctx: GraphContext, graph_nodes: Sequence[LabelledNode]) -> list[str]:
    """Khora ids of the entity nodes among ``graph_nodes`` (text-chunk nodes are skipped)."""
    keys = []
    for node in graph_nodes:
        if isinstance(node, ChunkNode):
            continue
        khora_id = node.properties.get(KHORA_ID_KEY)
        keys.append(khora_id if isinstance(khora_id, str) else node.id)
    return [e.id for e in await resolve_entities(ctx, keys)]


async def rel_map(
    ctx: GraphContext,
    graph_nodes: Sequence[LabelledNode],
    depth: int,
    limit: int,
    ignore_rels: Sequence[str] | None,
) -> list[Triplet]:
    """``PropertyGraphStore.get_rel_map``: edges within ``depth`` hops (either direction,
    at most 4) of the entity nodes, nearest first, then heaviest."""
    seeds = await seed_entity_ids(ctx, graph_nodes)
    if not seeds or depth < 1 or limit < 1:
        return []
    hood = await ctx.graph.neighbourhood(
        ctx.namespace, seeds, depth=min(int(depth), 4), max_fanout=max(50, limit)
    )
    ignore = set(ignore_rels or ())
    dist = hood.distance
    names = {e.id: e.name for e in hood.entities}
    # Ties break on names, not ids: ids embed the namespace, and a stable order keeps LLM
    # prompts built from these triplets identical across namespaces and runs.
    rels = sorted(
        (r for r in hood.relationships if r.type not in ignore),
        key=lambda r: (
            min(dist.get(r.source_id, 99), dist.get(r.target_id, 99)),
            -r.weight,
            names.get(r.source_id, ""),
            r.type,
            names.get(r.target_id, ""),
            r.id,
        ),
    )
    return await triplets(ctx, rels[:limit], {e.id: e for e in hood.entities})


async def chunk_nodes_by_id(ctx: GraphContext, ids: Sequence[str]) -> list[ChunkNode]:
    """Text-chunk nodes by ChunkNode id (documents) or Khora chunk id (single chunks)."""
    docs = await resolve_documents(ctx, ids)
    chunks = await ctx.documents.get_chunks(ctx.namespace, list(ids)) if ids else []
    return [*map(document_to_node, docs), *map(chunk_to_node, chunks)]
