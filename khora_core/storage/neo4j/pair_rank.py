"""The pair rank: the relationships between one ordered pair of entities in index order,
heaviest first.

A recall result carries the relationships among its entities, at most ``per_pair`` between
one ordered pair (``chunk_graph``). Two popular entities are joined once per document that
names both, so in a large store a pair of hubs holds hundreds of parallel ``RELATES`` edges,
and reading them to keep the heaviest few read them all. Instead every ``RELATES`` edge
carries

    pair         <len(namespace)>:<namespace><len(source id)>:<source id><len(target id)>:<target id>
    rank_weight  -weight

under a composite range index on ``(pair, rank_weight, id)`` (``khora_relates_pair``): one
pair's heaviest ``n`` relationships, ties by id, are an index seek that stops after ``n``
entries, however many the pair holds. ``pair`` is length-prefixed (``keys``), so one pair's
key never equals another's.

Graphs written before the rank existed get theirs when the store is opened
(``ensure_pair_rank``), before the index is created.
"""

from __future__ import annotations

import neo4j

from khora_core.storage.neo4j.keys import backfill_statement, backfill_then_index, length_prefixed

__all__ = ["DENSE_DEGREE", "PAIR_RANK_INDEX", "ensure_pair_rank", "pair_key", "set_pair_rank"]

#: The composite range index over ``RELATES(pair, rank_weight, id)``.
PAIR_RANK_INDEX = "khora_relates_pair"

#: A pair whose ends both have more ``RELATES`` edges than this (outgoing at the source,
#: incoming at the target) is read by a seek on the index; any other pair by expanding its
#: end with fewer edges, which costs no seek for the many pairs that hold no edge at all.
DENSE_DEGREE = 200


def pair_key(namespace: str, source_id: str, target_id: str) -> str:
    """Cypher for the ``pair`` key of the relationships from ``source_id`` to ``target_id``;
    the arguments are Cypher expressions (variable or parameter names), never user text."""
    return length_prefixed(namespace, source_id, target_id)


def set_pair_rank(rel: str, namespace: str, source: str, target: str, weight: str) -> str:
    """Cypher ``SET`` items that give relationship ``rel`` from node ``source`` to node
    ``target``, of weight ``weight``, its rank (arguments as for :func:`pair_key`)."""
    key = pair_key(namespace, f"{source}.id", f"{target}.id")
    return f"{rel}.pair = {key}, {rel}.rank_weight = -({weight})"


_BACKFILL = backfill_statement(
    "(s:Entity)-[r:RELATES]->(t:Entity)",
    "r.pair IS NULL",
    "s, r, t",
    set_pair_rank("r", "r.namespace_id", "s", "t", "r.weight"),
)

_CREATE_INDEX = (
    f"CREATE INDEX {PAIR_RANK_INDEX} IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.pair, r.rank_weight, r.id)"
)


async def ensure_pair_rank(driver: neo4j.AsyncDriver, *, database: str) -> None:
    """Give every ``RELATES`` edge its rank, then create the index, unless it exists."""
    await backfill_then_index(driver, database=database, index=_CREATE_INDEX, backfill=_BACKFILL)
