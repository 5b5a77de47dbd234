"""The write side of ``KhoraPropertyGraphStore``: upserts and deletes over an open Khora.

* Entity nodes land with ``GraphStore.upsert_graph`` under their deterministic id, with a
  name embedding from Khora's embedder (the same vector ``remember`` gives an entity) or,
  with ``use_node_embeddings``, the node's own embedding, and their properties as the
  entity's ``properties`` (the storage stack updates them key by key).
* Text-chunk nodes are remembered as documents (``external_id`` = node id), so recall's
  vector, keyword and graph channels see them. Khora's extractor does not run on them
  unless the store asks for it (``khora_extraction``): LlamaIndex's own extractors write
  their entities and relations, and running both would store each relation twice.
* Relations between entities land as Khora relationships learned from their source chunk
  (``triplet_source_id``), their other properties as the relationship's ``properties``. Khora's graph has no edges between text chunks, so relations
  with a chunk at either end (``ImplicitPathExtractor``'s SOURCE/NEXT/PREVIOUS/PARENT/CHILD,
  which the chunk node keeps in its own ``relationships`` anyway) are not written; each
  skipped one is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.graph_stores.types import (
    TRIPLET_SOURCE_KEY,
    ChunkNode,
    EntityNode,
    LabelledNode,
    Relation,
)

from khora_core.errors import InvalidInputError, KhoraError
from khora_core.ingest.dedup import content_hash
from khora_core.ingest.resolve import entity_id, normalise_name
from khora_core.models import Entity, Relationship
from khora_integrations._bridge import jsonable
from khora_integrations.llama_index._graph_convert import (
    KHORA_CHUNK_KEY,
    KHORA_DOCUMENT_KEY,
    KHORA_ID_KEY,
    NO_SOURCE_DOCUMENT_ID,
    READ_ONLY_KEYS,
    label_to_type,
    relation_id,
    remember_arguments,
)
from khora_integrations.llama_index._graph_read import (
    MAX_SCAN,
    GraphContext,
    get_nodes,
    resolve_documents,
    resolve_entities,
)

__all__ = [
    "STRUCTURAL_LABELS",
    "UnsupportedGraphOperationError",
    "delete",
    "delete_llama_nodes",
    "ensure_namespace",
    "upsert_nodes",
    "upsert_relations",
]

logger = logging.getLogger("khora.llama_index")

#: Relationships read and deleted per round by ``delete(relation_names=...)``.
_DELETE_PAGE = 1000
#: Labels ``ImplicitPathExtractor`` gives node-to-node relations.
STRUCTURAL_LABELS = frozenset({"SOURCE", "PARENT", "CHILD", "PREVIOUS", "NEXT"})


class UnsupportedGraphOperationError(KhoraError, NotImplementedError):
    """The storage stack cannot do this graph operation (the message says what can)."""


async def ensure_namespace(ctx: GraphContext, create: bool) -> None:
    if create:
        await ctx.kb.create_namespace(namespace=ctx.namespace)  # returns the existing one
    else:
        await ctx.kb.get_namespace(ctx.namespace)


async def _name_vectors(ctx: GraphContext, names: list[str]) -> dict[str, list[float]]:
    names = list(dict.fromkeys(names))
    return dict(zip(names, await ctx.embedder.embed_documents(names), strict=True)) if names else {}


def _entity(
    ctx: GraphContext, name: str, type_: str, vector: list[float] | None, props: Mapping[str, Any]
) -> Entity:
    """The Khora entity for an ``EntityNode``: ``description`` and ``aliases`` (when a string
    and a list of strings) become Khora's fields, the other properties its ``properties``
    (datetimes as ISO-8601 strings), less the read-only keys the store adds on read."""
    description = props.get("description")
    aliases = props.get("aliases")
    fields: dict[str, Any] = {}
    if isinstance(description, str) and description:
        fields["description"] = description
    if isinstance(aliases, list) and all(isinstance(a, str) for a in aliases):
        fields["aliases"] = list(aliases)
    return Entity(
        id=entity_id(ctx.namespace, name),
        namespace_id=ctx.namespace,
        name=name,
        type=type_,
        embedding=vector,
        properties=_free_properties(props, set(fields)),
        **fields,
    )


def _free_properties(props: Mapping[str, Any], taken: set[str]) -> dict[str, Any]:
    """The properties Khora stores as they are: all but the keys ``taken`` into its own
    fields and the read-only keys the store adds on read."""
    return jsonable({k: v for k, v in props.items() if k not in taken and k not in READ_ONLY_KEYS})


async def _upsert_entities(ctx: GraphContext, nodes: Sequence[EntityNode], use_node_embeddings: bool) -> None:
    dim = int(ctx.embedder.dimension)
    given: dict[str, list[float]] = {}
    if use_node_embeddings:
        for node in nodes:
            if node.embedding is not None:
                if len(node.embedding) != dim:
                    raise InvalidInputError(
                        f"EntityNode {node.name!r} has a {len(node.embedding)}-dimension embedding; Khora's "
                        f"embedder makes {dim}. Embed with KhoraEmbedding, or use use_node_embeddings=False."
                    )
                given[node.name] = list(node.embedding)
    computed = await _name_vectors(ctx, [n.name for n in nodes if n.name not in given])
    entities = [
        _entity(ctx, n.name, label_to_type(n.label), given.get(n.name) or computed.get(n.name), n.properties)
        for n in nodes
    ]
    await ctx.graph.upsert_graph(ctx.namespace, entities=entities)


async def _remember_chunks(ctx: GraphContext, nodes: Sequence[ChunkNode], extract: bool) -> None:
    items: list[dict[str, Any]] = []
    for node in nodes:
        if not node.text.strip():
            logger.warning("Skipped chunk node %s: Khora does not store empty text", node.id)
            continue
        kwargs = remember_arguments(node)
        kwargs["metadata"] = jsonable(kwargs["metadata"])
        existing = await ctx.documents.find_documents_by_external_id(ctx.namespace, node.id)
        same = [d for d in existing if d.content_hash == content_hash(node.text)]
        if same and all(d.metadata == kwargs["metadata"] for d in same):
            continue  # already stored as is
        if same:  # same text, new metadata: Khora keeps one copy per content, so replace it
            await ctx.kb.forget(namespace=ctx.namespace, external_id=node.id)
        items.append({"content": node.text, **kwargs, "extract": extract})
    if not items:
        return
    outcomes = await ctx.kb.remember_batch(items, namespace=ctx.namespace)
    errors = []
    for item, outcome in zip(items, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            errors.append((item["external_id"], outcome))
        elif outcome.duplicate:
            # The text is stored under another document; reach it through this id too.
            ctx.aliases[item["external_id"]] = outcome.document_id
            logger.warning(
                "Chunk node %s has the same text as document %s; Khora keeps one copy",
                item["external_id"],
                outcome.document_id,
            )
    if len(errors) == 1:
        raise errors[0][1]
    if errors:
        node_id, first = errors[0]
        raise KhoraError(
            f"{len(errors)} of {len(items)} chunk nodes were not stored; first ({node_id}): {first}"
        ) from first


async def upsert_nodes(
    ctx: GraphContext,
    nodes: Sequence[LabelledNode],
    *,
    create_namespace: bool,
    use_node_embeddings: bool,
    khora_extraction: bool,
) -> None:
    """``PropertyGraphStore.upsert_nodes`` (see the module docstring); chunk nodes go through
    Khora's entity extractor only with ``khora_extraction``."""
    entities = [n for n in nodes if isinstance(n, EntityNode)]
    chunks = [n for n in nodes if isinstance(n, ChunkNode)]
    other = [n for n in nodes if not isinstance(n, (EntityNode, ChunkNode))]
    if other:
        raise InvalidInputError(
            f"KhoraPropertyGraphStore stores EntityNode and ChunkNode, not {type(other[0]).__name__}"
        )
    if not nodes:
        return
    await ensure_namespace(ctx, create_namespace)
    if chunks:
        await _remember_chunks(ctx, chunks, khora_extraction)
    if entities:
        await _upsert_entities(ctx, entities, use_node_embeddings)


