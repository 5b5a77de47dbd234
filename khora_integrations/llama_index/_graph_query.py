"""Queries of ``KhoraPropertyGraphStore``: entity vector search, Cypher pass-through, schema."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from llama_index.core.graph_stores.types import EntityNode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

from khora_core.errors import InvalidInputError
from khora_core.filters import RecallFilter
from khora_integrations.llama_index._graph_convert import (
    CHUNK_LABEL,
    KHORA_ID_KEY,
    entity_to_node,
    type_to_label,
)
from khora_integrations.llama_index._graph_read import MAX_SCAN, GraphContext, all_entities
from khora_integrations.llama_index._graph_write import UnsupportedGraphOperationError
from khora_integrations.llama_index.filters import to_recall_filter

__all__ = [
    "NEO4J_MODEL",
    "ReadOnlyQueryError",
    "neo4j_handle",
    "schema",
    "schema_text",
    "structured_query",
    "vector_query",
]

#: Khora's graph as Cypher sees it (for text-to-Cypher prompts and hand-written queries).
NEO4J_MODEL = """\
Khora's graph in Neo4j. Queries run read-only and are not scoped for you: every node has a
namespace_id property, always match it with $namespace_id (the store binds it), e.g.
MATCH (e:Entity {namespace_id: $namespace_id}).
Nodes:
  (:Entity {id, namespace_id, name, name_lower, type, aliases, description, mention_count,
            property_keys, property_values})
      property_keys / property_values: the entity's free-form properties, the keys and, at
      the same positions, each value as JSON text (also on RELATES)
  (:Chunk {id, namespace_id, document_id, occurred_at, created_at, source_timestamp, source_type,
           source_name, source_url, external_id, content_type, source, title, metadata_json})
  (:TimeNode {namespace_id, key})   key is an ISO date, YYYY-MM-DD
