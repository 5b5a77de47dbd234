"""The graph channel's walk on Neo4j: how many hops each entity reached is from the seeds
(``GraphStore.walk_distances``).

The same breadth-first walk as ``neighbourhood`` (``search.neighbourhood_tx``): from each
frontier entity its heaviest ``max_fanout`` edges, weight then relationship id; the frontier
shares a ``max_entities`` budget, each entity's first edge before any entity's second; an
entity mentioned more than ``max_mentions`` times is not walked through. It reads no edge
properties and no entity fields, only ids, and each hop is one auto-commit statement: the
graph channel needs nothing else from the walk, and a managed transaction, the edges'
properties and a final read of the entities' fields cost three times the time and four times
the client CPU (docs/benchmarks.md, "Measurements behind design choices"). Hops are not one
snapshot: an entity written or deleted between two hops is seen by the later one only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from khora_core.storage.neo4j.search import MAX_DEPTH, MAX_NEIGHBOURHOOD
from khora_core.storage.neo4j.sessions import Sessions

__all__ = ["walk_distances"]

# One hop: for each frontier entity stored in the namespace, one row with its heaviest
# ``$fanout`` edges' (weight, id, far end), heaviest first (an entity not walked through,
# or with no edges, has none). Edges never cross namespaces: the check on the far end is a
# guard, not a filter.
_HOP_IDS = """
UNWIND $frontier AS fid
MATCH (a:Entity {namespace_id: $ns, id: fid})
CALL {
  WITH a
  WITH a WHERE $max_mentions IS NULL OR a.mention_count <= $max_mentions
  MATCH (a)-[r:RELATES]-(b:Entity)
  WHERE $types IS NULL OR r.type IN $types
  WITH r, b ORDER BY r.weight DESC, r.id LIMIT $fanout
  WITH r, b WHERE b.namespace_id = $ns
  RETURN collect([r.weight, r.id, b.id]) AS picked
}
RETURN collect([fid, picked]) AS rows
"""


async def walk_distances(
    db: Sessions,
    namespace_id: str,
    seeds: Sequence[str],
    *,
    depth: int,
    max_fanout: int,
    types: list[str] | None,
    max_entities: int | None,
    max_mentions: int | None,
) -> dict[str, int]:
    """Entity id -> hops from the nearest seed (seeds 0), for the seeds stored in the
    namespace and the entities the walk reaches from them."""
    order = list(dict.fromkeys(seeds))
    distance: dict[str, int] = dict.fromkeys(order, 0)
    limit = MAX_NEIGHBOURHOOD if max_entities is None else min(MAX_NEIGHBOURHOOD, len(order) + max_entities)
    stored: set[str] | None = None  # the seeds stored in the namespace, from the first hop
    frontier = order
    for hop in range(1, min(max(0, depth), MAX_DEPTH) + 1):
        if not frontier or len(distance) >= limit or max_fanout <= 0:
            break
        rows: list[Any] = await db.fetch_rows(
            _HOP_IDS,
            ns=namespace_id,
            frontier=frontier,
            fanout=max_fanout,
            types=types,
            max_mentions=max_mentions,
        )
        if stored is None:
            stored = {fid for fid, _ in rows}
        frontier = []
        for other in _round_robin([picked for _, picked in rows]):
            if other in distance:
                continue
            if len(distance) >= limit:
                break
            distance[other] = hop
            frontier.append(other)
    if stored is None:
        stored = await _stored(db, namespace_id, order)
    return {e: d for e, d in distance.items() if d > 0 or e in stored}


def _round_robin(picked: list[list[list[Any]]]) -> list[str]:
    """The far ends of every frontier entity's edges, each entity's first edge before any
    entity's second; edges at the same position by weight (heaviest first), then id."""
    out: list[str] = []
    for i in range(max((len(p) for p in picked), default=0)):
        # An edge deleted while the hop read it comes back without its properties: skipped.
        level = [p[i] for p in picked if len(p) > i and p[i][1] is not None and p[i][2] is not None]
        level.sort(key=lambda e: (-float(e[0] or 0.0), str(e[1])))
        out += [str(e[2]) for e in level]
    return out


async def _stored(db: Sessions, namespace_id: str, ids: list[str]) -> set[str]:
    """Which of ``ids`` are entities of the namespace (a walk that took no hop)."""
    if not ids:
        return set()
    rows: list[Any] = await db.fetch_rows(
        "UNWIND $ids AS id MATCH (e:Entity {namespace_id: $ns, id: id}) RETURN collect(id) AS rows",
        ns=namespace_id,
        ids=ids,
    )
    return set(rows)
