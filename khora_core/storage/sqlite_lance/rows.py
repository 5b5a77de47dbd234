"""Small blocking SQL helpers shared by the embedded store's modules.

Lists of ids travel as one JSON array parameter read with ``json_each`` so a query never
grows a placeholder per id and user-chosen ids never become SQL text.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from khora_core.models import Chunk, Entity
from khora_core.storage.sqlite_lance.filtering import PreparedFilter
from khora_core.storage.sqlite_lance.schema import (
    CHUNK_SELECT,
    ENTITY_COLUMNS,
    ENTITY_SELECT,
    chunk_from_row,
    entity_from_row,
)

#: ``x IN (SELECT value FROM json_each(?))`` with this as the parameter.
IN_JSON = "(SELECT value FROM json_each(?))"


def json_ids(ids: Iterable[str]) -> str:
    return json.dumps([str(i) for i in ids])


def fetch_chunks(
    conn: sqlite3.Connection, namespace_id: str, chunk_ids: list[str], pushed: PreparedFilter | None = None
) -> dict[str, Chunk]:
    """The namespace's chunks among ``chunk_ids`` that pass ``pushed``'s SQL, by id.

    Missing (or filtered-out) ids are simply absent.
    """
    if not chunk_ids:
        return {}
    sql = f"SELECT {CHUNK_SELECT} FROM chunks c WHERE c.namespace_id = ? AND c.id IN {IN_JSON}"
    params: list[Any] = [namespace_id, json_ids(chunk_ids)]
    if pushed is not None:
        sql += f" AND ({pushed.sql})"
        params += pushed.params
    return {row[0]: chunk_from_row(row) for row in conn.execute(sql, params)}


def fetch_entities(
    conn: sqlite3.Connection, namespace_id: str, entity_ids: Iterable[str], *, embeddings: bool = False
) -> dict[str, Entity]:
    ids = list(entity_ids)
    if not ids:
        return {}
    extra = ", e.embedding" if embeddings else ""
    sql = f"SELECT {ENTITY_SELECT}{extra} FROM entities e WHERE e.namespace_id = ? AND e.id IN {IN_JSON}"
    out = {}
    for row in conn.execute(sql, (namespace_id, json_ids(ids))):
        out[row[0]] = entity_from_row(row, row[ENTITY_COLUMNS] if embeddings else None)
    return out
