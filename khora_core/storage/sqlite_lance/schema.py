"""The embedded store's SQLite schema and the codecs between rows and models.

Conventions (shared with the filter compiler): the chunk table is ``chunks`` (alias ``c``),
its system columns are named exactly as the system keys, dates are INTEGER microseconds
since the Unix epoch in UTC (NULL when absent), ``metadata`` and ``tags`` are TEXT holding
JSON. Every table carries ``namespace_id`` and every key is unique per namespace only, so
ids chosen in one namespace can never collide with, or reach, another.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import date, datetime, timedelta, timezone
from typing import Any, overload

import numpy as np

from khora_core.errors import ConfigError, InvalidInputError
from khora_core.models import Chunk, Document, Entity, Namespace, Relationship
from khora_core.storage.words import name_words

SCHEMA_VERSION = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)

#: System columns shared by documents and chunks, in table order.
SYSTEM_COLUMNS = (
    "occurred_at",
    "created_at",
    "source_timestamp",
    "source_type",
    "source_name",
    "source_url",
    "external_id",
    "content_type",
    "source",
    "title",
    "metadata",
    "tags",
)
_SYSTEM_DDL = """
    occurred_at INTEGER, created_at INTEGER NOT NULL, source_timestamp INTEGER,
    source_type TEXT, source_name TEXT, source_url TEXT, external_id TEXT,
    content_type TEXT NOT NULL DEFAULT 'text/plain', source TEXT, title TEXT,
    metadata TEXT NOT NULL DEFAULT '{}', tags TEXT NOT NULL DEFAULT '[]'"""

DDL = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS namespaces (
    namespace_id TEXT PRIMARY KEY, name TEXT, created_at INTEGER NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{{}}',
    vector_version INTEGER NOT NULL DEFAULT 0, graph_version INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS documents (
    namespace_id TEXT NOT NULL, id TEXT NOT NULL, content TEXT NOT NULL, content_hash TEXT NOT NULL,
    write_id TEXT NOT NULL DEFAULT '',
    {_SYSTEM_DDL},
    PRIMARY KEY (namespace_id, id));
CREATE INDEX IF NOT EXISTS ix_documents_hash ON documents (namespace_id, content_hash);
CREATE INDEX IF NOT EXISTS ix_documents_external ON documents (namespace_id, external_id);
CREATE TABLE IF NOT EXISTS chunks (
    rid INTEGER PRIMARY KEY, namespace_id TEXT NOT NULL, id TEXT NOT NULL, document_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL, content TEXT NOT NULL, start_char INTEGER NOT NULL,
    end_char INTEGER NOT NULL, token_count INTEGER NOT NULL DEFAULT 0,
    needs_extraction INTEGER NOT NULL DEFAULT 0, is_core INTEGER NOT NULL DEFAULT 0,
    {_SYSTEM_DDL},
    UNIQUE (namespace_id, id));
CREATE INDEX IF NOT EXISTS ix_chunks_document ON chunks (namespace_id, document_id);
CREATE INDEX IF NOT EXISTS ix_chunks_occurred ON chunks (namespace_id, occurred_at);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    content, content='chunks', content_rowid='rid',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS entities (
    namespace_id TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, name_lower TEXT NOT NULL,
    type TEXT NOT NULL, aliases TEXT NOT NULL DEFAULT '[]', description TEXT, embedding BLOB,
    mention_count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace_id, id));
CREATE INDEX IF NOT EXISTS ix_entities_name ON entities (namespace_id, name_lower);
CREATE TABLE IF NOT EXISTS entity_aliases (
    namespace_id TEXT NOT NULL, entity_id TEXT NOT NULL, alias_lower TEXT NOT NULL,
    PRIMARY KEY (namespace_id, alias_lower, entity_id));
CREATE INDEX IF NOT EXISTS ix_entity_aliases_entity ON entity_aliases (namespace_id, entity_id);
CREATE TABLE IF NOT EXISTS entity_words (
    namespace_id TEXT NOT NULL, word TEXT NOT NULL, entity_id TEXT NOT NULL,
    PRIMARY KEY (namespace_id, word, entity_id));
CREATE INDEX IF NOT EXISTS ix_entity_words_entity ON entity_words (namespace_id, entity_id);
CREATE TABLE IF NOT EXISTS mentions (
    namespace_id TEXT NOT NULL, entity_id TEXT NOT NULL, chunk_id TEXT NOT NULL,
    document_id TEXT NOT NULL, count INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (namespace_id, entity_id, chunk_id));
CREATE INDEX IF NOT EXISTS ix_mentions_chunk ON mentions (namespace_id, chunk_id);
CREATE INDEX IF NOT EXISTS ix_mentions_top ON mentions (namespace_id, entity_id, count DESC, chunk_id);
CREATE INDEX IF NOT EXISTS ix_mentions_document ON mentions (namespace_id, document_id);
CREATE TABLE IF NOT EXISTS relationships (
    namespace_id TEXT NOT NULL, id TEXT NOT NULL, source_id TEXT NOT NULL, target_id TEXT NOT NULL,
    type TEXT NOT NULL, description TEXT, weight REAL NOT NULL DEFAULT 1.0,
    document_id TEXT NOT NULL, chunk_id TEXT,
    PRIMARY KEY (namespace_id, id));
DROP INDEX IF EXISTS ix_rel_source;
DROP INDEX IF EXISTS ix_rel_target;
CREATE INDEX IF NOT EXISTS ix_rel_source_w ON relationships (namespace_id, source_id, weight DESC, id);
CREATE INDEX IF NOT EXISTS ix_rel_target_w ON relationships (namespace_id, target_id, weight DESC, id);
CREATE INDEX IF NOT EXISTS ix_rel_document ON relationships (namespace_id, document_id);
DROP INDEX IF EXISTS ix_rel_pair;
CREATE INDEX IF NOT EXISTS ix_rel_pair_w ON relationships (namespace_id, source_id, target_id, weight DESC, id);
CREATE TABLE IF NOT EXISTS time_nodes (
    namespace_id TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (namespace_id, key));
CREATE TABLE IF NOT EXISTS chunk_time (
    namespace_id TEXT NOT NULL, chunk_id TEXT NOT NULL, key TEXT NOT NULL,
    PRIMARY KEY (namespace_id, chunk_id, key));
CREATE INDEX IF NOT EXISTS ix_chunk_time_key ON chunk_time (namespace_id, key);
CREATE TABLE IF NOT EXISTS lance_journal (
    id INTEGER PRIMARY KEY, namespace_id TEXT NOT NULL, op TEXT NOT NULL, ref TEXT NOT NULL);
"""

