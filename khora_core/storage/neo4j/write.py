"""Graph writes, as functions of one managed Neo4j transaction.

Each function takes an ``AsyncManagedTransaction`` so a caller can put several in one
transaction (``write_batch`` deletes the replaced documents and lands the new one
atomically). All writes are batched ``UNWIND`` statements; every ``MATCH``/``MERGE`` names
the namespace. Merge rules match the embedded store: an entity keeps its stored name,
aliases are united, a new type wins unless it is the default ``CONCEPT``, a new description
or embedding wins when given, and ``mention_count`` is always the sum of the entity's
``MENTIONED_IN`` counts, each ``MENTIONED_IN`` edge carries its ``rank`` key
(``mention_rank``) and each ``RELATES`` edge its ``pair`` and ``rank_weight`` (``pair_rank``). Free-form ``properties`` of entities and relationships are two
list properties, ``property_keys`` and ``property_values`` (each value as JSON text); an
upsert updates them key by key, in Cypher, from parameters only.

Rows are sorted before each ``UNWIND`` (entities by id, mentions by entity then chunk,
relationships by source, target, id), so concurrent writes that touch the same entities
lock them in the same order: two transactions taking shared nodes in opposite orders is
what makes Neo4j report a deadlock (and retry the whole transaction).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from neo4j import AsyncManagedTransaction

from khora_core.errors import InvalidInputError
from khora_core.models import Entity, Mention, Relationship, WriteBatch
from khora_core.storage.neo4j.mention_rank import rank_key
from khora_core.storage.neo4j.pair_rank import set_pair_rank
from khora_core.storage.neo4j.params import quiet
from khora_core.storage.neo4j.records import (
    chunk_props,
    day_key,
    entity_row,
    relationship_row,
)

__all__ = [
    "delete_document_tx",
    "delete_entities_tx",
    "delete_relationships_tx",
    "merge_entities_tx",
    "merge_relationships_tx",
    "refresh_mention_counts_tx",
    "write_batch_tx",
    "write_batches_tx",
]

# Every lookup of one node or relationship by its key names the unique index it seeks
# (``USING INDEX``). Without the hints, a server that has just started (statistics still
# near empty when it first plans them) ran some of these statements far slower for a
# whole ingest: remembering HotpotQA's 994 passages into a fresh Neo4j (hash vectors),
# ``_MERGE_MENTIONS`` took 5.0-5.5 s and ``_ADD_MENTION_COUNTS`` 2.8-4.1 s instead of 1.3
# and 0.4-0.5 with the hints, the whole ingest 24.0-24.1 s instead of 17.2-17.7 (two fresh
# servers each). Earlier, on a server that had been up a while, two runs of four rounds
# each had two rounds with ``_MERGE_RELATIONSHIPS`` at 7-8 s instead of 0.5.
#
# Time nodes are reached from their chunk, never sought by label: with the label in the
# pattern the planner seeks every time node of the namespace per chunk (Expand(Into)).
_UPSERT_CHUNKS = """
UNWIND $rows AS row
MERGE (c:Chunk {namespace_id: $ns, id: row.id})
SET c = row
WITH c
OPTIONAL MATCH (c)-[old:AT_TIME]->(t)
WHERE t.namespace_id = $ns
DELETE old
RETURN collect(DISTINCT t.key) AS old_keys
"""

_LINK_TIME = """
UNWIND $rows AS row
MATCH (c:Chunk {namespace_id: $ns, id: row.id})
USING INDEX c:Chunk(namespace_id, id)
MERGE (t:TimeNode {namespace_id: $ns, key: row.day})
MERGE (c)-[:AT_TIME]->(t)
"""

_MERGE_ENTITIES = """
UNWIND $rows AS row
MERGE (e:Entity {namespace_id: $ns, id: row.id})
WITH e, row, coalesce(e.name_lower, row.name_lower) AS key,
     coalesce(e.aliases, []) AS old_aliases, coalesce(e.aliases_lower, []) AS old_lower
WITH e, row, key, old_aliases, old_lower,
     [p IN row.alias_pairs WHERE p[1] <> key AND NOT p[1] IN old_lower] AS fresh,
     coalesce(e.property_keys, []) AS old_keys, coalesce(e.property_values, []) AS old_values
WITH e, row, key, old_aliases, old_lower, fresh, old_keys, old_values,
     [i IN range(0, size(old_keys) - 1) WHERE NOT old_keys[i] IN row.property_keys] AS kept
