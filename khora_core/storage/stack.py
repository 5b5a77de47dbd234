"""Which backends make a stack, chosen from ``StorageConfig``.

* no ``database_url``: the embedded ``sqlite_lance`` stack in ``data_dir``, shared by every
  opener in the process (see ``storage/shared.py``): a lease on one open store per folder;
* ``postgresql://...``: PostgreSQL + pgvector for documents, vectors and BM25, with Neo4j
  (``neo4j_url``) for the graph.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from khora_core.config import StorageConfig
from khora_core.errors import ConfigError
from khora_core.storage.protocols import StorageStack

__all__ = ["open_stack"]


async def open_stack(config: StorageConfig, *, dim: int) -> StorageStack:
    """Build and open the stack ``config`` names.

    The embedded store is opened once per folder per process: a second caller on the same
    ``data_dir`` gets a lease on the open store, and it closes when the last lease does.

    Raises:
        ConfigError: a bad URL or a missing setting (the message names it), or an embedded
            folder open in this process with another embedding dimension.
        StorageUnavailableError: a server cannot be reached.
        StorageError: another process has the embedded folder open for writing.
    """
    url = config.database_url
    if not url:
        from khora_core.storage.shared import open_shared
        from khora_core.storage.sqlite_lance.stack import SqliteLanceStack

        return await open_shared(Path(config.data_dir), dim, lambda: SqliteLanceStack(config, dim=dim))
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("postgresql", "postgres"):
        raise ConfigError(
            f"KHORA_DATABASE_URL must be a postgresql:// URL (got scheme {scheme or 'none'!r}); "
            "leave it unset for the embedded store",
            setting="KHORA_DATABASE_URL",
        )
    if not config.neo4j_url:
        raise ConfigError(
            "The PostgreSQL stack needs Neo4j for the graph: set KHORA_NEO4J_URL "
            "(for example bolt://127.0.0.1:7687) and KHORA_STORAGE_NEO4J_PASSWORD",
            setting="KHORA_NEO4J_URL",
        )
    from khora_core.storage.postgres.stack import PostgresNeo4jStack

    stack: StorageStack = PostgresNeo4jStack(config, dim=dim)
    await stack.open()
    return stack