async def upsert_relations(
    ctx: GraphContext, relations: Sequence[Relation], *, create_namespace: bool
) -> None:
    """``PropertyGraphStore.upsert_relations`` (see the module docstring). A missing end
    that is not a stored chunk node becomes an entity of that name."""
    if not relations:
        return
    await ensure_namespace(ctx, create_namespace)
    ends = list(dict.fromkeys(e for r in relations for e in (r.source_id, r.target_id)))
    entity_of: dict[str, str] = {}
    for entity in await resolve_entities(ctx, ends):
        aliases = {normalise_name(a) for a in entity.aliases}
        for key in ends:
            if (
                key in (entity.id, entity.name)
                or entity_id(ctx.namespace, key) == entity.id
                or normalise_name(key) in aliases
            ):
                entity_of.setdefault(key, entity.id)
    unresolved = [e for e in ends if e not in entity_of]
    chunk_ends = set()
    for end in unresolved:
        if await resolve_documents(ctx, [end]):
            chunk_ends.add(end)
    kept = [r for r in relations if r.source_id not in chunk_ends and r.target_id not in chunk_ends]
    new_names = list(dict.fromkeys(e for r in kept for e in (r.source_id, r.target_id) if e not in entity_of))
    vectors = await _name_vectors(ctx, new_names)
    new_entities = [_entity(ctx, n, label_to_type(""), vectors[n], {}) for n in new_names]
    entity_of.update({e.name: e.id for e in new_entities})

    sources = {
        str(r.properties.get(TRIPLET_SOURCE_KEY)) for r in relations if r.properties.get(TRIPLET_SOURCE_KEY)
    }
    doc_of: dict[str, str] = {}
    for source in sources:
        docs = await resolve_documents(ctx, [source])
        if docs:
            doc_of[source] = docs[0].id
    rels: list[Relationship] = []
    skipped = [r.label for r in relations if r.source_id in chunk_ends or r.target_id in chunk_ends]
    for r in kept:
        source, target = entity_of[r.source_id], entity_of[r.target_id]
        rels.append(_relationship(ctx, r, source, target, doc_of))
    rels = await _keep_stored_fields(ctx, rels, kept)
    if skipped:
        odd = sorted(set(skipped) - STRUCTURAL_LABELS)
        log = logger.warning if odd else logger.debug
        log(
            "Skipped %d relations with a text-chunk end (labels %s): Khora's graph links chunks to "
            "entities only through mentions",
            len(skipped),
            sorted(set(skipped)),
        )
    await ctx.graph.upsert_graph(ctx.namespace, entities=new_entities, relationships=rels)


