"""One open embedded store per data folder per process, shared by everything that opens it.

The embedded store lets one *process* write to a folder (``writer.lock``). Inside that
process, every ``Khora``, vector store, retriever or graph store built on the same folder
gets a ``SharedStack``: a lease on one open ``SqliteLanceStack``. The store opens with the
first lease and closes when the last lease is closed. A second process still gets the
store's typed ``StorageError`` from the writer lock.

Leases work from any event loop and thread: the embedded store runs its SQLite and LanceDB
work on its own threads, and the registry is guarded by a thread lock, so a ``KhoraSync``
(on the sync bridge's loop) and an async ``Khora`` (on the caller's loop) can share a
folder.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from khora_core.errors import ConfigError, StorageError
from khora_core.models import NamespaceStats, WriteBatch
from khora_core.storage.protocols import StorageStack

__all__ = ["SharedStack", "open_shared", "shared_folders"]


class _Entry:
    """One open (or opening, or closing) store and how many leases hold it."""

    def __init__(self) -> None:
        self.refs = 0
        self.opened: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.closed: concurrent.futures.Future[None] | None = None


_guard = threading.Lock()
_entries: dict[Path, _Entry] = {}


def shared_folders() -> dict[str, int]:
    """The folders with an open shared store in this process, with their lease counts."""
    with _guard:
        return {str(k): e.refs for k, e in _entries.items() if e.closed is None}


async def open_shared(root: Path, dim: int, factory: Callable[[], Any]) -> SharedStack:
    """A lease on the store for folder ``root``, opening it with ``factory()`` when needed.

    Args:
        root: the data folder (resolved to an absolute path as the registry key).
        dim: the embedding dimension the caller needs; it must match the open store's.
        factory: builds the (unopened) store when no lease holds the folder.

    Raises:
        ConfigError: the folder is open in this process with another embedding dimension
            (or the store's own ``open`` raised it).
        StorageError: another process has the folder open for writing.
    """
    key = await asyncio.to_thread(Path(root).resolve)
    while True:
        with _guard:
            entry = _entries.get(key)
            if entry is not None and entry.closed is not None:
                waiting: concurrent.futures.Future[None] | None = entry.closed
            else:
                waiting = None
                opener = entry is None
                if entry is None:
                    entry = _Entry()
                    _entries[key] = entry
                entry.refs += 1
        if waiting is None:
            break
        # The last lease is closing that store: open a fresh one once it has let go.
        await asyncio.wrap_future(waiting)
    if opener:
        try:
            stack = factory()
            await stack.open()
        except BaseException as exc:
            with _guard:
                if _entries.get(key) is entry:
                    del _entries[key]
            entry.opened.set_exception(exc)
            raise
        entry.opened.set_result(stack)
    else:
        try:
            stack = await asyncio.wrap_future(entry.opened)
        except BaseException:
            with _guard:
                entry.refs -= 1
            raise
    lease = SharedStack(key, entry, stack)
    if int(stack.dim) != int(dim):
        await lease.aclose()
        raise ConfigError(
            f"The Khora data folder {str(key)!r} is open in this process with {stack.dim}-dimension "
            f"embeddings, not {dim}: use the same embedder or another KHORA_DATA_DIR",
            setting="dim",
        )
    return lease


class SharedStack:
    """A lease on a shared embedded store: a ``StorageStack`` whose ``aclose`` lets go once.

    Every attribute other than ``aclose`` (``documents``, ``vectors``, ``keywords``,
    ``graph``, ``write``...) is the shared store's own. Closing the last lease closes the
    store; closing a lease twice does nothing the second time.
    """

    def __init__(self, key: Path, entry: _Entry, stack: StorageStack) -> None:
        self._key = key
        self._entry = entry
        self._stack = stack
        self._released = False
        self.name = stack.name
        self.documents = stack.documents
        self.vectors = stack.vectors
        self.keywords = stack.keywords
        self.graph = stack.graph

    @property
    def shared(self) -> StorageStack:
        """The store this lease holds."""
        return self._stack

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stack, name)

    async def open(self) -> None:
        """A lease is open from the moment ``open_shared`` returns it."""
        if self._released:
            raise StorageError("This lease on the shared Khora store was closed; open a new one")

    async def aclose(self) -> None:
        """Let go of the store; the last lease closes it (safe to call twice)."""
        with _guard:
            if self._released:
                return
            self._released = True
            self._entry.refs -= 1
            last = self._entry.refs == 0
            if last:
                self._entry.closed = concurrent.futures.Future()
        if not last:
            return
        try:
            await self._stack.aclose()
        finally:
            with _guard:
                if _entries.get(self._key) is self._entry:
                    del _entries[self._key]
            self._entry.closed.set_result(None)  # type: ignore[union-attr]

    async def write(self, namespace_id: str, batch: WriteBatch) -> None:
        """See ``StorageStack.write``."""
        await self._stack.write(namespace_id, batch)

    async def write_many(self, namespace_id: str, batches: Sequence[WriteBatch]) -> None:
        """See ``StorageStack.write_many``."""
        await self._stack.write_many(namespace_id, batches)

    async def delete_document(self, namespace_id: str, document_id: str) -> bool:
        """See ``StorageStack.delete_document``."""
        return await self._stack.delete_document(namespace_id, document_id)

    async def delete_namespace(self, namespace_id: str) -> bool:
        """See ``StorageStack.delete_namespace``."""
        return await self._stack.delete_namespace(namespace_id)

    async def stats(self, namespace_id: str) -> NamespaceStats:
        """See ``StorageStack.stats``."""
        return await self._stack.stats(namespace_id)
