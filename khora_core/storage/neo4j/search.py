"""The Neo4j graph store's searches: neighbourhood walk, chunks by entity (entity vectors:
``entity_vectors.py``).

Each is a function of one managed read transaction (``session.execute_read``), so a walk
of several hops sees one consistent snapshot of the graph.
"""

from __future__ import annotations

from typing import Any

from neo4j import AsyncManagedTransaction, AsyncSession

from khora_core.models import ChunkHit, Relationship
from khora_core.storage.neo4j.params import quiet
from khora_core.storage.neo4j.records import (
    ENTITY_FIELDS,
    chunk_from_props,
    entity_from_props,
    present,
    present_edge,
    relationship_from_props,
)
from khora_core.storage.protocols import Neighbourhood, SearchPage

__all__ = [
    "ENTITIES_BY_ID",
    "GET_ENTITIES",
    "MAX_DEPTH",
    "MAX_NEIGHBOURHOOD",
    "chunks_for_entities_tx",
    "chunks_for_entity_groups_tx",
    "neighbourhood_tx",
    "records_of",
    "rows_of",
]

#: Deepest walk served (the spec's ``graph_max_depth``); deeper requests are capped.
MAX_DEPTH = 4
#: Stop expanding a neighbourhood once it holds this many entities (depth x fan-out can explode).
MAX_NEIGHBOURHOOD = 5000

# One hop: from each frontier entity, its heaviest ``$fanout`` edges (either direction),
# weight then relationship id, as the embedded store orders them. The per-entity subquery
# lets Neo4j keep only the top ``$fanout`` while it expands a popular entity's edges, and
# reads the far end's namespace and id for those alone (edges never cross namespaces, so
# the check there is a guard, not a filter). With ``$max_mentions``, a common entity is not
# expanded at all. Measured in benchmarks.md, "Measurements behind design choices".
_HOP = """
UNWIND $frontier AS fid
CALL {
  WITH fid
  MATCH (a:Entity {namespace_id: $ns, id: fid})
  WHERE $max_mentions IS NULL OR a.mention_count <= $max_mentions
  MATCH (a)-[r:RELATES]-(b:Entity)
  WHERE $types IS NULL OR r.type IN $types
  WITH r, b ORDER BY r.weight DESC, r.id LIMIT $fanout
  WITH r, b WHERE b.namespace_id = $ns
  RETURN collect([r, b.id]) AS picked
}
UNWIND range(0, size(picked) - 1) AS i
WITH i, picked[i][0] AS r, picked[i][1] AS other_id
ORDER BY i, r.weight DESC, r.id
RETURN collect({
  r: properties(r), source_id: startNode(r).id, target_id: endNode(r).id, other_id: other_id
}) AS rows
"""

ENTITIES_BY_ID = f"""
UNWIND $ids AS id
MATCH (e:Entity {{namespace_id: $ns, id: id}})
RETURN collect({{e: e {ENTITY_FIELDS}}}) AS rows
"""

_CHUNKS_FOR_ENTITIES = """
MATCH (e:Entity {{namespace_id: $ns}})-[m:MENTIONED_IN]->(c:Chunk {{namespace_id: $ns}})
WHERE e.id IN $ids AND ({where})
WITH c, sum(m.count) AS total
ORDER BY {order}
SKIP $skip LIMIT $size
RETURN collect({{c: properties(c), total: total}}) AS rows
"""
# The first page of every group in one statement (``chunks_for_entity_groups_tx``).
_CHUNKS_FOR_GROUPS = """
UNWIND range(0, size($groups) - 1) AS g
CALL {{
  WITH g
  MATCH (e:Entity {{namespace_id: $ns}})-[m:MENTIONED_IN]->(c:Chunk {{namespace_id: $ns}})
  WHERE e.id IN $groups[g] AND ({where})
  WITH c, sum(m.count) AS total
  ORDER BY {order}
  LIMIT $size
  RETURN collect({{c: properties(c), total: total}}) AS rows
}}
RETURN collect({{g: g, rows: rows}}) AS rows
"""
_BY_MENTIONS = "total DESC, c.document_id, c.index, c.id"
# DESC puts nulls first in Cypher: undated chunks are sent to the back explicitly.
_BY_TIME = "c.occurred_at IS NULL, c.occurred_at DESC, " + _BY_MENTIONS

