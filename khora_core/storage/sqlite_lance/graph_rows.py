"""Blocking graph writes for the embedded store (run inside the stack's write transaction).

The graph is five tables: ``entities`` (+ ``entity_aliases`` for case-insensitive alias
lookup), ``mentions`` (``MENTIONED_IN``), ``relationships`` (typed edges, the type is a
column), and ``time_nodes`` / ``chunk_time`` (``AT_TIME``, written with the chunks).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence

from khora_core.errors import InvalidInputError
from khora_core.models import Entity, Mention, Relationship
from khora_core.storage.protocols import fold
from khora_core.storage.sqlite_lance.rows import IN_JSON, json_ids
from khora_core.storage.sqlite_lance.schema import dump_properties, dumps, load_properties, vector_blob
from khora_core.storage.words import name_words

_DEFAULT_TYPE = "CONCEPT"


def _merge_aliases(name: str, *groups: Iterable[str]) -> list[str]:
    out: dict[str, str] = {}
    for group in groups:
        for alias in group:
            key = fold(alias)
            if key and key != fold(name):
                out.setdefault(key, alias)
    return list(out.values())


def upsert_entities(
    conn: sqlite3.Connection, namespace_id: str, entities: Sequence[Entity], dim: int
) -> None:
    """Insert entities or merge them into the stored ones with the same id.

    Merge rule: the stored name stays; aliases are united; a new type wins unless it is the
    default ``CONCEPT``; a new description or embedding wins when given; ``properties``
    are updated key by key (a new value wins for its key, other stored keys stay).
    """
    for e in entities:
        if e.embedding is not None and len(e.embedding) != dim:
            raise InvalidInputError(
                f"Entity {e.id!r} has a {len(e.embedding)}-dimensional embedding; expected {dim}"
            )
        old = conn.execute(
            "SELECT name, type, aliases, description, embedding, properties FROM entities "
            "WHERE namespace_id = ? AND id = ?",
            (namespace_id, e.id),
        ).fetchone()
        if old is None:
            name, etype, aliases = e.name, e.type, _merge_aliases(e.name, e.aliases)
            conn.execute(
                "INSERT INTO entities (namespace_id, id, name, name_lower, type, aliases, description, "
                "embedding, properties) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    namespace_id,
                    e.id,
                    name,
                    fold(name),
                    etype,
                    dumps(aliases),
                    e.description,
                    vector_blob(e.embedding),
                    dump_properties(e.properties),
                ),
            )
            conn.executemany(
                "INSERT OR IGNORE INTO entity_words (namespace_id, word, entity_id) VALUES (?, ?, ?)",
                [(namespace_id, w, e.id) for w in name_words(name)],
            )
        else:
            name = old[0]
            etype = e.type if (e.type != _DEFAULT_TYPE or old[1] == _DEFAULT_TYPE) else old[1]
            aliases = _merge_aliases(name, json.loads(old[2] or "[]"), e.aliases, [e.name])
            properties = old[5]
            if e.properties:
                properties = dump_properties({**load_properties(old[5]), **e.properties})
            conn.execute(
                "UPDATE entities SET type = ?, aliases = ?, description = ?, embedding = ?, properties = ? "
                "WHERE namespace_id = ? AND id = ?",
                (
                    etype,
                    dumps(aliases),
                    e.description if e.description is not None else old[3],
                    vector_blob(e.embedding) if e.embedding is not None else old[4],
                    properties,
                    namespace_id,
                    e.id,
                ),
            )
        conn.execute(
            "DELETE FROM entity_aliases WHERE namespace_id = ? AND entity_id = ?", (namespace_id, e.id)
        )
        conn.executemany(
            "INSERT OR IGNORE INTO entity_aliases (namespace_id, entity_id, alias_lower) VALUES (?, ?, ?)",
            [(namespace_id, e.id, fold(a)) for a in aliases],
        )


def require_entities(
    conn: sqlite3.Connection, namespace_id: str, entity_ids: Iterable[str], what: str
) -> None:
    """Raise ``InvalidInputError`` unless every id is a stored entity of the namespace."""
    ids = set(entity_ids)
    if not ids:
        return
    found = {
        r[0]
        for r in conn.execute(
            f"SELECT id FROM entities WHERE namespace_id = ? AND id IN {IN_JSON}",
            (namespace_id, json_ids(ids)),
        )
    }
    missing = sorted(ids - found)
    if missing:
        raise InvalidInputError(
            f"{what} name unknown entities {missing[:5]}; add the entities in the same call"
        )


def insert_mentions(conn: sqlite3.Connection, namespace_id: str, mentions: Sequence[Mention]) -> None:
    require_entities(conn, namespace_id, (m.entity_id for m in mentions), "Mentions")
    conn.executemany(
        "INSERT INTO mentions (namespace_id, entity_id, chunk_id, document_id, count) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (namespace_id, entity_id, chunk_id) DO UPDATE SET count = count + excluded.count",
        [(namespace_id, m.entity_id, m.chunk_id, m.document_id, m.count) for m in mentions],
    )


def _merged_relationship_properties(
    conn: sqlite3.Connection, namespace_id: str, relationships: Sequence[Relationship]
) -> dict[str, str]:
    """Relationship id -> its ``properties`` JSON after this write: the stored ones updated key
    by key by each given relationship in turn (only ids given with properties are here)."""
    given = [r for r in relationships if r.properties]
    if not given:
        return {}
    stored = {
        rid: load_properties(text)
        for rid, text in conn.execute(
            f"SELECT id, properties FROM relationships WHERE namespace_id = ? AND id IN {IN_JSON}",
            (namespace_id, json_ids({r.id for r in given})),
        )
    }
    for r in given:
        stored[r.id] = {**stored.get(r.id, {}), **r.properties}
    return {rid: dump_properties(props) for rid, props in stored.items()}


def upsert_relationships(
    conn: sqlite3.Connection, namespace_id: str, relationships: Sequence[Relationship]
) -> None:
    """Insert relationships or replace the stored ones with the same id, except ``properties``,
    which are updated key by key."""
    require_entities(
        conn,
        namespace_id,
        [r.source_id for r in relationships] + [r.target_id for r in relationships],
        "Relationships",
    )
    merged = _merged_relationship_properties(conn, namespace_id, relationships)
    # A relationship given without properties keeps the stored ones (``?10`` is NULL for it).
    conn.executemany(
        "INSERT INTO relationships (namespace_id, id, source_id, target_id, type, description, weight, "
        "document_id, chunk_id, properties) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, coalesce(?10, '{}')) "
        "ON CONFLICT (namespace_id, id) DO UPDATE SET "
        "source_id = excluded.source_id, target_id = excluded.target_id, type = excluded.type, "
        "description = excluded.description, weight = excluded.weight, document_id = excluded.document_id, "
        "chunk_id = excluded.chunk_id, properties = coalesce(?10, relationships.properties)",
        [
            (
                namespace_id,
                r.id,
                r.source_id,
                r.target_id,
                r.type,
                r.description,
                r.weight,
                r.document_id,
                r.chunk_id,
                merged.get(r.id),
            )
            for r in relationships
        ],
    )


def refresh_mention_counts(conn: sqlite3.Connection, namespace_id: str, entity_ids: Iterable[str]) -> None:
    conn.execute(
        "UPDATE entities SET mention_count = (SELECT COALESCE(SUM(m.count), 0) FROM mentions m "
        "WHERE m.namespace_id = entities.namespace_id AND m.entity_id = entities.id) "
        f"WHERE namespace_id = ? AND id IN {IN_JSON}",
        (namespace_id, json_ids(set(entity_ids))),
    )


def detach_document(
    conn: sqlite3.Connection, namespace_id: str, document_id: str, chunk_ids: list[str]
) -> set[str]:
    """Remove a document's mentions and the relationships learned from it.

    Returns the entities that lost a mention or an edge (candidates for orphan removal).
    """
    params = (namespace_id, document_id, json_ids(chunk_ids))
    touched = {
        r[0]
        for r in conn.execute(
            f"SELECT entity_id FROM mentions WHERE namespace_id = ? AND (document_id = ? OR chunk_id IN {IN_JSON})",
            params,
        )
    }
    for row in conn.execute(
        "SELECT source_id, target_id FROM relationships WHERE namespace_id = ? AND document_id = ?",
        (namespace_id, document_id),
    ):
        touched.update(row)
    conn.execute(
        f"DELETE FROM mentions WHERE namespace_id = ? AND (document_id = ? OR chunk_id IN {IN_JSON})", params
    )
    conn.execute(
        "DELETE FROM relationships WHERE namespace_id = ? AND document_id = ?", (namespace_id, document_id)
    )
    return touched


def remove_orphans(conn: sqlite3.Connection, namespace_id: str, entity_ids: set[str]) -> int:
    """Delete the entities among ``entity_ids`` left with no mention and no relationship."""
    if not entity_ids:
        return 0
    orphans = [
        r[0]
        for r in conn.execute(
            f"SELECT e.id FROM entities e WHERE e.namespace_id = ? AND e.id IN {IN_JSON} "
            "AND NOT EXISTS (SELECT 1 FROM mentions m WHERE m.namespace_id = e.namespace_id AND m.entity_id = e.id) "
            "AND NOT EXISTS (SELECT 1 FROM relationships r WHERE r.namespace_id = e.namespace_id "
            "AND (r.source_id = e.id OR r.target_id = e.id))",
            (namespace_id, json_ids(entity_ids)),
        )
    ]
    if orphans:
        delete_entity_rows(conn, namespace_id, orphans)
    refresh_mention_counts(conn, namespace_id, entity_ids - set(orphans))
    return len(orphans)


def delete_entity_rows(conn: sqlite3.Connection, namespace_id: str, entity_ids: Sequence[str]) -> int:
    """Delete entities with their aliases, mentions and relationships; returns how many went."""
    ids = json_ids(entity_ids)
    gone = conn.execute(
        f"DELETE FROM entities WHERE namespace_id = ? AND id IN {IN_JSON}", (namespace_id, ids)
    ).rowcount
    for table in ("entity_aliases", "entity_words"):
        conn.execute(
            f"DELETE FROM {table} WHERE namespace_id = ? AND entity_id IN {IN_JSON}", (namespace_id, ids)
        )
    conn.execute(
        f"DELETE FROM mentions WHERE namespace_id = ? AND entity_id IN {IN_JSON}", (namespace_id, ids)
    )
    conn.execute(
        f"DELETE FROM relationships WHERE namespace_id = ? AND (source_id IN {IN_JSON} OR target_id IN {IN_JSON})",
        (namespace_id, ids, ids),
    )
    return int(gone)
