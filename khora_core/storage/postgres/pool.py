"""The asyncpg pool behind the PostgreSQL store, with error translation built in.

``open_pool`` connects once (typed errors within ``connect_timeout_s``), checks pgvector,
runs the migrations, then builds the pool, whose connections get pgvector's codec. Reads
go through ``PgPool.read``, which retries once on a lost connection (a server restart
leaves dead connections in the pool; the retry takes a fresh one); writes go through
``PgPool.transaction`` and are never retried.

A released connection goes back to the pool without asyncpg's reset query
(``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``): that is a second round
trip on every statement's path, and Khora's statements leave nothing for it to undo: settings
change only with ``SET LOCAL`` inside a transaction, the migration lock is
transaction-scoped (``pg_advisory_xact_lock``), and nothing listens or keeps a cursor
open. asyncpg still rolls back a transaction left open on a released connection.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, NoReturn, TypeVar

import asyncpg
from pgvector.asyncpg import register_vector

from khora_core.config import StorageConfig
from khora_core.errors import ConfigError, StorageError
from khora_core.storage.postgres.errors import (
    DSN_SETTING,
    connect,
    is_connection_lost,
    translate_connect_error,
    translate_query_error,
)
from khora_core.storage.postgres.migrate import migrate

__all__ = ["PgPool", "open_pool"]

T = TypeVar("T")


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset of a released connection: nothing beyond asyncpg's rollback of an
    open transaction (module docstring)."""


class PgPool:
    """An opened, migrated PostgreSQL database.

    Every pooled connection starts with ``hnsw.ef_search`` at ``config.hnsw_ef_search`` and,
    on pgvector 0.8+, ``hnsw.iterative_scan = strict_order`` (``session_hnsw_settings``),
    so that a vector search at those settings is one statement, without a transaction
    around a ``SET LOCAL``. These are startup settings of the session, which no statement
    of Khora's changes (a released connection is not reset: module docstring).

    Attributes:
        dim: the embedding dimension of ``khora_chunks.embedding``.
        iterative_scan: whether pgvector supports ``hnsw.iterative_scan`` (0.8+).
        session_ef_search: the ``hnsw.ef_search`` every pooled connection starts with.
        config: the storage settings it was opened with.
    """

    def __init__(self, pool: asyncpg.Pool, *, dim: int, pgvector_version: str, config: StorageConfig) -> None:
        self._pool = pool
        self.dim = dim
        self.pgvector_version = pgvector_version
        self.iterative_scan = supports_iterative_scan(pgvector_version)
        self.session_ef_search = int(config.hnsw_ef_search)
        self.config = config

    @property
    def raw(self) -> asyncpg.Pool:
        """The asyncpg pool (for tests and tools)."""
        return self._pool

    async def read(self, fn: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """Run ``fn`` on a pooled connection; retry once if the connection was lost.

        Raises:
            StorageUnavailableError: the server is unreachable.
            StorageError: the query failed.
        """
        for attempt in (1, 2):
            try:
                async with self._pool.acquire() as conn:
                    return await fn(conn)
            except Exception as exc:
                if attempt == 1 and is_connection_lost(exc) and not self._pool.is_closing():
                    # One dead connection usually means the others died with it (a server
                    # restart, a killed backend pool): replace them all before the retry.
                    await self._pool.expire_connections()
                    continue
                _reraise(exc)
        raise AssertionError("unreachable")  # pragma: no cover

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        return await self.read(lambda c: c.fetch(sql, *args))

    async def fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        return await self.read(lambda c: c.fetchrow(sql, *args))

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self.read(lambda c: c.fetchval(sql, *args))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection inside a transaction: committed on exit, rolled back on error.

        Raises:
            StorageUnavailableError: the connection was lost (nothing was committed
                unless the loss happened during COMMIT itself).
            StorageError: a statement failed.
        """
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                yield conn
        except Exception as exc:
            _reraise(exc)

    async def aclose(self) -> None:
        """Close the pool, waiting a few seconds for busy connections before cutting them."""
        if self._pool.is_closing():
            return
        try:
            await asyncio.wait_for(self._pool.close(), timeout=5.0)
        except (asyncio.TimeoutError, TimeoutError):
            self._pool.terminate()


def _reraise(exc: Exception) -> NoReturn:
    translated = translate_query_error(exc)
    if translated is exc:
        raise exc
    raise translated from exc


def supports_iterative_scan(pgvector_version: str) -> bool:
    """Whether this pgvector has ``hnsw.iterative_scan`` (0.8.0 and later)."""
    return _version(pgvector_version) >= (0, 8, 0)


def session_hnsw_settings(config: StorageConfig, pgvector_version: str) -> dict[str, str]:
    """The HNSW settings every pooled connection starts with (see ``PgPool``)."""
    settings = {"hnsw.ef_search": str(int(config.hnsw_ef_search))}
    if supports_iterative_scan(pgvector_version):
        settings["hnsw.iterative_scan"] = "strict_order"
    return settings


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


async def open_pool(config: StorageConfig, *, dim: int, migrate_schema: bool = True) -> PgPool:
    """Connect to ``config.database_url``, migrate, and return a pool.

    Args:
        config: the storage settings (URL, pool sizes, timeouts, HNSW build settings).
        dim: the embedder's dimension; must match the one the database was built with.
        migrate_schema: False skips the migrations (the schema must then be current).

    Raises:
        ConfigError: no URL, bad credentials, pgvector missing, or a dimension mismatch.
        StorageUnavailableError: the server cannot be reached (within about
            ``connect_timeout_s``).
    """
    dsn = config.database_url
    if not dsn:
        raise ConfigError(f"{DSN_SETTING} is not set: give a postgresql:// URL", setting=DSN_SETTING)
    timeout = float(config.connect_timeout_s)
    conn = await connect(dsn, timeout=timeout)
    try:
        if migrate_schema:
            await migrate(conn, dim, hnsw_m=config.hnsw_m, hnsw_ef_construction=config.hnsw_ef_construction)
        try:
            version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            recorded = await conn.fetchval("SELECT value FROM khora_settings WHERE key = 'embedding_dim'")
        except asyncpg.exceptions.UndefinedTableError as exc:
            raise ConfigError(
                "The Khora schema is missing: run python -m khora_core.storage.postgres.migrate",
                setting=DSN_SETTING,
            ) from exc
        except Exception as exc:
            _reraise(exc)
    finally:
        await conn.close()
    if version is None:
        raise ConfigError(
            f"The pgvector extension is missing in the database of {DSN_SETTING}", setting=DSN_SETTING
        )
    if recorded is not None and int(recorded) != dim:
        raise ConfigError(
            f"The database holds {recorded}-dimension embeddings, the embedder makes {dim}",
            setting="KHORA_EMBEDDING_MODEL",
        )
    try:
        pool = await asyncio.wait_for(
            asyncpg.create_pool(
                dsn,
                min_size=min(config.pool_min_size, config.pool_max_size),
                max_size=config.pool_max_size,
                timeout=timeout,
                init=_init_connection,
                reset=_keep_session,
                server_settings={
                    "application_name": "khora",
                    "jit": "off",
                    **session_hnsw_settings(config, str(version)),
                },
            ),
            timeout * max(1, config.pool_min_size) + 1.0,
        )
    except Exception as exc:
        raise translate_connect_error(exc, dsn) from exc
    if pool is None:  # pragma: no cover - create_pool returns the pool when awaited
        raise StorageError("asyncpg.create_pool returned nothing")
    return PgPool(pool, dim=dim, pgvector_version=str(version), config=config)