#: ``SELECT`` list for a chunk row read through alias ``c``.
CHUNK_SELECT = (
    "c.id, c.namespace_id, c.document_id, c.chunk_index, c.content, c.start_char, c.end_char, "
    "c.token_count, c.needs_extraction, c.is_core, "
    + ", ".join(f"c.{col}" for col in SYSTEM_COLUMNS)
    + ", c.context"
)
DOCUMENT_SELECT = "d.id, d.namespace_id, d.content, d.content_hash, " + ", ".join(
    f"d.{col}" for col in SYSTEM_COLUMNS
)
ENTITY_SELECT = (
    "e.id, e.namespace_id, e.name, e.type, e.aliases, e.description, e.mention_count, e.properties"
)
RELATIONSHIP_SELECT = (
    "r.id, r.namespace_id, r.source_id, r.target_id, r.type, r.description, r.weight, r.document_id, "
    "r.chunk_id, r.properties"
)
#: How many columns ``ENTITY_SELECT`` / ``RELATIONSHIP_SELECT`` read (a column selected after
#: them is at this index).
ENTITY_COLUMNS = 8
RELATIONSHIP_COLUMNS = 10


#: BM25 indexes a chunk's ``context`` (title, heading path) with its content; a chunk
#: stored before the column existed has none, and is indexed and unindexed by content alone.
_FTS_TEXT = "CASE WHEN {row}.context IS NULL OR {row}.context = '' THEN {row}.content ELSE {row}.context || char(10) || {row}.content END"
_FTS_TRIGGERS = f"""
DROP TRIGGER IF EXISTS chunks_fts_ai;
DROP TRIGGER IF EXISTS chunks_fts_ad;
CREATE TRIGGER chunks_fts_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, content) VALUES (new.rid, {_FTS_TEXT.format(row="new")});
END;
CREATE TRIGGER chunks_fts_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, content) VALUES ('delete', old.rid, {_FTS_TEXT.format(row="old")});
END;
"""