def _relationship(
    ctx: GraphContext, relation: Relation, source: str, target: str, doc_of: Mapping[str, str]
) -> Relationship:
    """The Khora relationship for a ``Relation`` between two stored entities: ``weight`` (a
    number) and ``description`` (a string) become Khora's fields, ``triplet_source_id`` the
    document it was learned from, the other properties its ``properties``."""
    props = relation.properties
    weight = props.get("weight")
    description = props.get("description")
    fields: dict[str, Any] = {}
    if isinstance(weight, (int, float)) and not isinstance(weight, bool):
        fields["weight"] = float(weight)
    if isinstance(description, str) and description:
        fields["description"] = description
    return Relationship(
        id=relation_id(ctx.namespace, source, relation.label, target),
        namespace_id=ctx.namespace,
        source_id=source,
        target_id=target,
        type=relation.label,
        document_id=doc_of.get(str(props.get(TRIPLET_SOURCE_KEY)), NO_SOURCE_DOCUMENT_ID),
        properties=_free_properties(props, {*fields, TRIPLET_SOURCE_KEY}),
        **fields,
    )


async def _keep_stored_fields(
    ctx: GraphContext, rels: list[Relationship], relations: Sequence[Relation]
) -> list[Relationship]:
    """A relation written again without ``weight``, ``description`` or ``triplet_source_id``
    keeps the stored edge's value for it, as its other properties are kept (the stack
    updates ``properties`` key by key but replaces an edge's fields)."""
    ends = sorted({e for r in rels for e in (r.source_id, r.target_id)})
    stored = {r.id: r for r in await ctx.graph.relationships_among(ctx.namespace, ends, limit=MAX_SCAN)}
    out = []
    for rel, relation in zip(rels, relations, strict=True):
        old = stored.get(rel.id)
        if old is not None:
            keep: dict[str, Any] = {}
            if "weight" not in relation.properties:
                keep["weight"] = old.weight
            if "description" not in relation.properties:
                keep["description"] = old.description
            if rel.document_id == NO_SOURCE_DOCUMENT_ID:
                keep["document_id"], keep["chunk_id"] = old.document_id, old.chunk_id
            rel = rel.model_copy(update=keep)
        out.append(rel)
    return out