SET e.name = coalesce(e.name, row.name),
    e.name_lower = key,
    e.type = CASE WHEN e.type IS NULL OR row.type <> 'CONCEPT' THEN row.type ELSE e.type END,
    e.aliases = old_aliases + [p IN fresh | p[0]],
    e.aliases_lower = old_lower + [p IN fresh | p[1]],
    e.description = coalesce(row.description, e.description),
    e.embedding = coalesce(row.embedding, e.embedding),
    e.mention_count = coalesce(e.mention_count, 0),
    e.property_keys = CASE WHEN size(row.property_keys) = 0 THEN e.property_keys
                      ELSE [i IN kept | old_keys[i]] + row.property_keys END,
    e.property_values = CASE WHEN size(row.property_keys) = 0 THEN e.property_values
                        ELSE [i IN kept | old_values[i]] + row.property_values END
WITH e, fresh
FOREACH (p IN fresh |
  MERGE (a:EntityAlias {namespace_id: $ns, key: p[1], entity_id: e.id})
  MERGE (a)-[:ALIAS_OF]->(e))
"""

_MISSING_ENTITIES = """
UNWIND $ids AS id
OPTIONAL MATCH (e:Entity {namespace_id: $ns, id: id})
USING INDEX e:Entity(namespace_id, id)
WITH id, e WHERE e IS NULL
RETURN collect(id) AS missing
"""

_MISSING_CHUNKS = """
UNWIND $ids AS id
OPTIONAL MATCH (c:Chunk {namespace_id: $ns, id: id})
USING INDEX c:Chunk(namespace_id, id)
WITH id, c WHERE c IS NULL
RETURN collect(id) AS missing
"""

# Documents of a write that already have chunk nodes. The PostgreSQL rows of a new document
# are refused when stored already, so such a graph is stranded: a write whose rows were
# compensated while Neo4j was unreachable, after its graph slice had landed.
_STRANDED_DOCUMENTS = """
UNWIND $docs AS doc
CALL {
  WITH doc
  MATCH (c:Chunk {namespace_id: $ns, document_id: doc})
  USING INDEX c:Chunk(namespace_id, document_id)
  RETURN c LIMIT 1
}
RETURN collect(doc) AS found
"""

_MERGE_MENTIONS = f"""
UNWIND $rows AS row
MATCH (e:Entity {{namespace_id: $ns, id: row.entity_id}})
USING INDEX e:Entity(namespace_id, id)
MATCH (c:Chunk {{namespace_id: $ns, id: row.chunk_id}})
USING INDEX c:Chunk(namespace_id, id)
MERGE (e)-[m:MENTIONED_IN]->(c)
ON CREATE SET m.count = row.count, m.document_id = row.document_id
ON MATCH SET m.count = m.count + row.count, m.document_id = row.document_id
SET m.rank = {rank_key("$ns", "row.entity_id", "m.count", "row.chunk_id")}
"""

# A relationship is keyed by (namespace_id, id); re-writing one may move its endpoints.
# Its properties are the stored ones updated key by key by the row's.
_MERGE_RELATIONSHIPS = f"""
UNWIND $rows AS row
MATCH (s:Entity {{namespace_id: $ns, id: row.source_id}})
USING INDEX s:Entity(namespace_id, id)
MATCH (t:Entity {{namespace_id: $ns, id: row.target_id}})
USING INDEX t:Entity(namespace_id, id)
OPTIONAL MATCH (:Entity {{namespace_id: $ns}})-[old:RELATES {{namespace_id: $ns, id: row.id}}]->(:Entity {{namespace_id: $ns}})
USING INDEX old:RELATES(namespace_id, id)
WITH s, t, row, old, coalesce(old.property_keys, []) AS old_keys, coalesce(old.property_values, []) AS old_values
DELETE old
WITH s, t, row, old_keys, old_values,
     [i IN range(0, size(old_keys) - 1) WHERE NOT old_keys[i] IN row.property_keys] AS kept
WITH s, t, row, [i IN kept | old_keys[i]] + row.property_keys AS keys,
     [i IN kept | old_values[i]] + row.property_values AS values
CREATE (s)-[r:RELATES]->(t)
SET r = row.props,
    r.property_keys = CASE WHEN size(keys) = 0 THEN null ELSE keys END,
    r.property_values = CASE WHEN size(keys) = 0 THEN null ELSE values END,
    {set_pair_rank("r", "$ns", "s", "t", "row.props.weight")}
