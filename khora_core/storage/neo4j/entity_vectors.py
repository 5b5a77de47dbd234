"""Nearest entities by embedding, on the Neo4j 5 vector index that every namespace shares.

Neo4j 5 cannot pre-filter its vector index, so a search asks the index for ``k`` candidates
per vector and keeps this namespace's. ``k`` is sized by the namespace's share of the index
(:func:`first_k`), so that it should hold ``4 * limit`` of the namespace's entities; when
that ``k`` would pass ``_MAX_VECTOR_K``, the namespace is small beside the others and is
scanned exactly instead, without first asking the index for ever larger ``k``.

The index's own scores are approximate (it may quantise vectors) and only pick candidates;
the returned score is the exact raw cosine of the stored floats, computed by the server
(``vector.similarity.cosine`` is (1 + cos) / 2), and the hits travel without their
embeddings (decoding 384 floats per entity cost more than the search itself).

The common case is one auto-commit statement (:data:`_TOP_HITS`): candidates from the index,
this namespace's kept, scored, and the best ``limit`` returned with their fields, for every
vector at once. The counts that size ``k`` are cached by the store (:class:`EntityCounts`).
The rest runs in one managed transaction (:func:`grown_searches_tx`): a namespace too
small beside the others for the index (``first_k`` None) is scanned exactly, and a vector
that found fewer than ``limit`` of the namespace's entities while the index had more to give
asks for a larger ``k``, unless the index's candidates already score below the caller's
``min_similarity``: other namespaces' entities that are all nearer than anything the caller
would keep end the search instead of growing it into an exact scan. Figures:
``docs/benchmarks.md``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from neo4j import AsyncManagedTransaction

from khora_core.errors import InvalidInputError
from khora_core.storage.neo4j.records import ENTITY_FIELDS, entity_from_props, present
from khora_core.storage.neo4j.schema import VECTOR_INDEX
from khora_core.storage.neo4j.search import ENTITIES_BY_ID, records_of, rows_of
from khora_core.storage.neo4j.sessions import Sessions
from khora_core.storage.protocols import EntityHit

__all__ = ["EntityCounts", "first_k", "search_entity_vectors"]

#: Largest ``k`` asked of the vector index before falling back to an exact in-namespace scan.
_MAX_VECTOR_K = 4096
#: How far (in raw cosine) the index's approximate score of a candidate may fall below its
#: exact cosine. A vector whose ``k``-th candidate scores more than this below the caller's
#: ``min_similarity`` asks for no larger ``k``: the candidates past it would be dropped.
_INDEX_SCORE_SLACK = 0.05
#: Namespaces are counted up to this many entities when sizing ``k``.
_COUNT_CAP = 4096
#: How long :class:`EntityCounts` keeps a namespace's counts, and how many namespaces.
_COUNTS_TTL_S = 30.0
_COUNTS_KEPT = 1024

# For every vector: how many candidates the index gave (``seen``) and the index score of the
# last (``lowest``), how many are this namespace's (``found``: ``k`` is sized to make that
# about ``4 * limit``), and the best ``$limit`` of those with their fields, exact score first.
_TOP_HITS = f"""
UNWIND range(0, size($vectors) - 1) AS i
CALL db.index.vector.queryNodes($index, $k, $vectors[i]) YIELD node, score
WITH i, collect(node) AS nodes, min(score) AS lowest
CALL {{
  WITH i, nodes
  UNWIND nodes AS n
  WITH i, n WHERE n.namespace_id = $ns
  WITH n, vector.similarity.cosine(n.embedding, $vectors[i]) AS s
  ORDER BY s DESC, n.id
  WITH collect([s, n {ENTITY_FIELDS}]) AS ranked
  RETURN size(ranked) AS found, ranked[..$limit] AS hits
}}
RETURN collect({{i: i, seen: size(nodes), lowest: lowest, found: found, hits: hits}}) AS rows
"""

# One vector's candidates at a larger ``k``.
_VECTOR_QUERY = """
CALL db.index.vector.queryNodes($index, $k, $vector) YIELD node, score
WITH collect(node) AS nodes, min(score) AS lowest
RETURN size(nodes) AS seen, lowest,
       [n IN nodes WHERE n.namespace_id = $ns | [n.id, vector.similarity.cosine(n.embedding, $vector)]] AS hits
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


