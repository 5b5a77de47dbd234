"""The embedded graph's walks: entity neighbourhoods over ``RELATES`` and the chunks that
entities reach over ``MENTIONED_IN``, each run inside one read transaction.

The neighbourhood walk is an iterative breadth-first search, one SQL query per hop and
edge direction, with at most ``max_fanout`` edges (heaviest first) followed from each
entity; the frontier shares a ``max_entities`` budget round-robin.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from khora_core.models import ChunkHit, Relationship
from khora_core.storage.protocols import Neighbourhood
from khora_core.storage.sqlite_lance.filtering import PreparedFilter
from khora_core.storage.sqlite_lance.rows import IN_JSON, fetch_entities, json_ids
from khora_core.storage.sqlite_lance.schema import (
    CHUNK_SELECT,
    RELATIONSHIP_COLUMNS,
    RELATIONSHIP_SELECT,
    chunk_from_row,
    relationship_from_row,
)

__all__ = ["MAX_NEIGHBOURHOOD", "chunks_mentioning", "walk_neighbourhood"]

#: Stop expanding a neighbourhood once it holds this many entities (depth x fan-out can explode).
MAX_NEIGHBOURHOOD = 5000


def walk_neighbourhood(
    conn: sqlite3.Connection,
    namespace_id: str,
    seeds: list[str],
    depth: int,
    max_fanout: int,
    types: list[str] | None,
    cap: int = MAX_NEIGHBOURHOOD,
    max_mentions: int | None = None,
) -> Neighbourhood:
    """Breadth-first from ``seeds``, one query per hop and side (``GraphStore.neighbourhood``);
    with ``max_mentions``, one more query per hop drops the frontier's common entities."""
    distance = {e: 0 for e in fetch_entities(conn, namespace_id, seeds)}
    limit = min(MAX_NEIGHBOURHOOD, len(distance) + cap)
    type_clause = f" AND r.type IN {IN_JSON}" if types is not None else ""
    # Each side reads only its ``max_fanout`` heaviest edges, in index order
    # (``ix_rel_source_w`` / ``ix_rel_target_w``); the two sides merge in Python.
    sides = [
        (
            f"SELECT {RELATIONSHIP_SELECT}, r.{other} FROM relationships r WHERE r.namespace_id = ? "
            f"AND r.{own} = ?{type_clause} ORDER BY r.weight DESC, r.id LIMIT ?"
        )
        for own, other in (("source_id", "target_id"), ("target_id", "source_id"))
    ]
    type_params: list[Any] = [json_ids(types)] if types is not None else []
    fanout = max(0, max_fanout)
    walked: dict[str, Relationship] = {}
    frontier = list(distance)
    for hop in range(1, max(0, depth) + 1):
        if max_mentions is not None and frontier:
            common = {
                row[0]
                for row in conn.execute(
                    "SELECT id FROM entities WHERE namespace_id = ? AND mention_count > ? "
                    f"AND id IN {IN_JSON}",
                    [namespace_id, int(max_mentions), json_ids(frontier)],
                )
            }
            frontier = [f for f in frontier if f not in common]
        if not frontier or len(distance) >= limit or fanout == 0:
            break
        picked: list[list[Any]] = []
        for fid in frontier:
            rows = [
                row for sql in sides for row in conn.execute(sql, [namespace_id, fid, *type_params, fanout])
            ]
            rows.sort(key=lambda row: (-row[6], row[0]))  # weight DESC, id
            picked.append(rows[:fanout])
        nxt: list[str] = []
        # Round-robin over the frontier (each one's heaviest edge, then each one's second,
        # ...) so a ``max_entities`` cap shares the budget.
        for rank in range(fanout):
            for rows in picked:
                if rank >= len(rows):
                    continue
                row = rows[rank]
                other = row[RELATIONSHIP_COLUMNS]
                if other not in distance:
                    if len(distance) >= limit:
                        continue
                    distance[other] = hop
                    nxt.append(other)
                walked.setdefault(row[0], relationship_from_row(row))
        frontier = nxt
    entities = fetch_entities(conn, namespace_id, distance)
    return Neighbourhood(
        entities=[entities[e] for e in distance if e in entities],
        relationships=[r for r in walked.values() if r.source_id in entities and r.target_id in entities],
        distance={e: d for e, d in distance.items() if e in entities},
    )


def chunks_mentioning(
    conn: sqlite3.Connection,
    namespace_id: str,
    entity_ids: list[str],
    limit: int,
    prepared: PreparedFilter | None,
    temporal_sort: bool,
) -> list[ChunkHit]:
    """Chunks that mention ``entity_ids``, by total mentions (``GraphStore.chunks_for_entities``),
    fetching further pages while the filter's in-memory part drops rows."""
    where = f"m.namespace_id = ? AND m.entity_id IN {IN_JSON}"
    params: list[Any] = [namespace_id, json_ids(entity_ids)]
    if prepared is not None:
        where += f" AND ({prepared.sql})"
        params += prepared.params
    order = "total DESC, c.rid"
    if temporal_sort:
        order = "c.occurred_at IS NULL, c.occurred_at DESC, " + order
    sql = (
        f"SELECT {CHUNK_SELECT}, SUM(m.count) AS total FROM mentions m JOIN chunks c "
        f"ON c.namespace_id = m.namespace_id AND c.id = m.chunk_id WHERE {where} "
        f"GROUP BY c.rid ORDER BY {order} LIMIT ? OFFSET ?"
    )
    hits: list[ChunkHit] = []
    offset, size = 0, limit if prepared is None or not prepared.residual_keys else limit * 4
    while True:
        rows = conn.execute(sql, [*params, size, offset]).fetchall()
        for row in rows:
            chunk = chunk_from_row(row)
            if prepared is not None and not prepared.matches(chunk):
                continue
            hits.append(ChunkHit(chunk=chunk, score=float(row[-1]), rank=len(hits) + 1))
            if len(hits) == limit:
                return hits
        if len(rows) < size:
            return hits
        offset, size = offset + size, size * 4