"""

# A write adds to an entity's mention_count what it adds to its MENTIONED_IN counts (one
# row per entity): the sum stays exact without re-reading every mention of a busy entity.
_ADD_MENTION_COUNTS = """
UNWIND $rows AS row
MATCH (e:Entity {namespace_id: $ns, id: row.id})
USING INDEX e:Entity(namespace_id, id)
SET e.mention_count = coalesce(e.mention_count, 0) + row.added
"""

_REFRESH_MENTION_COUNTS = """
UNWIND $ids AS id
MATCH (e:Entity {namespace_id: $ns, id: id})
USING INDEX e:Entity(namespace_id, id)
OPTIONAL MATCH (e)-[m:MENTIONED_IN]->(:Chunk {namespace_id: $ns})
WITH e, sum(m.count) AS total
SET e.mention_count = total
"""

_DOCUMENT_LINKS = """
MATCH (c:Chunk {namespace_id: $ns, document_id: $doc})
OPTIONAL MATCH (c)<-[:MENTIONED_IN]-(e:Entity {namespace_id: $ns})
OPTIONAL MATCH (c)-[:AT_TIME]->(t)
WHERE t.namespace_id = $ns
RETURN count(DISTINCT c) AS chunks, collect(DISTINCT e.id) AS mentioned, collect(DISTINCT t.key) AS keys
"""

# The hint keeps the planner on the per-document index even when its statistics are thin.
_DELETE_DOCUMENT_RELATIONSHIPS = """
MATCH (s:Entity {namespace_id: $ns})-[r:RELATES {namespace_id: $ns, document_id: $doc}]->(t:Entity {namespace_id: $ns})
USING INDEX r:RELATES(namespace_id, document_id)
WITH collect(r) AS rels, collect(DISTINCT s.id) + collect(DISTINCT t.id) AS ends
FOREACH (r IN rels | DELETE r)
RETURN size(rels) AS n, ends
"""

_DELETE_DOCUMENT_CHUNKS = """
MATCH (c:Chunk {namespace_id: $ns, document_id: $doc})
DETACH DELETE c
"""

# "Orphan": no mention left and no relationship left (an entity added through
# upsert_graph with edges but no document survives its neighbours' documents).
_DELETE_ORPHANS = """
UNWIND $ids AS id
MATCH (e:Entity {namespace_id: $ns, id: id})
USING INDEX e:Entity(namespace_id, id)
WHERE NOT (e)-[:MENTIONED_IN]->() AND NOT (e)-[:RELATES]-()
OPTIONAL MATCH (a:EntityAlias)-[:ALIAS_OF]->(e)
WITH e, collect(a) AS aliases
FOREACH (x IN aliases | DETACH DELETE x)
DETACH DELETE e
RETURN count(*) AS n
"""

_DELETE_EMPTY_TIME_NODES = """
UNWIND $keys AS key
MATCH (t:TimeNode {namespace_id: $ns, key: key})
USING INDEX t:TimeNode(namespace_id, key)
WHERE NOT (t)<-[:AT_TIME]-()
DELETE t
"""

_DELETE_ENTITIES = """
UNWIND $ids AS id
MATCH (e:Entity {namespace_id: $ns, id: id})
USING INDEX e:Entity(namespace_id, id)
OPTIONAL MATCH (a:EntityAlias)-[:ALIAS_OF]->(e)
WITH e, collect(a) AS aliases
FOREACH (x IN aliases | DETACH DELETE x)
DETACH DELETE e
RETURN count(*) AS n
"""

_DELETE_RELATIONSHIPS = """
UNWIND $ids AS id
MATCH (:Entity {namespace_id: $ns})-[r:RELATES {namespace_id: $ns, id: id}]->(:Entity {namespace_id: $ns})
USING INDEX r:RELATES(namespace_id, id)
DELETE r
RETURN count(*) AS n
"""


async def _single(tx: AsyncManagedTransaction, query: str, **params: Any) -> dict[str, Any]:
    result = await tx.run(query, quiet(params))
    record = await result.single()
    return dict(record) if record is not None else {}


async def _run(tx: AsyncManagedTransaction, query: str, **params: Any) -> None:
    result = await tx.run(query, quiet(params))
    await result.consume()


async def _require(
    tx: AsyncManagedTransaction,
    ns: str,
    query: str,
    ids: Iterable[str],
    what: str,
    known: AbstractSet[str] = frozenset(),
) -> None:
    """Raise unless every id exists; ``known``: ids written earlier in this transaction."""
    wanted = sorted(set(ids) - known)
    if not wanted:
        return
    missing = (await _single(tx, query, ns=ns, ids=wanted)).get("missing") or []
    if missing:
        raise InvalidInputError(
            f"{what} name unknown ids {sorted(missing)[:5]} in namespace {ns!r}; add them in the same call"
        )


async def merge_entities_tx(
    tx: AsyncManagedTransaction, ns: str, entities: Sequence[Entity], embedding_dim: int
) -> None:
    rows = sorted(_merged_rows(entity_row(e, ns, embedding_dim) for e in entities), key=lambda r: r["id"])
    if rows:
        await _run(tx, _MERGE_ENTITIES, ns=ns, rows=rows)


def _merged_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per entity id, as if the rows were merged one after the other: the first
    name stays, a later type wins unless it is ``CONCEPT``, aliases are united, a later
    description or embedding wins when given. (One ``UNWIND`` must not see an id twice:
    every row would read the node as it was before the statement.)"""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        held = out.get(row["id"])
        if held is None:
            out[row["id"]] = {**row, "alias_pairs": list(row["alias_pairs"])}
            continue
        if row["type"] != "CONCEPT":
            held["type"] = row["type"]
        keys = {p[1] for p in held["alias_pairs"]}
        held["alias_pairs"] += [p for p in row["alias_pairs"] if p[1] not in keys]
        for key in ("description", "embedding"):
            if row[key] is not None:
                held[key] = row[key]
        _merge_property_lists(held, row)
    return list(out.values())


