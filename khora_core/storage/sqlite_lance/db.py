"""SQLite connections for the embedded store: one writer thread, a small reader pool.

SQLite runs in WAL mode so readers never block the writer and always see the last committed
transaction. All writes go through one dedicated thread (one connection, explicit
``BEGIN IMMEDIATE`` transactions); reads run on a few pool threads, each with its own
read-only connection. A file lock (``fcntl.flock``) in the data folder lets only one
process at a time open the store for writing.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from khora_core.errors import KhoraError, StorageError
from khora_core.storage.sqlite_lance.schema import apply_schema

try:  # POSIX; on Windows the store still works but cannot refuse a second writer.
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")

_BUSY_TIMEOUT_MS = 10_000
_READERS = 4


class WriterLock:
    """An exclusive, non-blocking lock file: the second writer process gets a clear error."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                if holder == str(os.getpid()):
                    raise StorageError(
                        f"The Khora data folder {str(self.path.parent)!r} is already open for writing by "
                        "another SqliteLanceStack in this process. Open it through Khora (or "
                        "khora_core.storage.stack.open_stack), which shares one open store per folder."
                    ) from exc
                raise StorageError(
                    f"The Khora data folder {str(self.path.parent)!r} is already open for writing by another "
                    f"process (pid {holder}). Close it there first (Khora.aclose()), or give this Khora its "
                    "own folder (Khora(data_dir=...) or KHORA_DATA_DIR). A process that only reads can "
                    "open SqliteLanceStack(config, dim=..., read_only=True) beside the writer."
                ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def _connect(path: Path, *, reader: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA temp_store = MEMORY")
    # KiB of page cache per connection: readers keep 64 MiB for hot searches. The writer's
    # cache fills up during an ingest; 32 MiB wrote 10,000 passages as fast as 64 MiB with
    # 35 MB less resident memory (16 MiB: 50 MB less, but about 5% slower).
    conn.execute(f"PRAGMA cache_size = {-65536 if reader else -32768}")
    if reader:
        conn.execute("PRAGMA query_only = 1")
    return conn


def translate(exc: sqlite3.Error, what: str) -> StorageError:
    """A ``StorageError`` for a sqlite3 failure, with a hint when the file is locked."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StorageError(
            f"SQLite could not {what}: the database is locked by another process ({text}). "
            "Only one process may write to a Khora data folder at a time."
        )
    return StorageError(f"SQLite could not {what}: {text}")


class Database:
    """The SQLite side of the embedded store. No I/O until :meth:`open`."""

    def __init__(self, path: Path, *, dim: int, read_only: bool = False) -> None:
        self.path = path
        self.dim = dim
        self.read_only = read_only
        self._writer: ThreadPoolExecutor | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._wconn: sqlite3.Connection | None = None
        self._rconns: list[sqlite3.Connection] = []
        self._rlock = threading.Lock()
        self._local = threading.local()

    async def open(self) -> None:
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="khora-sqlite-w")
        self._readers = ThreadPoolExecutor(max_workers=_READERS, thread_name_prefix="khora-sqlite-r")
        loop = asyncio.get_running_loop()
        try:
            self._wconn = await loop.run_in_executor(self._writer, self._open_writer)
        except sqlite3.Error as exc:
            await self.close()
            raise translate(exc, f"open {str(self.path)!r}") from exc
        except BaseException:
            await self.close()
            raise

    def _open_writer(self) -> sqlite3.Connection:
        conn = _connect(self.path, reader=False)
        try:
            if not self.read_only:
                conn.execute("PRAGMA journal_mode = WAL")
                apply_schema(conn, self.dim)
            elif conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is None:
                raise StorageError(
                    f"No Khora store at {str(self.path.parent)!r} to open read-only; open it once for writing first"
                )
            return conn
        except BaseException:
            conn.close()
            raise

    async def close(self) -> None:
        for pool in (self._readers, self._writer):
            if pool is not None:
                await asyncio.to_thread(pool.shutdown, True)
        self._readers = self._writer = None
        with self._rlock:
            conns, self._rconns = self._rconns, []
        if self._wconn is not None:
            conns.append(self._wconn)
            self._wconn = None
        for conn in conns:
            conn.close()

    def _reader_conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path, reader=True)
            self._local.conn = conn
            with self._rlock:
                self._rconns.append(conn)
        return conn

    def _require(self, pool: ThreadPoolExecutor | None) -> ThreadPoolExecutor:
        if pool is None:
            raise StorageError("The sqlite_lance store is not open: call `await stack.open()` first")
        return pool

    async def read(self, fn: Callable[..., T], *args: Any, what: str = "read") -> T:
        """Run ``fn(conn, *args)`` on a reader thread (a consistent snapshot per statement)."""
        pool = self._require(self._readers)

        def job() -> T:
            try:
                return fn(self._reader_conn(), *args)
            except KhoraError:
                raise
            except sqlite3.Error as exc:
                raise translate(exc, what) from exc

        return await asyncio.get_running_loop().run_in_executor(pool, job)

    async def read_tx(self, fn: Callable[..., T], *args: Any, what: str = "read") -> T:
        """Like :meth:`read` but inside one read transaction (several statements, one snapshot)."""

        def job(conn: sqlite3.Connection, *a: Any) -> T:
            conn.execute("BEGIN")
            try:
                return fn(conn, *a)
            finally:
                conn.execute("COMMIT")

        return await self.read(job, *args, what=what)

    async def on_writer(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the writer thread, outside any SQLite transaction."""
        pool = self._require(self._writer)
        return await asyncio.get_running_loop().run_in_executor(pool, lambda: fn(*args))

    def transaction_sync(self, fn: Callable[..., T], *args: Any, what: str = "write") -> T:
        """On the writer thread: run ``fn(conn, *args)`` in one ``BEGIN IMMEDIATE`` transaction."""
        if self.read_only:
            raise StorageError(
                "This Khora store was opened read_only=True; open it without read_only to write"
            )
        conn = self._wconn
        if conn is None:
            raise StorageError("The sqlite_lance store is not open: call `await stack.open()` first")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise translate(exc, what) from exc
        try:
            result = fn(conn, *args)
            conn.execute("COMMIT")
            return result
        except BaseException as exc:
            if conn.in_transaction:  # SQLite may already have rolled back (e.g. disk full)
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, what) from exc
            raise

    async def transaction(self, fn: Callable[..., T], *args: Any, what: str = "write") -> T:
        """Run ``fn(conn, *args)`` in one write transaction on the writer thread."""
        return await self.on_writer(lambda: self.transaction_sync(fn, *args, what=what))