def apply_schema(conn: sqlite3.Connection, dim: int) -> None:
    """Create or check the schema; record and verify the embedding dimension."""
    # Every statement is idempotent; executescript commits as it goes, so run it first
    # and check the metadata in a transaction of its own.
    conn.executescript(DDL)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(chunks)")}
    if "context" not in columns:  # folders written before chunks had a search context
        conn.execute("ALTER TABLE chunks ADD COLUMN context TEXT")
    for table in ("entities", "relationships"):  # folders written before graph properties
        if "properties" not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN properties TEXT NOT NULL DEFAULT '{{}}'")
    conn.executescript(_FTS_TRIGGERS)
    conn.execute("BEGIN IMMEDIATE")
    try:
        _check_meta(conn, dim)
        _index_name_words(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _check_meta(conn: sqlite3.Connection, dim: int) -> None:
    rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    version = int(rows.get("schema_version", SCHEMA_VERSION))
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"The Khora data folder was written by a newer Khora (schema {version} > {SCHEMA_VERSION}); "
            "upgrade khora-memory or point KHORA_DATA_DIR elsewhere",
            setting="KHORA_DATA_DIR",
        )
    stored_dim = rows.get("dim")
    if stored_dim is not None and int(stored_dim) != dim:
        raise ConfigError(
            f"The Khora data folder holds {stored_dim}-dimensional embeddings but the embedder makes "
            f"{dim}-dimensional ones; use the same embedding model or a new KHORA_DATA_DIR",
            setting="KHORA_EMBEDDING_MODEL",
        )
    conn.execute(
        "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
    )
    conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('dim', ?)", (str(dim),))


def _index_name_words(conn: sqlite3.Connection) -> None:
    """Fill ``entity_words`` once for entities stored before it existed."""
    if conn.execute("SELECT 1 FROM meta WHERE key = 'entity_words'").fetchone():
        return
    rows = conn.execute("SELECT namespace_id, id, name FROM entities").fetchall()
    conn.executemany(
        "INSERT OR IGNORE INTO entity_words (namespace_id, word, entity_id) VALUES (?, ?, ?)",
        [(ns, w, eid) for ns, eid, name in rows for w in name_words(name)],
    )
    conn.execute("INSERT INTO meta (key, value) VALUES ('entity_words', '1')")


# -- value codecs ------------------------------------------------------------------------------