#: Entities by id, every property (embedding included).
GET_ENTITIES = """
UNWIND $ids AS id
MATCH (e:Entity {namespace_id: $ns, id: id})
RETURN collect({e: properties(e)}) AS rows
"""


async def records_of(
    tx: AsyncManagedTransaction | AsyncSession, query: str, **params: Any
) -> list[dict[str, Any]]:
    """Every record of a statement, as dicts (for statements that return a record or a few),
    in a managed transaction or, through a session, an auto-commit one."""
    result = await tx.run(query, quiet(params))
    return await result.data()


async def rows_of(
    tx: AsyncManagedTransaction | AsyncSession, query: str, **params: Any
) -> list[dict[str, Any]]:
    """The rows of a statement written to return them as one list, ``RETURN collect({...}) AS rows``.

    The async driver spends about 50 us on each streamed record (a few event-loop turns
    per message): 300 relationships cost 20 ms as records and 8 ms as one list.
    """
    result = await tx.run(query, quiet(params))
    record = await result.single(strict=False)
    return record["rows"] if record is not None else []


async def neighbourhood_tx(
    tx: AsyncManagedTransaction,
    ns: str,
    seeds: list[str],
    depth: int,
    max_fanout: int,
    types: list[str] | None,
    max_entities: int | None = None,
    max_mentions: int | None = None,
) -> Neighbourhood:
    """Breadth-first, one query per hop, so the fan-out cap applies at every hop. Within a
    hop, each frontier entity's heaviest edge comes first, then each one's second, so a
    ``max_entities`` cap shares the budget among the frontier. A seed that is not in the
    namespace walks nowhere (the hop matches no entity) and is dropped with the final read
    of the entities' fields, so the walk costs one statement per hop and one more."""
    distance: dict[str, int] = dict.fromkeys(seeds, 0)
    limit = (
        MAX_NEIGHBOURHOOD if max_entities is None else min(MAX_NEIGHBOURHOOD, len(distance) + max_entities)
    )
    walked: dict[str, Relationship] = {}
    frontier = list(distance)
    for hop in range(1, min(max(0, depth), MAX_DEPTH) + 1):
        if not frontier or len(distance) >= limit or max_fanout <= 0:
            break
        nxt: list[str] = []
        hop_rows = await rows_of(
            tx, _HOP, ns=ns, frontier=frontier, fanout=max_fanout, types=types, max_mentions=max_mentions
        )
        for row in hop_rows:
            if row["other_id"] is None or not present_edge(row):
                continue  # deleted while the walk read it
            if row["other_id"] not in distance:
                if len(distance) >= limit:
                    continue
                distance[row["other_id"]] = hop
                nxt.append(row["other_id"])
            rel = relationship_from_props(row["r"], row["source_id"], row["target_id"])
            walked.setdefault(rel.id, rel)
        frontier = nxt
    rows = await rows_of(tx, ENTITIES_BY_ID, ns=ns, ids=list(distance)) if distance else []
    found = {r["e"]["id"]: entity_from_props(r["e"]) for r in rows if present(r["e"])}
    return Neighbourhood(
        entities=[found[e] for e in distance if e in found],
        relationships=[r for r in walked.values() if r.source_id in found and r.target_id in found],
        distance={e: d for e, d in distance.items() if e in found},
    )


