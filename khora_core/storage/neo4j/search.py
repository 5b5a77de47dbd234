"""The Neo4j graph store's searches: neighbourhood walk, chunks by entity, entity vectors.

Each is a function of one managed read transaction (``session.execute_read``), so a walk
of several hops sees one consistent snapshot of the graph.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from neo4j import AsyncManagedTransaction, AsyncSession

from khora_core.errors import InvalidInputError
from khora_core.models import ChunkHit, Relationship
from khora_core.storage.neo4j.records import (
    ENTITY_FIELDS,
    chunk_from_props,
    entity_from_props,
    relationship_from_props,
)
from khora_core.storage.neo4j.schema import VECTOR_INDEX
from khora_core.storage.protocols import EntityHit, Neighbourhood, SearchPage

__all__ = [
    "GET_ENTITIES",
    "MAX_DEPTH",
    "MAX_NEIGHBOURHOOD",
    "chunks_for_entities_tx",
    "entity_vector_search_tx",
    "entity_vector_searches_tx",
    "neighbourhood_tx",
    "records_of",
    "rows_of",
]

#: Deepest walk served (the spec's ``graph_max_depth``); deeper requests are capped.
MAX_DEPTH = 4
#: Stop expanding a neighbourhood once it holds this many entities (depth x fan-out can explode).
MAX_NEIGHBOURHOOD = 5000
#: Largest ``k`` asked of the vector index before falling back to an exact in-namespace scan.
_MAX_VECTOR_K = 4096
#: Namespaces are counted up to this many entities when sizing ``k``.
_COUNT_CAP = 4096

# One hop: from each frontier entity, its heaviest ``$fanout`` edges (either direction).
# collect()[..n] instead of a CALL subquery keeps this valid on every Neo4j 5.x.
_HOP = """
UNWIND $frontier AS fid
MATCH (a:Entity {namespace_id: $ns, id: fid})-[r:RELATES]-(b:Entity {namespace_id: $ns})
WHERE $types IS NULL OR r.type IN $types
WITH a, r, b ORDER BY r.weight DESC, r.id
WITH a, collect([r, b.id])[..$fanout] AS picked
UNWIND range(0, size(picked) - 1) AS i
WITH i, picked[i][0] AS r, picked[i][1] AS other_id
ORDER BY i, r.weight DESC, r.id
RETURN collect({
  r: properties(r), source_id: startNode(r).id, target_id: endNode(r).id, other_id: other_id
}) AS rows
"""

_ENTITIES_BY_ID = f"""
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
_BY_MENTIONS = "total DESC, c.document_id, c.index, c.id"
# DESC puts nulls first in Cypher: undated chunks are sent to the back explicitly.
_BY_TIME = "c.occurred_at IS NULL, c.occurred_at DESC, " + _BY_MENTIONS

# Candidates and their exact cosine, scored in the server (``vector.similarity.cosine`` is
# (1 + cos) / 2 over the stored floats); no embedding travels back for the candidates.
_VECTOR_QUERY = """
CALL db.index.vector.queryNodes($index, $k, $vector) YIELD node
WITH collect(node) AS nodes
RETURN size(nodes) AS seen,
       [n IN nodes WHERE n.namespace_id = $ns | [n.id, vector.similarity.cosine(n.embedding, $vector)]] AS hits
"""

# The same for several vectors in one statement (a vector with no candidate has no row).
_VECTORS_QUERY = """
UNWIND range(0, size($vectors) - 1) AS i
CALL db.index.vector.queryNodes($index, $k, $vectors[i]) YIELD node
WITH i, collect(node) AS nodes
RETURN i, size(nodes) AS seen,
       [n IN nodes WHERE n.namespace_id = $ns | [n.id, vector.similarity.cosine(n.embedding, $vectors[i])]] AS hits
"""

# The exact scan of the namespace, for several vectors in one statement.
_VECTORS_EXACT = """
UNWIND range(0, size($vectors) - 1) AS i
CALL {
  WITH i
  MATCH (e:Entity {namespace_id: $ns}) WHERE e.embedding IS NOT NULL
  WITH e, vector.similarity.cosine(e.embedding, $vectors[i]) AS s
  ORDER BY s DESC, e.id LIMIT $keep
  RETURN collect([e.id, s]) AS hits
}
RETURN i, hits
"""

# Entities in the namespace (counted up to $cap, index entries only) and in all namespaces
# (the count store).
_COUNT_ENTITIES = """
CALL { MATCH (e:Entity) RETURN count(e) AS total }
CALL { MATCH (e:Entity {namespace_id: $ns}) WITH e LIMIT $cap RETURN count(e) AS n }
RETURN total, n
"""

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
    result = await tx.run(query, params)
    return await result.data()