def to_us(value: datetime | None) -> int | None:
    """A datetime as INTEGER microseconds since the epoch, UTC (naive means UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return (value - _EPOCH) // _ONE_US


@overload
def from_us(value: int) -> datetime: ...
@overload
def from_us(value: None) -> None: ...
@overload
def from_us(value: int | None) -> datetime | None: ...
def from_us(value: int | None) -> datetime | None:
    return None if value is None else _EPOCH + timedelta(microseconds=int(value))


def day_key(value: datetime) -> str:
    """The ``YYYY-MM-DD`` time-node key of a datetime, in UTC."""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return value.date().isoformat()


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise InvalidInputError(
        f"Metadata value {value!r} of type {type(value).__name__} is not JSON-serialisable"
    )


def dumps(value: Any) -> str:
    """JSON text for metadata/tags/aliases (datetimes become ISO-8601 strings)."""
    return json.dumps(value, default=_json_default, ensure_ascii=False, separators=(",", ":"))


def vector_blob(vector: Any) -> bytes | None:
    return None if vector is None else np.asarray(vector, dtype=np.float32).tobytes()


def blob_vector(blob: bytes | None) -> list[float] | None:
    return None if blob is None else np.frombuffer(blob, dtype=np.float32).tolist()


# -- rows to models ----------------------------------------------------------------------------


def _system(row: tuple[Any, ...], start: int) -> dict[str, Any]:
    (occ, created, src_ts, s_type, s_name, s_url, ext, ctype, source, title, meta, tags) = row[
        start : start + 12
    ]
    return {
        "occurred_at": from_us(occ),
        "created_at": from_us(created),
        "source_timestamp": from_us(src_ts),
        "source_type": s_type,
        "source_name": s_name,
        "source_url": s_url,
        "external_id": ext,
        "content_type": ctype,
        "source": source,
        "title": title,
        "metadata": json.loads(meta) if meta else {},
        "tags": json.loads(tags) if tags else [],
    }


def system_values(obj: Document | Chunk) -> tuple[Any, ...]:
    """The system column values of a document or chunk, in ``SYSTEM_COLUMNS`` order."""
    return (
        to_us(obj.occurred_at),
        to_us(obj.created_at),
        to_us(obj.source_timestamp),
        obj.source_type,
        obj.source_name,
        obj.source_url,
        obj.external_id,
        obj.content_type,
        obj.source,
        obj.title,
        dumps(obj.metadata),
        dumps(list(obj.tags)),
    )


def chunk_from_row(row: tuple[Any, ...]) -> Chunk:
    """A ``Chunk`` from a ``CHUNK_SELECT`` row.

    Validated from one dict: pydantic-core builds it in Rust, 8.5 us a chunk against 17.9 us
    for ``model_construct``, which sets each field in Python (2 AVX2 cores; the vector
    channel builds about 60 on every search).
    """
    return Chunk.model_validate(
        {
            "id": row[0],
            "namespace_id": row[1],
            "document_id": row[2],
            "index": row[3],
            "content": row[4],
            "start_char": row[5],
            "end_char": row[6],
            "token_count": row[7],
            "needs_extraction": bool(row[8]),
            "is_core": bool(row[9]),
            "embedding": None,
            "context": row[10 + len(SYSTEM_COLUMNS)],  # after the system columns
            **_system(row, 10),
        }
    )


def document_from_row(row: tuple[Any, ...]) -> Document:
    return Document(id=row[0], namespace_id=row[1], content=row[2], content_hash=row[3], **_system(row, 4))


def entity_from_row(row: tuple[Any, ...], embedding: bytes | None = None) -> Entity:
    return Entity(
        id=row[0],
        namespace_id=row[1],
        name=row[2],
        type=row[3],
        aliases=json.loads(row[4]) if row[4] else [],
        description=row[5],
        mention_count=row[6],
        embedding=blob_vector(embedding),
        properties=load_properties(row[7]),
    )


def relationship_from_row(row: tuple[Any, ...]) -> Relationship:
    return Relationship(
        id=row[0],
        namespace_id=row[1],
        source_id=row[2],
        target_id=row[3],
        type=row[4],
        description=row[5],
        weight=row[6],
        document_id=row[7],
        chunk_id=row[8],
        properties=load_properties(row[9]),
    )


def load_properties(text: str | None) -> dict[str, Any]:
    """The ``properties`` column of an entity or relationship (JSON object text)."""
    return json.loads(text) if text and text != "{}" else {}


def dump_properties(properties: dict[str, Any]) -> str:
    """JSON text for the ``properties`` column (the model checked the values)."""
    return json.dumps(properties, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def namespace_from_row(row: tuple[Any, ...]) -> Namespace:
    return Namespace(
        namespace_id=row[0], name=row[1], created_at=from_us(int(row[2])), metadata=json.loads(row[3] or "{}")
    )
