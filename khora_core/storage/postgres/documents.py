"""Namespaces, documents and chunks in PostgreSQL, and the atomic row write.

``write_rows`` lands a document, its chunks (with embeddings) and their BM25 terms in
one transaction; the stack coordinator pairs it with the Neo4j graph write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from khora_core.config import StorageConfig
from khora_core.errors import InvalidInputError, NamespaceNotFoundError
from khora_core.models import Chunk, Document, Namespace, NamespaceStats, WriteBatch
from khora_core.storage.postgres.keywords import term_frequencies
from khora_core.storage.postgres.pool import PgPool, open_pool
from khora_core.storage.postgres.rows import (
    CHUNK_COLUMNS,
    CHUNK_INSERT,
    DOCUMENT_COLUMNS,
    DOCUMENT_INSERT,
    chunk_from_row,
    chunk_insert_args,
    document_from_row,
    document_insert_args,
    dump_json,
    namespace_from_row,
)

__all__ = ["ID_BATCH", "PostgresDocumentStore"]

#: Ids per ``= ANY($n)`` lookup: long id lists are fetched in slices this size.
ID_BATCH = 1000

_NAMESPACE_COLUMNS = "namespace_id, name, created_at, metadata"


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))


class PostgresDocumentStore:
    """``DocumentStore`` on PostgreSQL, plus the row-level writes the stack coordinator uses.

    Build it with ``await PostgresDocumentStore.connect(config, dim=...)`` (connects,
    checks pgvector, migrates) or around an existing ``PgPool``; share ``store.pool`` with
    ``PostgresVectorIndex`` and ``PostgresKeywordIndex``.
    """

    def __init__(self, pool: PgPool) -> None:
        self._pool = pool

    @classmethod
    async def connect(cls, config: StorageConfig, *, dim: int) -> PostgresDocumentStore:
        """Open ``config.database_url``: connect, check pgvector, migrate, pool.

        Raises:
            ConfigError: no URL, bad credentials (names ``KHORA_DATABASE_URL``), pgvector
                missing, or an embedding dimension other than the database's.
            StorageUnavailableError: the server is unreachable (within about
                ``connect_timeout_s``).
        """
        return cls(await open_pool(config, dim=dim))

    @property
    def pool(self) -> PgPool:
        return self._pool

    async def aclose(self) -> None:
        await self._pool.aclose()

    # -- namespaces -------------------------------------------------------------------

    async def create_namespace(self, namespace: Namespace) -> None:
        """Create the namespace; an existing one with the same id is left as it is."""
        await self._pool.read(
            lambda c: c.execute(
                "INSERT INTO khora_namespaces (namespace_id, name, created_at, metadata) "
                "VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT (namespace_id) DO NOTHING",
                namespace.namespace_id,
                namespace.name,
                namespace.created_at,
                dump_json(namespace.metadata),
            )
        )

    async def get_namespace(self, namespace_id: str) -> Namespace | None:
        row = await self._pool.fetchrow(
            f"SELECT {_NAMESPACE_COLUMNS} FROM khora_namespaces WHERE namespace_id = $1", namespace_id
        )
        return namespace_from_row(row) if row else None

    async def list_namespaces(self) -> list[Namespace]:
        rows = await self._pool.fetch(
            f"SELECT {_NAMESPACE_COLUMNS} FROM khora_namespaces ORDER BY created_at, namespace_id"
        )
        return [namespace_from_row(r) for r in rows]

    # -- documents and chunks ------------------------------------------------------------

    async def find_document_by_hash(self, namespace_id: str, content_hash: str) -> Document | None:
        row = await self._pool.fetchrow(
            f"SELECT {DOCUMENT_COLUMNS} FROM khora_documents d "
            "WHERE d.namespace_id = $1 AND d.content_hash = $2 ORDER BY d.created_at, d.id LIMIT 1",
            namespace_id,
            content_hash,
        )
        return document_from_row(row) if row else None

    async def find_documents_by_hashes(
        self, namespace_id: str, content_hashes: Sequence[str]
    ) -> dict[str, Document]:
        """``{content_hash: the earliest stored document with it}`` for the hashes the
        namespace holds (one statement per :data:`ID_BATCH` hashes)."""
        wanted = _unique(content_hashes)
        found: dict[str, Document] = {}
        for i in range(0, len(wanted), ID_BATCH):
            rows = await self._pool.fetch(
                f"SELECT DISTINCT ON (d.content_hash) {DOCUMENT_COLUMNS} FROM khora_documents d "
                "WHERE d.namespace_id = $1 AND d.content_hash = ANY($2::text[]) "
                "ORDER BY d.content_hash, d.created_at, d.id",
                namespace_id,
                wanted[i : i + ID_BATCH],
            )
            for row in rows:
                doc = document_from_row(row)
                found[doc.content_hash] = doc
        return found

    async def find_documents_by_external_id(self, namespace_id: str, external_id: str) -> list[Document]:
        rows = await self._pool.fetch(
            f"SELECT {DOCUMENT_COLUMNS} FROM khora_documents d "
            "WHERE d.namespace_id = $1 AND d.external_id = $2 ORDER BY d.created_at, d.id",
            namespace_id,
            external_id,
        )
        return [document_from_row(r) for r in rows]

    async def get_documents(self, namespace_id: str, document_ids: Sequence[str]) -> list[Document]:
        """The namespace's documents among ``document_ids``, in the order asked; unknown ids are skipped."""
        rows = await self._by_ids(
            f"SELECT {DOCUMENT_COLUMNS} FROM khora_documents d WHERE d.namespace_id = $1 AND d.id = ANY($2::text[])",
            namespace_id,
            document_ids,
        )
        return [document_from_row(r) for r in rows]

    async def list_documents(self, namespace_id: str, *, offset: int = 0, limit: int = 100) -> list[Document]:
        """A page of the namespace's documents, newest first (``created_at`` then id)."""
        rows = await self._pool.fetch(
            f"SELECT {DOCUMENT_COLUMNS} FROM khora_documents d WHERE d.namespace_id = $1 "
            "ORDER BY d.created_at DESC, d.id LIMIT $2 OFFSET $3",
            namespace_id,
            limit,
            offset,
        )
        return [document_from_row(r) for r in rows]

    async def all_document_ids(self, namespace_id: str) -> set[str]:
        """The ids of every document the namespace holds."""
        rows = await self._pool.fetch("SELECT id FROM khora_documents WHERE namespace_id = $1", namespace_id)
        return {r["id"] for r in rows}

    async def stored_document_ids(self, namespace_id: str, document_ids: Sequence[str]) -> set[str]:
        """The ids among ``document_ids`` that the namespace holds."""
        found: set[str] = set()
        ids = _unique(document_ids)
        for i in range(0, len(ids), ID_BATCH):
            rows = await self._pool.fetch(
                "SELECT id FROM khora_documents WHERE namespace_id = $1 AND id = ANY($2::text[])",
                namespace_id,
                ids[i : i + ID_BATCH],
            )
            found.update(r["id"] for r in rows)
        return found

    async def get_chunks(self, namespace_id: str, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The namespace's chunks among ``chunk_ids``, in the order asked; unknown ids are skipped."""
        rows = await self._by_ids(
            f"SELECT {CHUNK_COLUMNS} FROM khora_chunks c WHERE c.namespace_id = $1 AND c.id = ANY($2::text[])",
            namespace_id,
            chunk_ids,
        )
        return [chunk_from_row(r) for r in rows]

    async def chunk_ids_for_documents(
        self, namespace_id: str, document_ids: Sequence[str]
    ) -> dict[str, list[str]]:
        """``document id -> its chunk ids in order`` for the namespace's documents among ``document_ids``."""
        out: dict[str, list[str]] = {}
        ids = _unique(document_ids)
        for i in range(0, len(ids), ID_BATCH):
            rows = await self._pool.fetch(
                "SELECT document_id, id FROM khora_chunks WHERE namespace_id = $1 AND document_id = ANY($2::text[]) "
                "ORDER BY document_id, idx",
                namespace_id,
                ids[i : i + ID_BATCH],
            )
            for r in rows:
                out.setdefault(r["document_id"], []).append(r["id"])
        return out

    async def newest_occurred_at(self, namespace_id: str) -> datetime | None:
        value: datetime | None = await self._pool.fetchval(
            "SELECT max(occurred_at) FROM khora_documents WHERE namespace_id = $1", namespace_id
        )
        return value

    async def _by_ids(self, sql: str, namespace_id: str, ids: Sequence[str]) -> list[asyncpg.Record]:
        wanted = _unique(ids)
        by_id: dict[str, asyncpg.Record] = {}
        for i in range(0, len(wanted), ID_BATCH):
            for row in await self._pool.fetch(sql, namespace_id, wanted[i : i + ID_BATCH]):
                by_id[row["id"]] = row
        return [by_id[i] for i in wanted if i in by_id]

    # -- counts ---------------------------------------------------------------------------

    async def count_documents(self, namespace_id: str) -> int:
        return int(
            await self._pool.fetchval(
                "SELECT count(*) FROM khora_documents WHERE namespace_id = $1", namespace_id
            )
        )

    async def count_chunks(self, namespace_id: str) -> int:
        """The namespace's chunk count, from the totals the triggers keep (no row scan)."""
        return int(
            await self._pool.fetchval(
                "SELECT coalesce(sum(chunks), 0) FROM khora_chunk_totals WHERE namespace_id = $1",
                namespace_id,
            )
        )

    async def stats(self, namespace_id: str) -> NamespaceStats:
        """Document and chunk counts (the graph side fills entities and relationships)."""
        row = await self._pool.fetchrow(
            "SELECT (SELECT count(*) FROM khora_documents WHERE namespace_id = $1) AS documents, "
            "(SELECT coalesce(sum(chunks), 0) FROM khora_chunk_totals WHERE namespace_id = $1) AS chunks",
            namespace_id,
        )
        assert row is not None
        return NamespaceStats(namespace_id=namespace_id, documents=row["documents"], chunks=row["chunks"])

    # -- writes ---------------------------------------------------------------------------

    async def write_rows(self, namespace_id: str, batch: WriteBatch) -> None:
        """Land the batch's document, chunks, embeddings and BM25 terms in one transaction.

        Documents in ``batch.replaces`` are deleted in the same transaction, and so is every
        other stored version of the document's ``external_id``: writes of one external id
        take a transaction lock on it, so of concurrent writers the last one wins and one
        version is kept. The versions found that way are added to ``batch.replaces``.

        Raises:
            NamespaceNotFoundError: the namespace does not exist.
            InvalidInputError: the batch names another namespace or document, a document
                id that is stored already (a concurrent write of the same content won), or
                a value PostgreSQL rejects (wrong embedding dimension, NUL characters).
            StorageUnavailableError: the server is unreachable (nothing was written).
        """
        await self.write_rows_many(namespace_id, [batch])

    async def write_rows_many(self, namespace_id: str, batches: Sequence[WriteBatch]) -> None:
        """:meth:`write_rows` for several batches in one transaction (all or none)."""
        batches = list(batches)
        if not batches:
            return
        for batch in batches:
            _check_batch(namespace_id, batch)
        doc_ids = [b.document.id for b in batches]
        if len(set(doc_ids)) != len(doc_ids):
            raise InvalidInputError(
                "A write names the same document id twice; write them one after the other"
            )
        chunk_args, terms = await asyncio.to_thread(_prepare_rows, namespace_id, batches)
        doc_args = [document_insert_args(namespace_id, b.document) for b in batches]
        try:
            async with self._pool.transaction() as conn:
                # FOR KEY SHARE: a concurrent delete_namespace waits for this write to finish.
                exists = await conn.fetchval(
                    "SELECT 1 FROM khora_namespaces WHERE namespace_id = $1 FOR KEY SHARE", namespace_id
                )
                if not exists:
                    raise NamespaceNotFoundError(
                        f"Namespace {namespace_id!r} does not exist; create it with create_namespace"
                    )
                await _claim_external_ids(conn, namespace_id, batches)
                await _delete_documents(conn, namespace_id, [d for b in batches for d in b.replaces])
                await conn.executemany(DOCUMENT_INSERT, doc_args)
                if chunk_args:
                    await conn.executemany(CHUNK_INSERT, chunk_args)
                if terms[0]:
                    await conn.execute(
                        "INSERT INTO khora_terms (namespace_id, term, chunk_id, tf, chunk_terms) "
                        "SELECT $1, t.term, t.chunk_id, t.tf, t.chunk_terms "
                        "FROM unnest($2::text[], $3::text[], $4::int[], $5::int[]) "
                        "AS t(term, chunk_id, tf, chunk_terms)",
                        namespace_id,
                        *terms,
                    )
        except Exception as exc:
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            if isinstance(cause, asyncpg.DataError):
                raise InvalidInputError(f"PostgreSQL rejected a value of the batch: {cause}") from exc
            if isinstance(cause, asyncpg.UniqueViolationError) and cause.table_name == "khora_documents":
                raise InvalidInputError(
                    f"A document of the batch is stored already in namespace {namespace_id!r} "
                    "(a concurrent write of the same content landed first); delete it first or "
                    "list it in WriteBatch.replaces"
                ) from exc
            if isinstance(cause, asyncpg.ForeignKeyViolationError | asyncpg.UniqueViolationError):
                raise InvalidInputError(f"The batch is inconsistent: {cause}") from exc
            raise

    async def delete_document_rows(self, namespace_id: str, document_id: str) -> bool:
        """Delete a document with its chunks and terms; False when it was not there."""
        async with self._pool.transaction() as conn:
            return bool(await _delete_documents(conn, namespace_id, [document_id]))

    async def delete_namespace_rows(self, namespace_id: str) -> bool:
        """Delete a namespace and all its rows; False when it was not there."""
        async with self._pool.transaction() as conn:
            # Children first, set-wise: cheaper than row-by-row FK cascades.
            await conn.execute("DELETE FROM khora_terms WHERE namespace_id = $1", namespace_id)
            await conn.execute("DELETE FROM khora_chunks WHERE namespace_id = $1", namespace_id)
            await conn.execute("DELETE FROM khora_chunk_totals WHERE namespace_id = $1", namespace_id)
            await conn.execute("DELETE FROM khora_documents WHERE namespace_id = $1", namespace_id)
            gone = await conn.fetchval(
                "DELETE FROM khora_namespaces WHERE namespace_id = $1 RETURNING namespace_id", namespace_id
            )
        return gone is not None


def _check_batch(namespace_id: str, batch: WriteBatch) -> None:
    doc = batch.document
    if doc.namespace_id != namespace_id:
        raise InvalidInputError(
            f"document {doc.id!r} belongs to namespace {doc.namespace_id!r}, not {namespace_id!r}"
        )
    for chunk in batch.chunks:
        if chunk.namespace_id != namespace_id or chunk.document_id != doc.id:
            raise InvalidInputError(
                f"chunk {chunk.id!r} does not belong to document {doc.id!r} in {namespace_id!r}"
            )
    if len({c.id for c in batch.chunks}) != len(batch.chunks):
        raise InvalidInputError(f"document {doc.id!r} has duplicate chunk ids")


def _prepare_rows(
    namespace_id: str, batches: Sequence[WriteBatch]
) -> tuple[list[tuple[Any, ...]], tuple[list[str], list[str], list[int], list[int]]]:
    """Insert arguments for the chunks and the flattened (term, chunk id, tf, chunk length)
    postings."""
    chunk_args: list[tuple[Any, ...]] = []
    t_terms: list[str] = []
    t_chunks: list[str] = []
    t_tfs: list[int] = []
    t_lengths: list[int] = []
    for chunk in (c for b in batches for c in b.chunks):
        tf = term_frequencies(chunk.search_text)
        length = sum(tf.values())
        chunk_args.append(chunk_insert_args(namespace_id, chunk, length))
        for term, count in tf.items():
            t_terms.append(term)
            t_chunks.append(chunk.id)
            t_tfs.append(count)
            t_lengths.append(length)
    return chunk_args, (t_terms, t_chunks, t_tfs, t_lengths)


async def _claim_external_ids(
    conn: asyncpg.Connection, namespace_id: str, batches: Sequence[WriteBatch]
) -> None:
    """Lock the batches' external ids for this transaction and add every other stored
    version of each to its batch's ``replaces``.

    The locks are transaction-level advisory locks on (namespace, external id) hashes,
    taken in hash order so two writers never wait on each other in a cycle; a concurrent
    write of the same external id waits here until this transaction ends, then sees this
    version and replaces it.
    """
    by_external = {b.document.external_id: b for b in batches if b.document.external_id}
    if not by_external:
        return
    keys = sorted(by_external)
    for row in await conn.fetch(
        "SELECT DISTINCT hashtext(k) AS h FROM unnest($1::text[]) AS k ORDER BY h", keys
    ):
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1), $2)", namespace_id, row["h"])
    own = [b.document.id for b in batches]
    for row in await conn.fetch(
        "SELECT id, external_id FROM khora_documents WHERE namespace_id = $1 "
        "AND external_id = ANY($2::text[]) AND NOT (id = ANY($3::text[])) ORDER BY created_at, id",
        namespace_id,
        keys,
        own,
    ):
        batch = by_external[row["external_id"]]
        if row["id"] not in batch.replaces:
            batch.replaces.append(row["id"])


