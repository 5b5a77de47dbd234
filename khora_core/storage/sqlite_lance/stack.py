"""``SqliteLanceStack``: the embedded, zero-config storage stack (the default).

One folder (``StorageConfig.data_dir``, ``./.khora`` by default) holds everything:

* ``khora.sqlite3``: documents, chunks, namespaces, the graph and the FTS5 keyword index;
* ``lance/``: chunk vectors, one LanceDB table per namespace;
* ``writer.lock``: held by the one process allowed to write.

A write lands all of a ``WriteBatch`` or none of it. Vectors go to LanceDB first, tagged
with a write id and recorded in a journal table; then one SQLite transaction writes the
rows, graph and FTS terms and clears the journal entry. If SQLite fails, the tagged vectors
are deleted; if the process dies in between, the journal is replayed at the next
``open()``. Searches only return chunks whose SQLite row exists, so recall never sees a
half-written document. Vector removals (deleted or replaced documents) are journalled in
the deleting transaction (by the write id stored on the document, so a replacement with the
same document id keeps its own vectors) and applied to LanceDB right after it commits.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import uuid
import weakref
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from khora_core.config import StorageConfig
from khora_core.errors import ConfigError, InvalidInputError, StorageError
from khora_core.models import NamespaceStats, WriteBatch
from khora_core.storage.sqlite_lance.db import Database, WriterLock
from khora_core.storage.sqlite_lance.documents import (
    SqliteDocumentStore,
    bump_versions,
    delete_document_rows,
    delete_namespace_rows,
    insert_document_rows,
    namespace_exists,
    require_namespace,
)
from khora_core.storage.sqlite_lance.graph import SqliteGraphStore
from khora_core.storage.sqlite_lance.graph_rows import (
    detach_document,
    insert_mentions,
    refresh_mention_counts,
    remove_orphans,
    upsert_entities,
    upsert_relationships,
)
from khora_core.storage.sqlite_lance.keywords import Fts5KeywordIndex
from khora_core.storage.sqlite_lance.lance import LanceVectors
from khora_core.storage.sqlite_lance.vectors import (
    ChunkVectorCache,
    EntityVectorCache,
    SqliteLanceVectorIndex,
)

__all__ = ["SqliteLanceStack"]

log = logging.getLogger(__name__)


def _journal(conn: sqlite3.Connection, namespace_id: str, op: str, ref: str) -> None:
    conn.execute(
        "INSERT INTO lance_journal (namespace_id, op, ref) VALUES (?, ?, ?)", (namespace_id, op, ref)
    )


def _journal_all(conn: sqlite3.Connection, namespace_id: str, op: str, refs: list[str]) -> None:
    conn.executemany(
        "INSERT INTO lance_journal (namespace_id, op, ref) VALUES (?, ?, ?)",
        [(namespace_id, op, r) for r in refs],
    )


def _unjournal_all(conn: sqlite3.Connection, namespace_id: str, op: str, refs: list[str]) -> None:
    conn.executemany(
        "DELETE FROM lance_journal WHERE namespace_id = ? AND op = ? AND ref = ?",
        [(namespace_id, op, r) for r in refs],
    )


def _claim_external_id(conn: sqlite3.Connection, namespace_id: str, batch: WriteBatch) -> None:
    """Add every other stored version of the batch's ``external_id`` to its ``replaces``:
    writes are serialised, so of concurrent writers of one external id the last one wins
    and one version is kept."""
    external_id = batch.document.external_id
    if not external_id:
        return
    rows = conn.execute(
        "SELECT id FROM documents WHERE namespace_id = ? AND external_id = ? AND id != ? "
        "ORDER BY created_at, id",
        (namespace_id, external_id, batch.document.id),
    ).fetchall()
    batch.replaces.extend(r[0] for r in rows if r[0] not in batch.replaces)


class SqliteLanceStack:
    """The embedded storage stack: SQLite + LanceDB in one folder.

    Safe for one writer process with concurrent reader processes (``read_only=True``).
    Inside the writing process, writes are serialised and reads run concurrently.

    Args:
        config: storage settings; ``data_dir`` is the folder.
        dim: the embedding dimension (checked against the folder's on open).
        read_only: open without taking the writer lock; writes raise ``StorageError``.
    """

    name = "sqlite_lance"

    def __init__(self, config: StorageConfig, *, dim: int, read_only: bool = False) -> None:
        self.config = config
        self.dim = int(dim)
        self.read_only = read_only
        self.root = Path(config.data_dir)
        self._db = Database(self.root / "khora.sqlite3", dim=self.dim, read_only=read_only)
        self._lance = LanceVectors(self.root / "lance", dim=self.dim)
        self._chunk_vectors = ChunkVectorCache(self._lance, self.dim)
        self._entity_vectors = EntityVectorCache()
        self._file_lock = WriterLock(self.root / "writer.lock")
        # Writes run one at a time on the database's single writer thread, whichever event
        # loop submits them; this lock only keeps one loop's writers queued in order. One
        # per loop, since the store can be shared by Khoras on several loops (a lock
        # belongs to one).
        self._write_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._write_locks_guard = threading.Lock()
        self.documents = SqliteDocumentStore(self._db, self._lance)
        self.vectors = SqliteLanceVectorIndex(self._db, self._chunk_vectors, self.dim)
        self.keywords = Fts5KeywordIndex(self._db)
        self.graph = SqliteGraphStore(self._db, self._entity_vectors, self.dim)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Create or open the data folder, take the writer lock, migrate, replay the journal.

        Raises:
            ConfigError: the folder cannot be created, or holds another embedding dimension.
            StorageError: another process already has the folder open for writing.
        """
        if self.dim <= 0:
            raise ConfigError(f"Embedding dimension must be positive, got {self.dim}", setting="dim")
        try:
            await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"Cannot create the Khora data folder {str(self.root)!r}: {exc}", setting="KHORA_DATA_DIR"
            ) from exc
        if not self.read_only:
            await asyncio.to_thread(self._file_lock.acquire)
        try:
            await self._db.open()
            await self._db.on_writer(self._lance.open)
            if not self.read_only:
                await self._db.on_writer(self._replay_journal)
        except BaseException:
            await self._db.close()
            self._file_lock.release()
            raise
        if (self.config.bm25_k1, self.config.bm25_b) != (1.2, 0.75):
            log.warning(
                "sqlite_lance uses SQLite FTS5's fixed BM25 parameters k1=1.2, b=0.75; "
                "bm25_k1=%s / bm25_b=%s are ignored by this stack",
                self.config.bm25_k1,
                self.config.bm25_b,
            )

    async def aclose(self) -> None:
        """Close connections and release the writer lock (safe to call twice)."""
        await self._db.close()
        self._file_lock.release()

    async def __aenter__(self) -> SqliteLanceStack:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- writes ------------------------------------------------------------------------------

    @property
    def _write_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._write_locks_guard:
            lock = self._write_locks.get(loop)
            if lock is None:
                lock = self._write_locks[loop] = asyncio.Lock()
            return lock

    async def write(self, namespace_id: str, batch: WriteBatch) -> None:
        """Land a whole batch (document, chunks, vectors, FTS terms, graph) or none of it.

        Raises:
            NamespaceNotFoundError: the namespace does not exist.
            InvalidInputError: the batch is inconsistent (ids, dimensions, unknown entities).
            StorageError: SQLite or LanceDB failed; nothing of the batch is visible.
        """
        await self.write_many(namespace_id, [batch])

    async def write_many(self, namespace_id: str, batches: Sequence[WriteBatch]) -> None:
        """Land several batches as one write (one LanceDB append, one SQLite transaction),
        all of them or none; raises as :meth:`write` does."""
        batches = list(batches)
        if not batches:
            return
        for batch in batches:
            self._check_batch(namespace_id, batch)
        ids = [b.document.id for b in batches]
        if len(set(ids)) != len(ids):
            raise InvalidInputError(
                "A write names the same document id twice; write them one after the other"
            )
        async with self._write_lock:
            await self._db.on_writer(self._write_sync, namespace_id, batches)

    def _check_batch(self, namespace_id: str, batch: WriteBatch) -> None:
        doc = batch.document
        if doc.namespace_id != namespace_id:
            raise InvalidInputError(
                f"Document {doc.id!r} belongs to namespace {doc.namespace_id!r}, not {namespace_id!r}"
            )
        for c in batch.chunks:
            if c.document_id != doc.id or c.namespace_id != namespace_id:
                raise InvalidInputError(
                    f"Chunk {c.id!r} does not belong to document {doc.id!r} in {namespace_id!r}"
                )
            if c.embedding is not None and len(c.embedding) != self.dim:
                raise InvalidInputError(
                    f"Chunk {c.id!r} has a {len(c.embedding)}-dimensional embedding; expected {self.dim}"
                )
        foreign = [e.id for e in batch.entities if e.namespace_id != namespace_id]
        foreign += [r.id for r in batch.relationships if r.namespace_id != namespace_id]
        if foreign:
            raise InvalidInputError(f"Entities/relationships {foreign[:5]} belong to another namespace")
        if len({c.id for c in batch.chunks}) != len(batch.chunks):
            raise InvalidInputError(f"Document {doc.id!r} has duplicate chunk ids")

    def _write_sync(self, namespace_id: str, batches: list[WriteBatch]) -> None:
        # One write id per document: deleting a document removes the vectors of its write only.
        write_ids = {b.document.id: uuid.uuid4().hex for b in batches}
        ids = list(write_ids.values())
        embedded = [c for b in batches for c in b.chunks if c.embedding is not None]
        matrix = np.asarray([c.embedding for c in embedded], dtype=np.float32).reshape(
            len(embedded), self.dim
        )
        if embedded:
            self._db.transaction_sync(_journal_all, namespace_id, "add", ids, what="journal a write")
            try:
                self._lance.add(
                    namespace_id,
                    [(c.id, c.document_id) for c in embedded],
                    matrix,
                    [write_ids[c.document_id] for c in embedded],
                )
            except Exception as exc:
                self._compensate(namespace_id, ids)
                which = batches[0].document.id if len(batches) == 1 else f"{len(batches)} documents"
                raise StorageError(f"LanceDB could not store the vectors of {which!r}: {exc}") from exc
        entry = self._chunk_vectors.entry(namespace_id)
        with entry.lock:  # searches wait for the cache patch instead of reloading meanwhile
            try:
                prev, new, removed = self._db.transaction_sync(
                    self._write_rows, namespace_id, batches, write_ids, what="write documents"
                )
            except BaseException:
                if embedded:
                    self._compensate(namespace_id, ids)
                raise
            self._chunk_vectors.apply(entry, prev, new, [c.id for c in embedded], matrix, removed)
        if any(b.replaces for b in batches):
            self._apply_deletes(namespace_id)

    def _write_rows(
        self,
        conn: sqlite3.Connection,
        namespace_id: str,
        batches: list[WriteBatch],
        write_ids: dict[str, str],
    ) -> tuple[int, int, list[str]]:
        require_namespace(conn, namespace_id)
        removed: list[str] = []
        for batch in batches:
            touched: set[str] = set()
            _claim_external_id(conn, namespace_id, batch)
            for old_id in dict.fromkeys(batch.replaces):
                gone = delete_document_rows(conn, namespace_id, old_id)
                if gone is None:
                    continue
                removed += gone[0]
                touched |= detach_document(conn, namespace_id, old_id, gone[0])
                _journal(conn, namespace_id, "purge", gone[1])
            insert_document_rows(
                conn, namespace_id, batch.document, batch.chunks, write_ids[batch.document.id]
            )
            upsert_entities(conn, namespace_id, batch.entities, self.dim)
            insert_mentions(conn, namespace_id, batch.mentions)
            upsert_relationships(conn, namespace_id, batch.relationships)
            given = {e.id for e in batch.entities}
            remove_orphans(conn, namespace_id, touched - given)
            refresh_mention_counts(conn, namespace_id, given | {m.entity_id for m in batch.mentions})
        _unjournal_all(conn, namespace_id, "add", list(write_ids.values()))
        prev, new = bump_versions(conn, namespace_id, vectors=True, graph=True)
        return prev, new, removed

    def _compensate(self, namespace_id: str, write_ids: list[str]) -> None:
        """Remove a failed write's vectors; on failure the journal retries at next open."""
        try:
            self._lance.delete_write(namespace_id, write_ids)
            self._db.transaction_sync(
                _unjournal_all, namespace_id, "add", write_ids, what="clear the journal"
            )
        except Exception:
            log.exception(
                "Could not remove the vectors of failed writes %s; they will be removed on next open",
                write_ids,
            )

    def _apply_deletes(self, namespace_id: str | None = None) -> None:
        """Apply journalled LanceDB removals (best effort; leftovers are retried at open)."""

        def pending(conn: sqlite3.Connection) -> list[tuple[int, str, str, str]]:
            sql = "SELECT id, namespace_id, op, ref FROM lance_journal"
            if namespace_id is not None:
                return conn.execute(
                    sql + " WHERE namespace_id = ? AND op != 'add'", (namespace_id,)
                ).fetchall()
            return conn.execute(sql).fetchall()

        for jid, ns, op, ref in self._db.transaction_sync(pending, what="read the journal"):
            try:
                if op in ("add", "purge"):
                    self._lance.delete_write(ns, ref)
                elif op == "drop" and not self._db.transaction_sync(namespace_exists, ns):
                    self._lance.drop(ns)
                    self._chunk_vectors.forget(ns)
            except Exception:
                log.exception(
                    "Could not apply pending LanceDB %s for namespace %r; retrying on next open", op, ns
                )
                continue
            self._db.transaction_sync(
                lambda conn, j=jid: conn.execute("DELETE FROM lance_journal WHERE id = ?", (j,))
            )

    def _replay_journal(self) -> None:
        self._apply_deletes(None)

    async def delete_document(self, namespace_id: str, document_id: str) -> bool:
        """Remove a document everywhere: chunks, FTS rows, vectors, time links, mentions,
        relationships learned from it, and entities left with no mention and no edge."""
        async with self._write_lock:
            return await self._db.on_writer(self._delete_sync, namespace_id, document_id)

    def _delete_sync(self, namespace_id: str, document_id: str) -> bool:
        def rows(conn: sqlite3.Connection) -> tuple[int, int, list[str]] | None:
            gone = delete_document_rows(conn, namespace_id, document_id)
            if gone is None:
                return None
            remove_orphans(conn, namespace_id, detach_document(conn, namespace_id, document_id, gone[0]))
            _journal(conn, namespace_id, "purge", gone[1])
            prev, new = bump_versions(conn, namespace_id, vectors=True, graph=True)
            return prev, new, gone[0]

        entry = self._chunk_vectors.entry(namespace_id)
        with entry.lock:
            done = self._db.transaction_sync(rows, what="delete a document")
            if done is not None:
                self._chunk_vectors.apply(entry, done[0], done[1], [], None, done[2])
        if done is None:
            return False
        self._apply_deletes(namespace_id)
        return True

    async def delete_namespace(self, namespace_id: str) -> bool:
        """Remove a namespace and everything in it (its LanceDB table is dropped)."""

        def rows(conn: sqlite3.Connection) -> bool:
            existed = delete_namespace_rows(conn, namespace_id)
            conn.execute("DELETE FROM lance_journal WHERE namespace_id = ?", (namespace_id,))
            _journal(conn, namespace_id, "drop", namespace_id)
            return existed

        def run() -> bool:
            existed = self._db.transaction_sync(rows, what="delete a namespace")
            self._chunk_vectors.forget(namespace_id)
            self._entity_vectors.forget(namespace_id)
            self._apply_deletes(namespace_id)
            return existed

        async with self._write_lock:
            return await self._db.on_writer(run)

    async def stats(self, namespace_id: str) -> NamespaceStats:
        """Counts of documents, chunks, entities and relationships in the namespace."""
        sql = (
            "SELECT (SELECT COUNT(*) FROM documents WHERE namespace_id = ?1), "
            "(SELECT COUNT(*) FROM chunks WHERE namespace_id = ?1), "
            "(SELECT COUNT(*) FROM entities WHERE namespace_id = ?1), "
            "(SELECT COUNT(*) FROM relationships WHERE namespace_id = ?1)"
        )
        docs, chunks, entities, rels = await self._db.read(
            lambda conn: conn.execute(sql, (namespace_id,)).fetchone()
        )
        return NamespaceStats(
            namespace_id=namespace_id, documents=docs, chunks=chunks, entities=entities, relationships=rels
        )
