"""``DocumentStore`` for the embedded store: namespaces, documents and chunks in SQLite.

The read methods are async (run on the reader pool). The ``*_rows`` functions are the
blocking pieces of the stack's write transaction (see ``stack.py``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timezone

from khora_core.errors import InvalidInputError, NamespaceNotFoundError
from khora_core.models import Chunk, Document, Namespace
from khora_core.storage.sqlite_lance.db import Database
from khora_core.storage.sqlite_lance.lance import LanceVectors
from khora_core.storage.sqlite_lance.rows import IN_JSON, fetch_chunks, json_ids
from khora_core.storage.sqlite_lance.schema import (
    DOCUMENT_SELECT,
    SYSTEM_COLUMNS,
    day_key,
    document_from_row,
    dumps,
    from_us,
    namespace_from_row,
    system_values,
    to_us,
)

_SYS_COLS = ", ".join(SYSTEM_COLUMNS)
#: Most content hashes in one ``find_documents_by_hashes`` query.
HASH_BATCH = 1000
_SYS_MARKS = ", ".join("?" for _ in SYSTEM_COLUMNS)


class SqliteDocumentStore:
    """Namespaces, documents and chunks (system fields + metadata) in SQLite."""

    def __init__(self, db: Database, lance: LanceVectors) -> None:
        self._db = db
        self._lance = lance

    async def create_namespace(self, namespace: Namespace) -> None:
        """Create a namespace.

        Raises:
            InvalidInputError: a namespace with this id already exists.
        """

        def run() -> None:
            # A namespace deleted by a process that died before dropping its vector table
            # must not hand its vectors to a new namespace with the same id.
            if not self._db.transaction_sync(namespace_exists, namespace.namespace_id):
                self._lance.drop(namespace.namespace_id)
            self._db.transaction_sync(_create_namespace, namespace, what="create a namespace")

        await self._db.on_writer(run)

    async def get_namespace(self, namespace_id: str) -> Namespace | None:
        def run(conn: sqlite3.Connection) -> Namespace | None:
            row = conn.execute(
                "SELECT namespace_id, name, created_at, metadata FROM namespaces WHERE namespace_id = ?",
                (namespace_id,),
            ).fetchone()
            return None if row is None else namespace_from_row(row)

        return await self._db.read(run)

    async def list_namespaces(self) -> list[Namespace]:
        def run(conn: sqlite3.Connection) -> list[Namespace]:
            sql = "SELECT namespace_id, name, created_at, metadata FROM namespaces ORDER BY created_at, namespace_id"
            return [namespace_from_row(r) for r in conn.execute(sql)]

        return await self._db.read(run)

    async def find_document_by_hash(self, namespace_id: str, content_hash: str) -> Document | None:
        def run(conn: sqlite3.Connection) -> Document | None:
            row = conn.execute(
                f"SELECT {DOCUMENT_SELECT} FROM documents d WHERE d.namespace_id = ? AND d.content_hash = ? "
                "ORDER BY d.created_at LIMIT 1",
                (namespace_id, content_hash),
            ).fetchone()
            return None if row is None else document_from_row(row)

        return await self._db.read(run)

    async def find_documents_by_hashes(
        self, namespace_id: str, content_hashes: Sequence[str]
    ) -> dict[str, Document]:
        """``{content_hash: the earliest stored document with it}`` for the hashes the
        namespace holds (one query per :data:`HASH_BATCH` hashes)."""
        wanted = list(dict.fromkeys(content_hashes))

        def run(conn: sqlite3.Connection) -> dict[str, Document]:
            sql = (
                f"SELECT {DOCUMENT_SELECT} FROM documents d WHERE d.namespace_id = ? "
                f"AND d.content_hash IN {IN_JSON} ORDER BY d.created_at, d.id"
            )
            found: dict[str, Document] = {}
            for lo in range(0, len(wanted), HASH_BATCH):
                for row in conn.execute(sql, (namespace_id, json_ids(wanted[lo : lo + HASH_BATCH]))):
                    doc = document_from_row(row)
                    found.setdefault(doc.content_hash, doc)
            return found

        return await self._db.read(run) if wanted else {}

    async def find_documents_by_external_id(self, namespace_id: str, external_id: str) -> list[Document]:
        def run(conn: sqlite3.Connection) -> list[Document]:
            sql = (
                f"SELECT {DOCUMENT_SELECT} FROM documents d WHERE d.namespace_id = ? AND d.external_id = ? "
                "ORDER BY d.created_at, d.id"
            )
            return [document_from_row(r) for r in conn.execute(sql, (namespace_id, external_id))]

        return await self._db.read(run)

    async def get_documents(self, namespace_id: str, document_ids: Sequence[str]) -> list[Document]:
        """The documents among ``document_ids`` (in that order; unknown ids are skipped)."""
        ids = list(dict.fromkeys(document_ids))

        def run(conn: sqlite3.Connection) -> list[Document]:
            sql = f"SELECT {DOCUMENT_SELECT} FROM documents d WHERE d.namespace_id = ? AND d.id IN {IN_JSON}"
            found = {r[0]: document_from_row(r) for r in conn.execute(sql, (namespace_id, json_ids(ids)))}
            return [found[i] for i in ids if i in found]

        return await self._db.read(run) if ids else []

    async def list_documents(self, namespace_id: str, *, offset: int = 0, limit: int = 100) -> list[Document]:
        """A page of the namespace's documents, newest first (``created_at`` then id)."""

        def run(conn: sqlite3.Connection) -> list[Document]:
            sql = (
                f"SELECT {DOCUMENT_SELECT} FROM documents d WHERE d.namespace_id = ? "
                "ORDER BY d.created_at DESC, d.id LIMIT ? OFFSET ?"
            )
            return [document_from_row(r) for r in conn.execute(sql, (namespace_id, limit, offset))]

        return await self._db.read(run)

    async def get_chunks(self, namespace_id: str, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks among ``chunk_ids`` (in that order; unknown ids are skipped)."""
        ids = list(dict.fromkeys(chunk_ids))

        def run(conn: sqlite3.Connection) -> list[Chunk]:
            found = fetch_chunks(conn, namespace_id, ids)
            return [found[i] for i in ids if i in found]

        return await self._db.read(run) if ids else []

    async def newest_occurred_at(self, namespace_id: str) -> datetime | None:
        def run(conn: sqlite3.Connection) -> datetime | None:
            row = conn.execute(
                "SELECT MAX(occurred_at) FROM chunks WHERE namespace_id = ?", (namespace_id,)
            ).fetchone()
            return from_us(row[0]) if row else None

        return await self._db.read(run)

    async def count_chunks(self, namespace_id: str) -> int:
        """How many chunks the namespace holds."""

        def run(conn: sqlite3.Connection) -> int:
            sql = "SELECT COUNT(*) FROM chunks WHERE namespace_id = ?"
            return int(conn.execute(sql, (namespace_id,)).fetchone()[0])

        return await self._db.read(run)


def namespace_exists(conn: sqlite3.Connection, namespace_id: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM namespaces WHERE namespace_id = ?", (namespace_id,)).fetchone()
        is not None
    )


def require_namespace(conn: sqlite3.Connection, namespace_id: str) -> None:
    """Raise ``NamespaceNotFoundError`` unless the namespace exists."""
    if not namespace_exists(conn, namespace_id):
        raise NamespaceNotFoundError(
            f"Namespace {namespace_id!r} does not exist. Create it with create_namespace()."
        )


def _create_namespace(conn: sqlite3.Connection, namespace: Namespace) -> None:
    if namespace_exists(conn, namespace.namespace_id):
        raise InvalidInputError(f"Namespace {namespace.namespace_id!r} already exists")
    # Change counters start at "now" so a cache of a deleted namespace with the same id can
    # never mistake itself for current.
    start = to_us(datetime.now(timezone.utc))
    conn.execute(
        "INSERT INTO namespaces (namespace_id, name, created_at, metadata, vector_version, graph_version) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            namespace.namespace_id,
            namespace.name,
            to_us(namespace.created_at),
            dumps(namespace.metadata),
            start,
            start,
        ),
    )


def insert_document_rows(
    conn: sqlite3.Connection, namespace_id: str, document: Document, chunks: list[Chunk], write_id: str
) -> None:
    """Insert a document, its chunks (the FTS triggers index them) and their time links.

    ``write_id`` tags the document's vectors in LanceDB, so removing them later is exact.
    """
    exists = conn.execute(
        "SELECT 1 FROM documents WHERE namespace_id = ? AND id = ?", (namespace_id, document.id)
    ).fetchone()
    if exists:
        raise InvalidInputError(
            f"Document {document.id!r} already exists in namespace {namespace_id!r}; "
            "delete it first or list it in WriteBatch.replaces"
        )
    conn.execute(
        f"INSERT INTO documents (namespace_id, id, content, content_hash, write_id, {_SYS_COLS}) "
        f"VALUES (?, ?, ?, ?, ?, {_SYS_MARKS})",
        (
            namespace_id,
            document.id,
            document.content,
            document.content_hash,
            write_id,
            *system_values(document),
        ),
    )
    conn.executemany(
        "INSERT INTO chunks (namespace_id, id, document_id, chunk_index, content, start_char, end_char, "
        f"token_count, needs_extraction, is_core, {_SYS_COLS}, context) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {_SYS_MARKS}, ?)",
        [
            (
                namespace_id,
                c.id,
                document.id,
                c.index,
                c.content,
                c.start_char,
                c.end_char,
                c.token_count,
                int(c.needs_extraction),
                int(c.is_core),
                *system_values(c),
                c.context,
            )
            for c in chunks
        ],
    )
    links = [(namespace_id, c.id, day_key(c.occurred_at)) for c in chunks if c.occurred_at is not None]
    conn.executemany(
        "INSERT OR IGNORE INTO time_nodes (namespace_id, key) VALUES (?, ?)", [(n, k) for n, _, k in links]
    )
    conn.executemany("INSERT OR IGNORE INTO chunk_time (namespace_id, chunk_id, key) VALUES (?, ?, ?)", links)


def delete_document_rows(
    conn: sqlite3.Connection, namespace_id: str, document_id: str
) -> tuple[list[str], str] | None:
    """Delete a document, its chunks (and their FTS rows) and time links.

    Returns the removed chunk ids and the write id of the document's vectors, or ``None``
    when the document does not exist. Orphaned time nodes go too; graph rows are the
    caller's (``graph_rows.detach_document``).
    """
    row = conn.execute(
        "SELECT write_id FROM documents WHERE namespace_id = ? AND id = ?", (namespace_id, document_id)
    ).fetchone()
    if row is None:
        return None
    chunk_ids = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM chunks WHERE namespace_id = ? AND document_id = ?", (namespace_id, document_id)
        )
    ]
    keys = [
        r[0]
        for r in conn.execute(
            f"SELECT DISTINCT key FROM chunk_time WHERE namespace_id = ? AND chunk_id IN {IN_JSON}",
            (namespace_id, json_ids(chunk_ids)),
        )
    ]
    conn.execute(
        f"DELETE FROM chunk_time WHERE namespace_id = ? AND chunk_id IN {IN_JSON}",
        (namespace_id, json_ids(chunk_ids)),
    )
    conn.execute("DELETE FROM chunks WHERE namespace_id = ? AND document_id = ?", (namespace_id, document_id))
    conn.execute("DELETE FROM documents WHERE namespace_id = ? AND id = ?", (namespace_id, document_id))
    conn.execute(
        f"DELETE FROM time_nodes WHERE namespace_id = ? AND key IN {IN_JSON} AND NOT EXISTS "
        "(SELECT 1 FROM chunk_time t WHERE t.namespace_id = time_nodes.namespace_id AND t.key = time_nodes.key)",
        (namespace_id, json_ids(keys)),
    )
    return chunk_ids, row[0]


def delete_namespace_rows(conn: sqlite3.Connection, namespace_id: str) -> bool:
    """Delete a namespace's rows from every table; ``False`` when it did not exist."""
    existed = conn.execute("DELETE FROM namespaces WHERE namespace_id = ?", (namespace_id,)).rowcount > 0
    for table in (
        "chunk_time",
        "time_nodes",
        "mentions",
        "relationships",
        "entity_aliases",
        "entity_words",
        "entities",
        "chunks",
        "documents",
    ):
        conn.execute(f"DELETE FROM {table} WHERE namespace_id = ?", (namespace_id,))
    return existed


def bump_versions(
    conn: sqlite3.Connection, namespace_id: str, *, vectors: bool, graph: bool
) -> tuple[int, int]:
    """Advance the namespace's change counters; returns the previous ``vector_version``
    and the new one (caches compare these to know whether they are current)."""
    row = conn.execute(
        "SELECT vector_version FROM namespaces WHERE namespace_id = ?", (namespace_id,)
    ).fetchone()
    prev = int(row[0]) if row else 0
    conn.execute(
        "UPDATE namespaces SET vector_version = vector_version + ?, graph_version = graph_version + ? "
        "WHERE namespace_id = ?",
        (int(vectors), int(graph), namespace_id),
    )
    return prev, prev + int(vectors)