async def _delete_documents(
    conn: asyncpg.Connection, namespace_id: str, document_ids: list[str]
) -> list[str]:
    """Delete documents (children first) inside the caller's transaction; return the ids deleted.

    The chunks' ids are read first and their terms deleted by id: one statement joining
    terms to chunks, planned on statistics from before a large batch landed, read the
    namespace's chunks once per term it held (a window of 512 new HotpotQA passages spent
    2-12 s there, growing with the namespace, though there was nothing to delete).
    """
    ids = _unique(document_ids)
    chunk_ids = [
        r["id"]
        for r in await conn.fetch(
            "SELECT id FROM khora_chunks WHERE namespace_id = $1 AND document_id = ANY($2::text[])",
            namespace_id,
            ids,
        )
    ]
    if chunk_ids:
        await conn.execute(
            "DELETE FROM khora_terms WHERE namespace_id = $1 AND chunk_id = ANY($2::text[])",
            namespace_id,
            chunk_ids,
        )
    await conn.execute(
        "DELETE FROM khora_chunks WHERE namespace_id = $1 AND document_id = ANY($2::text[])",
        namespace_id,
        ids,
    )
    rows = await conn.fetch(
        "DELETE FROM khora_documents WHERE namespace_id = $1 AND id = ANY($2::text[]) RETURNING id",
        namespace_id,
        ids,
    )
    return [r["id"] for r in rows]
