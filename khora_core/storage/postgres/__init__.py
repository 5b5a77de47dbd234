"""The PostgreSQL + pgvector half of the ``postgres`` storage stack.

* ``pool.py``: ``open_pool`` (connect, check pgvector, migrate, pool) and ``PgPool``;
* ``documents.py``: ``PostgresDocumentStore`` (namespaces, documents, chunks, atomic writes);
* ``vectors.py``: ``PostgresVectorIndex`` (HNSW cosine search with filter pushdown);
* ``keywords.py``: ``PostgresKeywordIndex`` (BM25 in SQL) and the shared ``tokenize``;
* ``migrate.py``: forward-only schema migrations, ``migrate.migrate(dsn_or_pool, dim)`` and
  ``python -m khora_core.storage.postgres.migrate DSN --dim N`` (not re-exported here: the
  submodule's name would shadow the function);
* ``errors.py``: asyncpg errors -> Khora errors.

Typical wiring::

    docs = await PostgresDocumentStore.connect(config.storage, dim=embedder.dimension)
    vectors = PostgresVectorIndex(docs.pool)
    keywords = PostgresKeywordIndex(docs.pool)
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from khora_core.storage.postgres.documents import PostgresDocumentStore
    from khora_core.storage.postgres.keywords import PostgresKeywordIndex, term_frequencies, tokenize
    from khora_core.storage.postgres.pool import PgPool, open_pool
    from khora_core.storage.postgres.vectors import PostgresVectorIndex

# Lazy, so `python -m khora_core.storage.postgres.migrate` does not import its own module twice.
_WHERE = {
    "PgPool": "pool",
    "open_pool": "pool",
    "PostgresDocumentStore": "documents",
    "PostgresKeywordIndex": "keywords",
    "term_frequencies": "keywords",
    "tokenize": "keywords",
    "PostgresVectorIndex": "vectors",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)


__all__ = [
    "PgPool",
    "PostgresDocumentStore",
    "PostgresKeywordIndex",
    "PostgresVectorIndex",
    "open_pool",
    "term_frequencies",
    "tokenize",
]