class EntityCounts:
    """Entities in all namespaces and in each namespace (up to ``_COUNT_CAP``), as
    ``first_k`` needs them, kept ``_COUNTS_TTL_S`` seconds.

    The store clears them on each of its writes; another process's writes show within the
    time to live. A stale count only changes how many candidates the index is asked for.
    """

    def __init__(self, ttl_s: float = _COUNTS_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._kept: dict[str, tuple[float, int, int]] = {}

    async def get(self, db: Sessions, namespace_id: str) -> tuple[int, int]:
        """(entities in all namespaces, entities in ``namespace_id``)."""
        now = time.monotonic()
        kept = self._kept.get(namespace_id)
        if kept is not None and now - kept[0] < self.ttl_s:
            return kept[1], kept[2]
        rows = await db.fetch(_COUNT_ENTITIES, ns=namespace_id, cap=_COUNT_CAP)
        total, own = (int(rows[0]["total"]), int(rows[0]["n"])) if rows else (0, 0)
        if len(self._kept) >= _COUNTS_KEPT:
            self._kept.clear()
        self._kept[namespace_id] = (now, total, own)
        return total, own

    def clear(self) -> None:
        """Forget every count (the store has just written)."""
        self._kept.clear()


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


async def search_entity_vectors(
    db: Sessions,
    counts: EntityCounts,
    ns: str,
    vectors: Sequence[Sequence[float]],
    limit: int,
    min_similarity: float,
    dim: int,
) -> list[list[EntityHit]]:
    """Top entities of the namespace by raw cosine similarity, for each vector (module
    docstring); hits below ``min_similarity`` are dropped.

    Raises:
        InvalidInputError: a vector has the wrong dimension.
    """
    queries = [_query_vector(v, dim) for v in vectors]
    out: list[list[EntityHit]] = [[] for _ in vectors]
    live = [i for i, q in enumerate(queries) if q is not None]
    if limit <= 0 or not live:
        return out
    total, own = await counts.get(db, ns)
    if own == 0:
        return out
    k = first_k(limit, total, own)
    rest = live
    if k is not None:
        rows = await db.fetch_rows(
            _TOP_HITS,
            index=VECTOR_INDEX,
            k=k,
            ns=ns,
            vectors=[queries[i].tolist() for i in live],  # type: ignore[union-attr]
            limit=limit,
        )
        by_position = {int(r["i"]): r for r in rows}
        rest = []
        for j, i in enumerate(live):
            row = by_position.get(j)  # none: the index gave no candidate at all
            if (
                row is None
                or row["found"] >= limit
                or row["seen"] < k
                or _past_floor(row["lowest"], min_similarity)
            ):
                out[i] = _hits(row["hits"] if row is not None else [], min_similarity)
            else:
                rest.append(i)
    if rest:
        grown = await db.read(
            grown_searches_tx,
            ns,
            [queries[i] for i in rest],
            limit,
            min_similarity,
            k,
        )
        for i, hits in zip(rest, grown, strict=True):
            out[i] = hits
    return out


def _raw_cosine(score: Any) -> float:
    """The raw cosine of a ``vector.similarity.cosine`` score, which is (1 + cos) / 2."""
    return 2.0 * float(score) - 1.0


def _past_floor(lowest: Any, min_similarity: float) -> bool:
    """True when the index's lowest candidate score is so far below ``min_similarity`` that
    a larger ``k`` could only add candidates the caller drops."""
    return lowest is not None and _raw_cosine(lowest) < min_similarity - _INDEX_SCORE_SLACK


def _hits(pairs: Sequence[Any], min_similarity: float) -> list[EntityHit]:
    """``[(index score, entity fields)]``, best first, as hits of at least ``min_similarity``."""
    out = []
    for score, fields in pairs:
        if score is None or not present(fields):
            continue
        cosine = _raw_cosine(score)
        if cosine >= min_similarity:
            out.append(EntityHit(entity=entity_from_props(fields), score=cosine))
    return out


async def grown_searches_tx(
    tx: AsyncManagedTransaction,
    ns: str,
    queries: Sequence[np.ndarray],
    limit: int,
    min_similarity: float,
    k: int | None,
) -> list[list[EntityHit]]:
    """The searches that the statement at ``k`` could not answer: each vector asks the
    index for four times more until ``limit`` are found or the index is exhausted (past
    ``_MAX_VECTOR_K``, an exact scan); with ``k`` None, every vector is scanned exactly in
    one statement."""
    found: list[list[tuple[str, float]]]
    if k is None:
        rows = await records_of(
            tx, _VECTORS_EXACT, ns=ns, keep=limit * 4, vectors=[q.tolist() for q in queries]
        )
        by_position = {int(r["i"]): r["hits"] for r in rows}
        found = [by_position.get(j, []) for j in range(len(queries))]
    else:
        found = [await _candidates(tx, ns, q, limit, min_similarity, k) for q in queries]
    scored: list[list[tuple[float, str]]] = []
    for hits in found:
        ranked = sorted(
            ((_raw_cosine(s), eid) for eid, s in hits if s is not None), key=lambda t: (-t[0], t[1])
        )
        scored.append([(cosine, eid) for cosine, eid in ranked if cosine >= min_similarity][:limit])
    ids = sorted({eid for pairs in scored for _, eid in pairs})
    rows = await rows_of(tx, ENTITIES_BY_ID, ns=ns, ids=ids) if ids else []
    entities = {r["e"]["id"]: entity_from_props(r["e"]) for r in rows if present(r["e"])}
    return [
        [EntityHit(entity=entities[eid], score=c) for c, eid in pairs if eid in entities] for pairs in scored
    ]


async def _candidates(
    tx: AsyncManagedTransaction, ns: str, query: np.ndarray, limit: int, min_similarity: float, k: int
) -> list[tuple[str, float]]:
    """(entity id, exact score) candidates of one vector that found too few at ``k``:
    ``k`` grows fourfold until ``limit`` of this namespace are found, the index is
    exhausted, or its candidates fall below ``min_similarity``; past ``_MAX_VECTOR_K`` an
    exact scan of the namespace is cheaper."""
    params = {"index": VECTOR_INDEX, "vector": query.tolist(), "ns": ns}
    while True:
        if k >= _MAX_VECTOR_K:
            rows = await records_of(tx, _VECTORS_EXACT, ns=ns, keep=limit * 4, vectors=[params["vector"]])
            return rows[0]["hits"] if rows else []
        k *= 4
        rows = await records_of(tx, _VECTOR_QUERY, k=k, **params)
        seen, lowest, hits = (rows[0]["seen"], rows[0]["lowest"], rows[0]["hits"]) if rows else (0, None, [])
        if len(hits) >= limit or seen < k or _past_floor(lowest, min_similarity):
            return hits


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
