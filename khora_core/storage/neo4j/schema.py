"""Constraints and indexes of the Neo4j graph (all ``IF NOT EXISTS``: safe to run at every open).

Graph model (fixed by the storage conventions)::

    (:Chunk {id, namespace_id, document_id, index, content, start_char, end_char, token_count,
             occurred_at, created_at, source_timestamp, <string system keys>, metadata_json, tags})
    (:Entity {id, namespace_id, name, name_lower, type, aliases, aliases_lower, description,
              embedding, mention_count, property_keys, property_values})
    (:Entity)-[:MENTIONED_IN {count, document_id, rank}]->(:Chunk)
    (:Entity)-[:RELATES {id, namespace_id, type, description, weight, document_id, chunk_id,
                         property_keys, property_values, pair, rank_weight}]->(:Entity)

``property_keys`` / ``property_values`` hold an entity's or relationship's free-form
``properties``: the keys, and each value as JSON text at the same position (absent when
there are none; graphs written before them need no migration).
    (:Chunk)-[:AT_TIME]->(:TimeNode {namespace_id, key: "YYYY-MM-DD"})

``rank`` orders an entity's mentions for the index behind ``chunk_mentions``
(``mention_rank``); ``pair`` and ``rank_weight`` on ``RELATES`` order one pair's
relationships for ``chunk_graph`` (``pair_rank``).

Uniqueness is per namespace: composite ``(namespace_id, id)`` uniqueness constraints, which
Neo4j 5 Community supports (node keys are Enterprise-only). Each constraint's backing range
index also serves the ``MATCH (n:Label {namespace_id: $ns, id: ...})`` lookups.
"""

from __future__ import annotations

import neo4j

from khora_core.errors import ConfigError
from khora_core.storage.neo4j.mention_rank import ensure_mention_rank
from khora_core.storage.neo4j.pair_rank import ensure_pair_rank

__all__ = ["NAME_WORDS_INDEX", "VECTOR_INDEX", "ensure_schema", "schema_statements"]

#: The native vector index over ``Entity.embedding`` (cosine).
VECTOR_INDEX = "khora_entity_embedding"
#: The full-text (Lucene) index over ``Entity.name``: ``find_entities_by_words``.
NAME_WORDS_INDEX = "khora_entity_name_words"

_STATEMENTS = (
    "CREATE CONSTRAINT khora_entity_ns_id IF NOT EXISTS "
    "FOR (e:Entity) REQUIRE (e.namespace_id, e.id) IS UNIQUE",
    "CREATE CONSTRAINT khora_chunk_ns_id IF NOT EXISTS "
    "FOR (c:Chunk) REQUIRE (c.namespace_id, c.id) IS UNIQUE",
    "CREATE CONSTRAINT khora_timenode_ns_key IF NOT EXISTS "
    "FOR (t:TimeNode) REQUIRE (t.namespace_id, t.key) IS UNIQUE",
    "CREATE CONSTRAINT khora_relates_ns_id IF NOT EXISTS "
    "FOR ()-[r:RELATES]-() REQUIRE (r.namespace_id, r.id) IS UNIQUE",
    # Namespace-wide scans (list, delete_namespace) and per-document deletes.
    "CREATE INDEX khora_entity_ns IF NOT EXISTS FOR (e:Entity) ON (e.namespace_id)",
    "CREATE INDEX khora_chunk_ns IF NOT EXISTS FOR (c:Chunk) ON (c.namespace_id)",
    "CREATE INDEX khora_timenode_ns IF NOT EXISTS FOR (t:TimeNode) ON (t.namespace_id)",
    "CREATE INDEX khora_chunk_document IF NOT EXISTS FOR (c:Chunk) ON (c.namespace_id, c.document_id)",
    "CREATE INDEX khora_relates_document IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.namespace_id, r.document_id)",
    # Temporal sort and date filters on chunks; exact name lookups on entities.
    "CREATE INDEX khora_chunk_occurred_at IF NOT EXISTS FOR (c:Chunk) ON (c.occurred_at)",
    "CREATE INDEX khora_entity_name_lower IF NOT EXISTS FOR (e:Entity) ON (e.name_lower)",
    # Aliases: one (:EntityAlias)-[:ALIAS_OF]->(:Entity) per lower-cased alias, because a
    # list property (Entity.aliases_lower) cannot be indexed for membership.
    "CREATE CONSTRAINT khora_alias_ns_key_entity IF NOT EXISTS "
    "FOR (a:EntityAlias) REQUIRE (a.namespace_id, a.key, a.entity_id) IS UNIQUE",
    "CREATE INDEX khora_alias_ns_key IF NOT EXISTS FOR (a:EntityAlias) ON (a.namespace_id, a.key)",
    # The words of entity names (standard analyzer: Unicode word breaks, lower case).
    f"CREATE FULLTEXT INDEX {NAME_WORDS_INDEX} IF NOT EXISTS FOR (e:Entity) ON EACH [e.name]",
)

