"""Chunk vectors on disk: one LanceDB table per namespace.

A table per namespace keeps namespaces physically apart: deleting a namespace drops its
table, and no query can see another namespace's rows. Table names are a hash of the
namespace id, so user text never becomes a table name. Rows are ``(chunk_id,
document_id, write_id, vector)``; ``write_id`` tags the rows of one ``stack.write`` so a
failed write removes exactly what it added.

LanceDB is the durable copy. Searches run on an in-memory matrix loaded from it (see
``vectors.py``); every method here is blocking and runs on the store's writer or reader
threads.
"""

from __future__ import annotations

import hashlib
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from khora_core.errors import StorageError

#: Compact a namespace's table (merge small fragments, drop old versions) every N changes.
_COMPACT_EVERY = 256
#: Keep old table versions this long so a reader process mid-load never loses its files.
_KEEP_VERSIONS = timedelta(minutes=10)


def _quote(value: str) -> str:
    """A SQL string literal for a Lance predicate (ids are ours, but never trust them)."""
    return "'" + str(value).replace("'", "''") + "'"


class LanceVectors:
    """The LanceDB side of the embedded store."""

    def __init__(self, path: Path, *, dim: int) -> None:
        self.path = path
        self.dim = dim
        self._db: Any = None
        self._tables: dict[str, Any] = {}
        self._changes: dict[str, int] = {}
        self._lock = threading.Lock()

    def open(self) -> None:
        try:
            import lancedb
        except ImportError as exc:  # pragma: no cover - lancedb is a core dependency
            raise StorageError("The embedded store needs the 'lancedb' package: pip install lancedb") from exc
        self._db = lancedb.connect(str(self.path))

    def _reconnect(self) -> None:
        with self._lock:
            self.open()
            self._tables.clear()

    @staticmethod
    def table_name(namespace_id: str) -> str:
        return "ns_" + hashlib.sha256(namespace_id.encode()).hexdigest()[:40]

    def _schema(self) -> Any:
        import pyarrow as pa

        return pa.schema(
            [
                pa.field("chunk_id", pa.string(), nullable=False),
                pa.field("document_id", pa.string(), nullable=False),
                pa.field("write_id", pa.string(), nullable=False),
                pa.field("vector", pa.list_(pa.float32(), self.dim), nullable=False),
            ]
        )

    def _table(self, namespace_id: str, *, create: bool = False, fresh: bool = False) -> Any:
        name = self.table_name(namespace_id)
        with self._lock:
            table = None if fresh else self._tables.get(name)
            if table is None:
                try:
                    table = self._db.open_table(name)
                except ValueError:
                    if not create:
                        return None
                    table = self._db.create_table(name, schema=self._schema(), exist_ok=True)
                self._tables[name] = table
            return table

    def add(
        self, namespace_id: str, rows: list[tuple[str, str]], vectors: np.ndarray, write_id: str | list[str]
    ) -> None:
        """Append ``(chunk_id, document_id)`` rows with their vectors, tagged ``write_id``
        (one for all rows, or one per row)."""
        import pyarrow as pa

        if not rows:
            return
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel(), type=pa.float32())
        data = pa.Table.from_arrays(
            [
                pa.array([r[0] for r in rows], pa.string()),
                pa.array([r[1] for r in rows], pa.string()),
                pa.array([write_id] * len(rows) if isinstance(write_id, str) else write_id, pa.string()),
                pa.FixedSizeListArray.from_arrays(flat, self.dim),
            ],
            schema=self._schema(),
        )
        self._table(namespace_id, create=True).add(data)
        self._changed(namespace_id)

    def delete_write(self, namespace_id: str, write_id: str | list[str]) -> None:
        """Delete the rows tagged ``write_id`` (or any of a list of them)."""
        ids = [write_id] if isinstance(write_id, str) else list(write_id)
        table = self._table(namespace_id)
        if table is not None and ids:
            table.delete(f"write_id IN ({', '.join(_quote(i) for i in ids)})")
            self._changed(namespace_id)

    def load(self, namespace_id: str) -> tuple[list[str], np.ndarray]:
        """All ``(chunk_ids, vectors)`` of a namespace, read from the latest table version.

        Raises:
            StorageError: LanceDB could not read the table.
        """
        try:
            return self._load(namespace_id)
        except Exception as exc:
            raise StorageError(
                f"LanceDB could not read the vectors of namespace {namespace_id!r}: {exc}"
            ) from exc

    def _load(self, namespace_id: str) -> tuple[list[str], np.ndarray]:
        table = self._table(namespace_id, fresh=True)
        if table is None:
            return [], np.zeros((0, self.dim), dtype=np.float32)
        data = table.to_arrow().select(["chunk_id", "vector"])
        ids = data.column("chunk_id").to_pylist()
        vec = data.column("vector").combine_chunks()
        matrix = vec.values.to_numpy(zero_copy_only=False).reshape(len(ids), self.dim)
        return ids, matrix

    def chunk_ids(self, namespace_id: str) -> list[str]:
        table = self._table(namespace_id, fresh=True)
        if table is None:
            return []
        return table.to_arrow().column("chunk_id").to_pylist()

    def drop(self, namespace_id: str) -> None:
        name = self.table_name(namespace_id)
        with self._lock:
            self._tables.pop(name, None)
            self._changes.pop(name, None)
        self._db.drop_table(name, ignore_missing=True)

    def _changed(self, namespace_id: str) -> None:
        name = self.table_name(namespace_id)
        self._changes[name] = self._changes.get(name, 0) + 1
        if self._changes[name] >= _COMPACT_EVERY:
            self._changes[name] = 0
            table = self._table(namespace_id)
            if table is not None:
                # Each add/delete leaves a fragment or deletion file; merging them keeps loads fast.
                table.optimize(cleanup_older_than=_KEEP_VERSIONS)
            # A connection caches the metadata of every table version it has seen (about
            # 90 MB per 1,000 single-document appends, measured); a fresh one starts empty.
            self._reconnect()