def _merge_property_lists(held: dict[str, Any], row: Mapping[str, Any]) -> None:
    """Update ``held``'s property lists key by key with ``row``'s (a later value wins)."""
    if not row["property_keys"]:
        return
    merged = dict(zip(held["property_keys"], held["property_values"], strict=True))
    merged.update(zip(row["property_keys"], row["property_values"], strict=True))
    held["property_keys"], held["property_values"] = list(merged), list(merged.values())


def _relationship_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per relationship id: the last one, with the properties of all of them merged
    key by key in order (as if they were written one after the other)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        held = out.pop(row["id"], None)
        if held is not None:
            merged = {**row, "property_keys": list(held["property_keys"]),
                      "property_values": list(held["property_values"])}  # fmt: skip
            _merge_property_lists(merged, row)
            row = merged
        out[row["id"]] = row
    return list(out.values())


async def merge_relationships_tx(
    tx: AsyncManagedTransaction,
    ns: str,
    relationships: Sequence[Relationship],
    known: AbstractSet[str] = frozenset(),
) -> None:
    """Merge relationships by id; ``known``: entity ids merged earlier in this
    transaction, which need no existence check."""
    rows = sorted(
        _relationship_rows(relationship_row(r, ns) for r in relationships),
        key=lambda r: (r["source_id"], r["target_id"], r["id"]),
    )
    if not rows:
        return
    ends = [r["source_id"] for r in rows] + [r["target_id"] for r in rows]
    await _require(tx, ns, _MISSING_ENTITIES, ends, "Relationships", known=known)
    await _run(tx, _MERGE_RELATIONSHIPS, ns=ns, rows=rows)


async def refresh_mention_counts_tx(tx: AsyncManagedTransaction, ns: str, entity_ids: Iterable[str]) -> None:
    ids = sorted(set(entity_ids))
    if ids:
        await _run(tx, _REFRESH_MENTION_COUNTS, ns=ns, ids=ids)