def _prepare_filter(filter: Any) -> tuple[Any, Any] | None:
    """(parsed filter, compiled Cypher) or None without a filter."""
    if filter is None:
        return None
    from khora_core.filters import RecallFilter, compile_cypher

    parsed = filter if isinstance(filter, RecallFilter) else RecallFilter.parse(filter)
    return parsed, compile_cypher(parsed, node_var="c", param_prefix="f")


async def chunks_for_entities_tx(
    tx: AsyncManagedTransaction,
    ns: str,
    entity_ids: list[str],
    limit: int,
    filter: Any,
    temporal_sort: bool,
) -> SearchPage:
    """Chunks mentioning the entities, best first, with filter pushdown and the in-memory re-check.

    With a filter it over-fetches (4x the limit, then 4x more per round) so the re-check
    cannot starve the page.
    """
    prepared = _prepare_filter(filter)
    page = _empty_page(prepared)
    if not entity_ids or limit <= 0:
        return page
    where, params = _where(prepared)
    query = _CHUNKS_FOR_ENTITIES.format(where=where, order=_BY_TIME if temporal_sort else _BY_MENTIONS)
    skip, size = 0, limit if prepared is None else limit * 4
    while True:
        rows = await rows_of(tx, query, ns=ns, ids=entity_ids, skip=skip, size=size, **params)
        if _take(page, rows, prepared, limit) or len(rows) < size:
            return page
        skip, size = skip + size, size * 4


async def chunks_for_entity_groups_tx(
    tx: AsyncManagedTransaction,
    ns: str,
    groups: list[list[str]],
    limit: int,
    filter: Any,
    temporal_sort: bool,
) -> list[SearchPage]:
    """``chunks_for_entities_tx`` for each group, the first page of all of them in one
    statement; a group whose filtered page came up short while more chunks remain is
    finished on its own."""
    prepared = _prepare_filter(filter)
    pages = [_empty_page(prepared) for _ in groups]
    live = [i for i, ids in enumerate(groups) if ids]
    if not live or limit <= 0:
        return pages
    where, params = _where(prepared)
    order = _BY_TIME if temporal_sort else _BY_MENTIONS
    size = limit if prepared is None else limit * 4
    rows = await rows_of(
        tx,
        _CHUNKS_FOR_GROUPS.format(where=where, order=order),
        ns=ns,
        groups=[groups[i] for i in live],
        size=size,
        **params,
    )
    for row in rows:
        i = live[int(row["g"])]
        if not _take(pages[i], row["rows"], prepared, limit) and len(row["rows"]) == size:
            pages[i] = await chunks_for_entities_tx(tx, ns, groups[i], limit, filter, temporal_sort)
    return pages


def _empty_page(prepared: tuple[Any, Any] | None) -> SearchPage:
    """A page with no hits that names the filter's pushed and re-checked keys."""
    page = SearchPage()
    if prepared is not None:
        page.pushed_keys = list(prepared[1].pushed_keys)
        page.post_filtered_keys = list(prepared[1].residual_keys)
    return page


def _where(prepared: tuple[Any, Any] | None) -> tuple[str, dict[str, Any]]:
    """The compiled filter's Cypher predicate (``true`` without one) and its parameters."""
    if prepared is None:
        return "true", {}
    return prepared[1].sql or "true", dict(prepared[1].params or {})


def _take(page: SearchPage, rows: list[dict[str, Any]], prepared: tuple[Any, Any] | None, limit: int) -> bool:
    """Append the rows that pass the filter's re-check to ``page``; True once it holds ``limit``."""
    for row in rows:
        if not present(row["c"]):
            continue  # deleted while the statement read it
        chunk = chunk_from_props(row["c"])
        # Defensive: the pushed part was already enforced, but the result must never
        # depend on one compiler being exactly right.
        if prepared is not None and not prepared[0].matches(chunk.filter_record()):
            continue
        page.hits.append(ChunkHit(chunk=chunk, score=float(row["total"]), rank=len(page.hits) + 1))
        if len(page.hits) == limit:
            return True
    return False