async def rows_of(
    tx: AsyncManagedTransaction | AsyncSession, query: str, **params: Any
) -> list[dict[str, Any]]:
    """The rows of a statement written to return them as one list, ``RETURN collect({...}) AS rows``.

    The async driver spends about 50 us on each streamed record (a few event-loop turns
    per message): 300 relationships cost 20 ms as records and 8 ms as one list.
    """
    result = await tx.run(query, params)
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
) -> Neighbourhood:
    """Breadth-first, one query per hop, so the fan-out cap applies at every hop. Within a
    hop, each frontier entity's heaviest edge comes first, then each one's second, so a
    ``max_entities`` cap shares the budget among the frontier."""
    rows = await rows_of(tx, _ENTITIES_BY_ID, ns=ns, ids=seeds) if seeds else []
    distance: dict[str, int] = {r["e"]["id"]: 0 for r in rows}
    limit = (
        MAX_NEIGHBOURHOOD if max_entities is None else min(MAX_NEIGHBOURHOOD, len(distance) + max_entities)
    )
    walked: dict[str, Relationship] = {}
    frontier = list(distance)
    for hop in range(1, min(max(0, depth), MAX_DEPTH) + 1):
        if not frontier or len(distance) >= limit or max_fanout <= 0:
            break
        nxt: list[str] = []
        for row in await rows_of(tx, _HOP, ns=ns, frontier=frontier, fanout=max_fanout, types=types):
            if row["other_id"] not in distance:
                if len(distance) >= limit:
                    continue
                distance[row["other_id"]] = hop
                nxt.append(row["other_id"])
            rel = relationship_from_props(row["r"], row["source_id"], row["target_id"])
            walked.setdefault(rel.id, rel)
        frontier = nxt
    found = {
        r["e"]["id"]: entity_from_props(r["e"])
        for r in await rows_of(tx, _ENTITIES_BY_ID, ns=ns, ids=list(distance))
    }
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
    page = SearchPage()
    where, params = "true", {}
    if prepared is not None:
        compiled = prepared[1]
        page.pushed_keys = list(compiled.pushed_keys)
        page.post_filtered_keys = list(compiled.residual_keys)
        where = compiled.sql or "true"
        params = dict(compiled.params or {})
    if not entity_ids or limit <= 0:
        return page
    query = _CHUNKS_FOR_ENTITIES.format(where=where, order=_BY_TIME if temporal_sort else _BY_MENTIONS)
    skip, size = 0, limit if prepared is None else limit * 4
    while True:
        rows = await rows_of(tx, query, ns=ns, ids=entity_ids, skip=skip, size=size, **params)
        for row in rows:
            chunk = chunk_from_props(row["c"])
            # Defensive: the pushed part was already enforced, but the result must never
            # depend on one compiler being exactly right.
            if prepared is not None and not prepared[0].matches(chunk.filter_record()):
                continue
            page.hits.append(ChunkHit(chunk=chunk, score=float(row["total"]), rank=len(page.hits) + 1))
            if len(page.hits) == limit:
                return page
        if len(rows) < size:
            return page
        skip, size = skip + size, size * 4


def _query_vector(vector: Sequence[float], dim: int) -> np.ndarray | None:
    """The vector as float64, None when it has no direction (zero or not finite).

    Raises:
        InvalidInputError: the wrong dimension.
    """
    query = np.asarray([float(x) for x in vector], dtype=np.float64)
    if query.shape[0] != dim:
        raise InvalidInputError(
            f"the query vector has {query.shape[0]} dimensions; entity embeddings have {dim}"
        )
    norm = float(np.linalg.norm(query))
    return query if norm != 0.0 and math.isfinite(norm) else None


async def _candidates(
    tx: AsyncManagedTransaction,
    ns: str,
    query: np.ndarray,
    limit: int,
    k: int,
    first: tuple[int, list[Any]] | None = None,
) -> list[tuple[str, float]]:
    """(entity id, index score) candidates of one vector: ``k`` grows until ``limit`` of
    this namespace are found or the index is exhausted; past ``_MAX_VECTOR_K`` an exact
    scan of the namespace is cheaper. ``first``: (seen, hits) of a query at ``k`` already run."""
    params = {"index": VECTOR_INDEX, "vector": query.tolist(), "ns": ns}
    while True:
        if first is not None:
            (seen, hits), first = first, None
        else:
            rows = await records_of(tx, _VECTOR_QUERY, k=k, **params)
            seen, hits = (rows[0]["seen"], rows[0]["hits"]) if rows else (0, [])
        if len(hits) >= limit or seen < k:
            return hits
        if k >= _MAX_VECTOR_K:
            rows = await records_of(tx, _VECTORS_EXACT, ns=ns, keep=limit * 4, vectors=[params["vector"]])
            return rows[0]["hits"] if rows else []
        k *= 4