def _mention_rows(mentions: Sequence[Mention]) -> list[dict[str, Any]]:
    """One row per (entity, chunk); repeated mentions in a batch add up."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for m in mentions:
        key = (m.entity_id, m.chunk_id)
        if key in rows:
            rows[key]["count"] += m.count
        else:
            rows[key] = {
                "entity_id": m.entity_id,
                "chunk_id": m.chunk_id,
                "document_id": m.document_id,
                "count": m.count,
            }
    return [rows[key] for key in sorted(rows)]


async def write_batch_tx(tx: AsyncManagedTransaction, ns: str, batch: WriteBatch, embedding_dim: int) -> None:
    """Land the graph part of ``batch``: replaced documents out, chunks, time links, entities,
    mentions and relationships in."""
    await write_batches_tx(tx, ns, [batch], embedding_dim)


async def write_batches_tx(
    tx: AsyncManagedTransaction, ns: str, batches: Sequence[WriteBatch], embedding_dim: int
) -> None:
    """Land the graph part of several batches with one statement per kind of row, as if
    they were written one after the other: replaced documents out first, then chunks,
    time links, entities (rows of one entity merged in batch order), mentions and
    relationships (the last batch's version of one id wins)."""
    for batch in batches:
        if batch.document.namespace_id != ns:
            raise InvalidInputError(
                f"document {batch.document.id} belongs to namespace {batch.document.namespace_id!r}, not {ns!r}"
            )
    written = {b.document.id for b in batches}
    for batch in batches:
        for old_document in dict.fromkeys(batch.replaces):
            if old_document != batch.document.id:
                if old_document in written:
                    raise InvalidInputError(
                        f"document {batch.document.id} replaces {old_document}, written in the same call; "
                        "write them one after the other"
                    )
                await delete_document_tx(tx, ns, old_document)
    if written:
        # A stranded graph of a document written again goes first: its mentions would
        # otherwise be counted twice (issue #38 item 1, the batch re-run after a kill).
        found = (await _single(tx, _STRANDED_DOCUMENTS, ns=ns, docs=sorted(written))).get("found") or []
        for document_id in found:
            await delete_document_tx(tx, ns, document_id)

    chunks = [c for b in batches for c in b.chunks]
    chunk_rows = sorted((chunk_props(c, ns) for c in chunks), key=lambda r: r["id"])
    stale_keys: list[str] = []
    if chunk_rows:
        stale_keys = (await _single(tx, _UPSERT_CHUNKS, ns=ns, rows=chunk_rows)).get("old_keys") or []
    time_rows = sorted(
        ({"id": c.id, "day": day_key(c.occurred_at)} for c in chunks if c.occurred_at is not None),
        key=lambda r: (r["day"], r["id"]),
    )
    if time_rows:
        await _run(tx, _LINK_TIME, ns=ns, rows=time_rows)
    if stale_keys:  # a rewritten chunk moved to another day
        await _run(tx, _DELETE_EMPTY_TIME_NODES, ns=ns, keys=stale_keys)

    entities = [e for b in batches for e in b.entities]
    await merge_entities_tx(tx, ns, entities, embedding_dim)
    merged = {e.id for e in entities}
    mention_rows = _mention_rows([m for b in batches for m in b.mentions])
    if mention_rows:
        # What this transaction merged exists; only names from outside it are checked.
        entity_ids = (r["entity_id"] for r in mention_rows)
        await _require(tx, ns, _MISSING_ENTITIES, entity_ids, "Mentions", known=merged)
        chunk_ids = (r["chunk_id"] for r in mention_rows)
        await _require(tx, ns, _MISSING_CHUNKS, chunk_ids, "Mentions", known={r["id"] for r in chunk_rows})
        await _run(tx, _MERGE_MENTIONS, ns=ns, rows=mention_rows)
        added: dict[str, int] = {}
        for r in mention_rows:
            added[r["entity_id"]] = added.get(r["entity_id"], 0) + r["count"]
        await _run(tx, _ADD_MENTION_COUNTS, ns=ns, rows=[{"id": k, "added": added[k]} for k in sorted(added)])
    await merge_relationships_tx(tx, ns, [r for b in batches for r in b.relationships], known=merged)


async def delete_document_tx(tx: AsyncManagedTransaction, ns: str, document_id: str) -> bool:
    """Remove a document's chunk nodes (with their ``MENTIONED_IN``/``AT_TIME`` links), the
    relationships learned from it, entities left with no mention and no relationship, and
    time nodes left with no chunk. Returns whether anything was there."""
    links = await _single(tx, _DOCUMENT_LINKS, ns=ns, doc=document_id)
    rels = await _single(tx, _DELETE_DOCUMENT_RELATIONSHIPS, ns=ns, doc=document_id)
    await _run(tx, _DELETE_DOCUMENT_CHUNKS, ns=ns, doc=document_id)
    touched = set(links.get("mentioned") or []) | set(rels.get("ends") or [])
    if touched:
        await _run(tx, _DELETE_ORPHANS, ns=ns, ids=sorted(touched))
        await refresh_mention_counts_tx(tx, ns, links.get("mentioned") or [])
    if links.get("keys"):
        await _run(tx, _DELETE_EMPTY_TIME_NODES, ns=ns, keys=links["keys"])
    return bool(links.get("chunks") or rels.get("n"))


async def delete_relationships_tx(
    tx: AsyncManagedTransaction, ns: str, relationship_ids: Sequence[str]
) -> int:
    ids = sorted(set(relationship_ids))
    if not ids:
        return 0
    return int((await _single(tx, _DELETE_RELATIONSHIPS, ns=ns, ids=ids)).get("n") or 0)


async def delete_entities_tx(tx: AsyncManagedTransaction, ns: str, entity_ids: Sequence[str]) -> int:
    ids = sorted(set(entity_ids))
    if not ids:
        return 0
    return int((await _single(tx, _DELETE_ENTITIES, ns=ns, ids=ids)).get("n") or 0)