# Aliases stored before alias nodes existed get theirs, a slice at a time (idempotent).
_BACKFILL_ALIASES = """
MATCH (e:Entity) WHERE size(coalesce(e.aliases_lower, [])) > 0 AND NOT ()-[:ALIAS_OF]->(e)
WITH e LIMIT 5000
FOREACH (k IN e.aliases_lower |
  MERGE (a:EntityAlias {namespace_id: e.namespace_id, key: k, entity_id: e.id})
  MERGE (a)-[:ALIAS_OF]->(e))
RETURN count(e) AS n
"""


def schema_statements(embedding_dim: int) -> list[str]:
    """Every schema statement, the vector index last (its dimension is an int, not user text)."""
    dim = int(embedding_dim)
    vector = (
        f"CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (e:Entity) ON (e.embedding) "
        f"OPTIONS {{indexConfig: {{`vector.dimensions`: {dim}, `vector.similarity_function`: 'cosine'}}}}"
    )
    return [*_STATEMENTS, vector]


async def ensure_schema(driver: neo4j.AsyncDriver, *, database: str, embedding_dim: int) -> None:
    """Create the constraints and indexes when missing and wait until they are online.

    Raises:
        ConfigError: the vector index exists with another dimension (the embedding model
            changed): drop the index ``khora_entity_embedding`` or keep the old model.
        StorageError / StorageUnavailableError: via the caller's error translation.
    """
    if embedding_dim <= 0:
        raise ConfigError(f"embedding_dim must be positive, got {embedding_dim}", setting="embedding_dim")
    # Schema commands cannot share a transaction with each other's data reads: one each.
    for statement in schema_statements(embedding_dim):
        await driver.execute_query(statement, database_=database)
    records, _, _ = await driver.execute_query(
        "SHOW INDEXES YIELD name, options WHERE name = $name RETURN options",
        {"name": VECTOR_INDEX},
        database_=database,
    )
    if records:
        config = (records[0]["options"] or {}).get("indexConfig") or {}
        existing = config.get("vector.dimensions")
        if existing is not None and int(existing) != int(embedding_dim):
            raise ConfigError(
                f"The Neo4j vector index {VECTOR_INDEX} was built for {existing}-dimensional embeddings "
                f"but the embedder produces {embedding_dim}. Use the original embedding model, or drop "
                f"the index (DROP INDEX {VECTOR_INDEX}) and re-ingest",
                setting="KHORA_EMBEDDING_MODEL",
            )
    await ensure_mention_rank(driver, database=database)
    await ensure_pair_rank(driver, database=database)
    await driver.execute_query("CALL db.awaitIndexes(300)", database_=database)
    while True:
        records, _, _ = await driver.execute_query(_BACKFILL_ALIASES, database_=database)
        if not records or not records[0]["n"]:
            break