def first_k(limit: int, total: int, own: int) -> int | None:
    """The first ``k`` to ask the shared vector index for: enough that it should hold
    ``4 * limit`` of the namespace's ``own`` entities among ``total`` in all namespaces
    (at least ``max(4 * limit, 50)``); None when that passes ``_MAX_VECTOR_K``: scan the
    namespace exactly. ``own`` is counted up to ``_COUNT_CAP``; a namespace that large
    starts at the base ``k``."""
    base = max(limit * 4, 50)
    if own >= _COUNT_CAP:
        return base
    wanted = math.ceil(limit * 4 * max(total, own) / max(own, 1))
    return None if wanted > _MAX_VECTOR_K else max(base, wanted)


async def entity_vector_search_tx(
    tx: AsyncManagedTransaction,
    ns: str,
    vector: Sequence[float],
    limit: int,
    min_similarity: float,
    dim: int,
) -> list[EntityHit]:
    """Top entities of the namespace by raw cosine similarity (see
    :func:`entity_vector_searches_tx`)."""
    return (await entity_vector_searches_tx(tx, ns, [vector], limit, min_similarity, dim))[0]


async def entity_vector_searches_tx(
    tx: AsyncManagedTransaction,
    ns: str,
    vectors: Sequence[Sequence[float]],
    limit: int,
    min_similarity: float,
    dim: int,
) -> list[list[EntityHit]]:
    """Top entities of the namespace by raw cosine similarity, for each vector.

    The index is shared by all namespaces and Neo4j 5 cannot pre-filter it, so ask for
    ``k`` candidates per vector and keep this namespace's: one statement for every vector,
    then, only for a vector that found too few, ``k`` grows until enough are found or the
    index is exhausted. The first ``k`` is sized by the namespace's share of the index
    (:func:`first_k`), so that it should hold ``4 * limit`` of this namespace's entities;
    when that ``k`` would pass ``_MAX_VECTOR_K``, the namespace is small beside the others
    and is scanned exactly instead, every vector in one statement. Starting every search at
    ``k = 50``, the linking of one LoCoMo conversation (about 600 entities, beside a
    namespace of 52,000) asked the index four times per vector before scanning exactly, and
    took 270 ms; sized, 9 ms. The index's own scores are approximate (it may quantise
    vectors) and only pick candidates; the returned score is the exact raw cosine of the
    stored floats, computed by the server, and only the returned entities' properties
    (without embeddings) travel, in one read for all vectors.

    Raises:
        InvalidInputError: a vector has the wrong dimension.
    """
    queries = [_query_vector(v, dim) for v in vectors]
    if limit <= 0:
        return [[] for _ in vectors]
    live = [i for i, q in enumerate(queries) if q is not None]
    found: dict[int, list[tuple[str, float]]] = {}
    k: int | None = None
    if live:
        counted = await records_of(tx, _COUNT_ENTITIES, ns=ns, cap=_COUNT_CAP)
        total, own = (int(counted[0]["total"]), int(counted[0]["n"])) if counted else (0, 0)
        if own == 0:
            return [[] for _ in vectors]
        k = first_k(limit, total, own)
    if live and k is None:
        rows = await records_of(
            tx,
            _VECTORS_EXACT,
            ns=ns,
            keep=limit * 4,
            vectors=[queries[i].tolist() for i in live],  # type: ignore[union-attr]
        )
        found = {live[int(r["i"])]: r["hits"] for r in rows}
    elif live and k is not None:
        rows = await records_of(
            tx,
            _VECTORS_QUERY,
            index=VECTOR_INDEX,
            k=k,
            ns=ns,
            vectors=[queries[i].tolist() for i in live],  # type: ignore[union-attr]
        )
        first = {int(r["i"]): (int(r["seen"]), r["hits"]) for r in rows}
        for j, i in enumerate(live):  # a vector that found too few asks for more on its own
            found[i] = await _candidates(tx, ns, queries[i], limit, k, first=first.get(j, (0, [])))  # type: ignore[arg-type]
    scored: dict[int, list[tuple[float, str]]] = {}
    for i, hits in found.items():
        ranked = sorted(
            ((2.0 * float(s) - 1.0, eid) for eid, s in hits if s is not None), key=lambda t: (-t[0], t[1])
        )
        scored[i] = [(cosine, eid) for cosine, eid in ranked if cosine >= min_similarity][:limit]
    ids = sorted({eid for pairs in scored.values() for _, eid in pairs})
    # The hits' fields without their embeddings (decoding 384 floats per entity cost
    # more than the search itself).
    rows = await rows_of(tx, _ENTITIES_BY_ID, ns=ns, ids=ids) if ids else []
    entities = {r["e"]["id"]: entity_from_props(r["e"]) for r in rows}
    return [
        [
            EntityHit(entity=entities[eid], score=cosine)
            for cosine, eid in scored.get(i, [])
            if eid in entities
        ]
        for i in range(len(vectors))
    ]
