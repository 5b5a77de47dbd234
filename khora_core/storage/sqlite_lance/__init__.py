"""The embedded storage stack: SQLite (documents, FTS5 BM25, graph) + LanceDB (vectors).

It is what Khora uses when no database URL is configured; everything lives in one folder
(``StorageConfig.data_dir``). See ``stack.py``.
"""

from __future__ import annotations

from khora_core.storage.sqlite_lance.stack import SqliteLanceStack

__all__ = ["SqliteLanceStack"]