async def delete(
    ctx: GraphContext,
    entity_names: Sequence[str] | None,
    relation_names: Sequence[str] | None,
    properties: Mapping[str, Any] | None,
    ids: Sequence[str] | None,
) -> None:
    """``PropertyGraphStore.delete``: remove every relation labelled ``relation_names``
    (their entities stay), the named entities (with their edges and mentions) and the
    documents behind chunk nodes (``Khora.forget``: chunks, vectors and the entities they
    alone mentioned go too). Each criterion deletes on its own, as LlamaIndex's Neo4j store
    does."""
    if await ctx.documents.get_namespace(ctx.namespace) is None:
        return
    if relation_names:
        await _delete_relations(ctx, relation_names)
    entity_ids = {e.id for e in await resolve_entities(ctx, [*(entity_names or []), *(ids or [])])}
    documents = {d.id for d in await resolve_documents(ctx, ids or [])}
    if ids:
        chunks = await ctx.documents.get_chunks(ctx.namespace, list(ids))
        if chunks:
            raise InvalidInputError(
                f"{chunks[0].id!r} is a Khora chunk id; Khora deletes whole documents: pass the "
                f"document's node id ({chunks[0].document_id!r} or its external_id)"
            )
    if properties:
        for node in await get_nodes(ctx, properties, None):
            if isinstance(node, ChunkNode):
                if node.properties.get(KHORA_CHUNK_KEY) is None:
                    documents.add(str(node.properties[KHORA_DOCUMENT_KEY]))
            else:
                entity_ids.add(str(node.properties[KHORA_ID_KEY]))
    if entity_ids:
        await ctx.graph.delete_entities(ctx.namespace, sorted(entity_ids))
    for document_id in sorted(documents):
        await ctx.kb.forget(document_id, namespace=ctx.namespace)


async def _delete_relations(ctx: GraphContext, labels: Sequence[str]) -> None:
    """Delete every relationship of these types in the namespace, a page at a time."""
    types = [label for label in dict.fromkeys(labels) if isinstance(label, str) and label]
    while True:
        page = await ctx.graph.list_relationships(ctx.namespace, types=types, limit=_DELETE_PAGE)
        if not page:
            return
        await ctx.graph.delete_relationships(ctx.namespace, [r.id for r in page])
        if len(page) < _DELETE_PAGE:
            return


async def delete_llama_nodes(ctx: GraphContext, node_ids: Sequence[str], ref_doc_ids: Sequence[str]) -> None:
    """Forget the documents of these LlamaIndex nodes, and of every node of these source
    documents (``ref_doc_id``); Khora removes the entities only they mentioned."""
    if await ctx.documents.get_namespace(ctx.namespace) is None:
        return
    documents = {d.id for d in await resolve_documents(ctx, [*node_ids, *ref_doc_ids])}
    for ref in ref_doc_ids:
        for node in await get_nodes(ctx, {"ref_doc_id": ref}, None):
            if isinstance(node, ChunkNode):
                documents.add(str(node.properties[KHORA_DOCUMENT_KEY]))
    for document_id in sorted(documents):
        await ctx.kb.forget(document_id, namespace=ctx.namespace)