Relationships:
  (:Entity)-[:RELATES {id, type, description, weight, document_id, chunk_id, property_keys,
                       property_values}]->(:Entity)
      the relationship's kind is its `type` property (a value listed below), not a Neo4j type:
      MATCH (a:Entity {namespace_id: $namespace_id})-[r:RELATES {type: 'WORKS_AT'}]->(b:Entity)
  (:Entity)-[:MENTIONED_IN {count, document_id}]->(:Chunk)
  (:Chunk)-[:AT_TIME]->(:TimeNode)"""


def neo4j_handle(graph: Any) -> tuple[Any, str] | None:
    """``(driver, database)`` when ``graph`` is a Neo4j graph store, else None.

    The ``GraphStore`` protocol does not expose a driver; the Neo4j store keeps it as
    ``driver``/``_driver`` (and ``database``/``_database``).
    """
    neo4j = sys.modules.get("neo4j")
    driver = getattr(graph, "driver", None) or getattr(graph, "_driver", None)
    if neo4j is None or not isinstance(driver, neo4j.AsyncDriver):
        return None
    return driver, str(getattr(graph, "database", None) or getattr(graph, "_database", None) or "neo4j")


async def vector_query(ctx: GraphContext, query: VectorStoreQuery) -> tuple[list[EntityNode], list[float]]:
    """Entities nearest to the query vector (``query_embedding``, else ``query_str`` embedded
    with Khora's embedder), best first; ``filters`` apply to the entity nodes' properties
    (plus ``name`` and ``label``), ``node_ids`` keep only those names or Khora ids."""
    if query.mode not in (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.DEFAULT.value):
        raise UnsupportedGraphOperationError(
            f"vector_query supports the default mode only (cosine over entity embeddings), got {query.mode!r}"
        )
    if query.doc_ids:
        raise UnsupportedGraphOperationError(
            "vector_query cannot restrict entities by doc_ids; filter the chunks with Khora.recall(filter=...)"
        )
    vector = query.query_embedding
    if vector is None:
        if not query.query_str:
            raise InvalidInputError("vector_query needs query_embedding or query_str")
        vector = await ctx.embedder.embed_query(query.query_str)
    dim = int(ctx.embedder.dimension)
    if len(vector) != dim:
        raise InvalidInputError(
            f"The query embedding has {len(vector)} dimensions; Khora's entity vectors have {dim}. "
            "Embed queries with khora_integrations.llama_index.KhoraEmbedding.from_khora(kb)."
        )
    top_k = max(1, int(query.similarity_top_k))
    # LlamaIndex's dialect: every key is a node property, taken literally.
    recall_filter = to_recall_filter(query.filters, node_metadata=True)
    wanted = set(query.node_ids or ())
    fetch = top_k * 4 if recall_filter is not None or wanted else top_k
    while True:
        hits = await ctx.graph.search_entities_by_vector(
            ctx.namespace, vector, limit=fetch, min_similarity=-2.0
        )
        kept = [(entity_to_node(h.entity), h.score) for h in hits]
        if wanted:
            kept = [(n, s) for n, s in kept if n.id in wanted or n.properties[KHORA_ID_KEY] in wanted]
        if recall_filter is not None:
            kept = [(n, s) for n, s in kept if _entity_matches(recall_filter, n)]
        if len(kept) >= top_k or len(hits) < fetch or fetch >= MAX_SCAN:
            break
        fetch *= 4
    kept = kept[:top_k]
    return [n for n, _ in kept], [s for _, s in kept]


def _entity_matches(recall_filter: RecallFilter, node: EntityNode) -> bool:
    metadata = {**node.properties, "name": node.name, "label": node.label}
    return recall_filter.matches({"metadata": metadata})


class ReadOnlyQueryError(InvalidInputError):
    """A Cypher statement tried to write through a read-only ``structured_query``; nothing
    was changed. Build the store with ``allow_cypher_writes=True`` to run writes."""


#: Neo4j's code for a write attempted in a read transaction.
_ACCESS_MODE_CODE = "Neo.ClientError.Statement.AccessMode"


async def structured_query(
    ctx: GraphContext, query: str, param_map: Mapping[str, Any] | None, *, allow_writes: bool = False
) -> list[dict[str, Any]]:
    """Run your Cypher on the Neo4j stack with ``$namespace_id`` bound to the store's namespace.

    The statement runs in a read transaction unless ``allow_writes``: Neo4j refuses any
    write in it (``CREATE``, ``MERGE``, ``SET``, ``DELETE``, write procedures) and nothing
    changes. The statement is not scoped: it reaches every namespace of the database unless
    it matches ``$namespace_id`` itself.

    Raises:
        UnsupportedGraphOperationError: the stack has no Neo4j (the embedded store).
        ReadOnlyQueryError: the statement writes and ``allow_writes`` is False.
        InvalidInputError: ``param_map`` names another namespace, or Neo4j rejects the query.
        StorageError, StorageUnavailableError: Neo4j failed or cannot be reached.
    """
    handle = neo4j_handle(ctx.graph)
    if handle is None:
        raise UnsupportedGraphOperationError(
            f"structured_query runs Cypher and needs the PostgreSQL + Neo4j stack; this Khora uses "
            f"{ctx.stack.name!r}. Use get_triplets / get_rel_map / vector_query, or Khora.recall."
        )
    params = dict(param_map or {})
    if params.get("namespace_id", ctx.namespace) != ctx.namespace:
        raise InvalidInputError(
            f"param_map['namespace_id'] is {params['namespace_id']!r}; this store is scoped to {ctx.namespace!r}"
        )
    params["namespace_id"] = ctx.namespace
    from neo4j import exceptions as nx

    from khora_core.storage.neo4j.errors import translated

    async def work(tx: Any) -> list[dict[str, Any]]:
        result = await tx.run(query, params)
        return list(await result.data())

    driver, database = handle
    async with translated():  # connection and server failures -> Khora's storage errors
        try:
            async with driver.session(database=database) as session:
                if allow_writes:
                    return await session.execute_write(work)
                return await session.execute_read(work)
        except nx.ClientError as exc:
            code = str(exc.code or "")
            if code == _ACCESS_MODE_CODE:
                raise ReadOnlyQueryError(
                    "structured_query runs Cypher read-only and Neo4j refused a write in it "
                    f"({exc.message or exc}); nothing was changed. Write through upsert_nodes / "
                    "upsert_relations / delete, or build the store with allow_cypher_writes=True."
                ) from exc
            # Statement errors (syntax, types, missing parameters) are the query's fault.
            if not code.startswith("Neo.ClientError.Statement."):
                raise
            raise InvalidInputError(f"Neo4j rejected the query: {exc.message or exc}") from exc


async def schema(ctx: GraphContext) -> dict[str, Any]:
    """The graph's labels and triplet patterns as LlamaIndex sees them (plus the Cypher model
    on Neo4j)."""
    entities = await all_entities(ctx)
    rels = await ctx.graph.list_relationships(ctx.namespace, limit=MAX_SCAN)
    label_of = {e.id: type_to_label(e.type) for e in entities}
    patterns = {
        (label_of[r.source_id], r.type, label_of[r.target_id])
        for r in rels
        if r.source_id in label_of and r.target_id in label_of
    }
    neo4j = neo4j_handle(ctx.graph) is not None
    return {
        "backend": ctx.stack.name,
        "namespace_id": ctx.namespace,
        "entity_labels": sorted(set(label_of.values())),
        "chunk_label": CHUNK_LABEL,
        "relation_labels": sorted({r.type for r in rels}),
        "triplet_patterns": sorted(patterns),
        "supports_structured_queries": neo4j,
        "cypher_model": NEO4J_MODEL if neo4j else None,
    }


def schema_text(info: Mapping[str, Any]) -> str:
    """``get_schema_str``: the schema as text for an LLM prompt."""
    lines = [
        f"Entity labels (Khora entity types): {', '.join(info['entity_labels']) or '(none yet)'}",
        f"Text chunk label: {info['chunk_label']}",
        f"Relation labels: {', '.join(info['relation_labels']) or '(none yet)'}",
        "Triplet patterns:",
        *(f"  ({s})-[{r}]->({t})" for s, r, t in info["triplet_patterns"]),
    ]
    if info.get("cypher_model"):
        types = ", ".join(repr(t) for t in info["relation_labels"]) or "(none yet)"
        entity_types = ", ".join(
            repr("CONCEPT" if label == "entity" else label) for label in info["entity_labels"]
        )
        lines += [
            "",
            info["cypher_model"],
            f"RELATES.type values: {types}",
            f"Entity.type values: {entity_types or '(none yet)'}",
        ]
    return "\n".join(lines)
