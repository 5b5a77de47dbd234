"""Forward-only schema migrations for the PostgreSQL store.

Migrations are the ordered files ``khora_core/storage/migrations/postgres/NNNN_name.sql``.
``migrate`` applies the pending ones in one transaction under an advisory lock (two
processes opening the same database at once apply them once), records each in
``khora_schema_version`` and never drops data: every file is additive and idempotent.

The filter compiler's SQL functions (``POSTGRES_SUPPORT_DDL``, all ``CREATE OR REPLACE``)
enter through migration 2 and are re-applied by later runs whenever that DDL changes. One
data step runs in the same transaction: BM25 terms stored before they were Porter-stemmed
move to their stems, once (``bm25_terms`` in ``khora_settings``).

Files are templates: ``{{dim}}`` is the embedding dimension, fixed at the first migration
and recorded in ``khora_settings``; a later open with another dimension raises
``ConfigError``. ``{{hnsw_m}}`` and ``{{hnsw_ef_construction}}`` come from
``StorageConfig``.

Command line::

    python -m khora_core.storage.postgres.migrate postgresql://khora:PW@127.0.0.1:5432/khora --dim 384
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from khora_core.errors import ConfigError
from khora_core.storage.postgres.errors import DSN_SETTING, connect, translate_query_error

__all__ = ["MIGRATIONS_DIR", "Migration", "load_migrations", "migrate", "render", "schema_version"]

MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "migrations" / "postgres"
#: pg_advisory_xact_lock key: the bytes of "khora_db".
LOCK_KEY = int.from_bytes(b"khora_db", "big")
#: HNSW indexes need pgvector 0.5; iterative index scans 0.8.
MIN_PGVECTOR = (0, 5, 0)

_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")

_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS khora_schema_version (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS khora_settings (
    key    text PRIMARY KEY,
    value  text NOT NULL
);
"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    template: str


def _filters_support_ddl() -> str:
    from khora_core.filters.sql_postgres import POSTGRES_SUPPORT_DDL

    return POSTGRES_SUPPORT_DDL


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The migration files in ``directory``, ordered by version."""
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        m = _FILE_RE.match(path.name)
        if not m:
            raise ConfigError(f"Unexpected migration file name {path.name!r} (want NNNN_name.sql)")
        version = int(m.group(1))
        if version in found:
            raise ConfigError(f"Two migrations share version {version}: {found[version].name}, {m.group(2)}")
        found[version] = Migration(version, m.group(2), path.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]


def render(template: str, params: dict[str, int | str]) -> str:
    """Fill ``{{name}}`` placeholders; an unknown placeholder is an error."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in params:
            raise ConfigError(f"Migration placeholder {{{{{key}}}}} has no value")
        return str(params[key])

    return _PLACEHOLDER_RE.sub(sub, template)


def _positive_int(name: str, value: int) -> int:
    # These values become SQL text (DDL takes no parameters), so only plain ints pass.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}", setting=name)
    return value


async def _ensure_pgvector(conn: asyncpg.Connection) -> str:
    """Create the ``vector`` extension when missing; return its version."""
    version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    if version is None:
        available = await conn.fetchval("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        db = await conn.fetchval("SELECT current_database()")
        if not available:
            raise ConfigError(
                "The pgvector extension is not installed on the PostgreSQL server "
                f"({DSN_SETTING}). Install pgvector (https://github.com/pgvector/pgvector) on the "
                "server, or use an image that ships it (pgvector/pgvector:pg17)",
                setting=DSN_SETTING,
            )
        try:
            async with conn.transaction():  # a savepoint: keep the outer transaction usable
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except asyncpg.exceptions.InsufficientPrivilegeError as exc:
            raise ConfigError(
                f"The database {db!r} lacks the pgvector extension and the user in {DSN_SETTING} "
                f"may not create it. Run as a superuser: psql -d {db} -c 'CREATE EXTENSION vector'",
                setting=DSN_SETTING,
            ) from exc
        version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    parts = tuple(int(p) for p in re.findall(r"\d+", str(version))[:3])
    if parts < MIN_PGVECTOR:
        raise ConfigError(
            f"pgvector {version} is too old (Khora needs 0.5 or newer for HNSW): run ALTER EXTENSION vector UPDATE",
            setting=DSN_SETTING,
        )
    return str(version)


async def _check_dim(conn: asyncpg.Connection, dim: int | None) -> int:
    recorded = await conn.fetchval("SELECT value FROM khora_settings WHERE key = 'embedding_dim'")
    if recorded is None:
        if dim is None:
            raise ConfigError("A new Khora database needs the embedding dimension (--dim)", setting="dim")
        await conn.execute("INSERT INTO khora_settings (key, value) VALUES ('embedding_dim', $1)", str(dim))
        return dim
    if dim is not None and int(recorded) != dim:
        raise ConfigError(
            f"This PostgreSQL database holds {recorded}-dimension embeddings but the embedder makes "
            f"{dim}-dimension ones. Use the embedding model the database was built with "
            f"(KHORA_EMBEDDING_MODEL) or another database ({DSN_SETTING})",
            setting="KHORA_EMBEDDING_MODEL",
        )
    return int(recorded)


async def _migrate_conn(
    conn: asyncpg.Connection, dim: int | None, hnsw_m: int, hnsw_ef_construction: int
) -> tuple[list[int], int]:
    applied_now: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
        await _ensure_pgvector(conn)
        await conn.execute(_BOOTSTRAP)
        dim = await _check_dim(conn, dim)
        done = {r["version"] for r in await conn.fetch("SELECT version FROM khora_schema_version")}
        support_ddl = _filters_support_ddl()
        params: dict[str, int | str] = {
            "dim": dim,
            "hnsw_m": hnsw_m,
            "hnsw_ef_construction": hnsw_ef_construction,
            "filters_support_ddl": support_ddl,
        }
        for mig in load_migrations():
            if mig.version in done:
                continue
            await conn.execute(render(mig.template, params))
            await conn.execute(
                "INSERT INTO khora_schema_version (version, name) VALUES ($1, $2)", mig.version, mig.name
            )
            applied_now.append(mig.version)
        await _refresh_support_ddl(conn, support_ddl)
        await _stem_terms(conn)
    return applied_now, dim


#: ``khora_settings`` key recording that the BM25 terms are Porter stems.
TERMS_KEY = "bm25_terms"
_RESTEM = """
CREATE TEMP TABLE khora_restem ON COMMIT DROP AS
SELECT t.namespace_id, m.stemmed AS term, t.chunk_id, sum(t.tf)::int AS tf,
       max(t.chunk_terms) AS chunk_terms
FROM khora_terms t JOIN unnest($1::text[], $2::text[]) AS m(term, stemmed) ON t.term = m.term
GROUP BY 1, 2, 3
"""


async def _stem_terms(conn: asyncpg.Connection) -> None:
    """Once per database: replace BM25 terms stored before stemming by their Porter stems.

    The stored terms are exactly the unstemmed tokens of each chunk, so each term's
    postings move to its stem (merging with the postings already there) and every chunk's
    ``term_count`` stays as it is; no text is read again.
    """
    if await conn.fetchval("SELECT value FROM khora_settings WHERE key = $1", TERMS_KEY) == "porter":
        return
    from khora_core.storage.porter import stem

    vocabulary = [r["term"] for r in await conn.fetch("SELECT DISTINCT term FROM khora_terms")]
    changed = [(t, stem(t)) for t in vocabulary if stem(t) != t]
    if changed:
        old, new = [t for t, _ in changed], [s for _, s in changed]
        await conn.execute(_RESTEM, old, new)
        await conn.execute(
            "DELETE FROM khora_terms t USING unnest($1::text[]) AS m(term) WHERE t.term = m.term", old
        )
        await conn.execute(
            "INSERT INTO khora_terms (namespace_id, term, chunk_id, tf, chunk_terms) "
            "SELECT namespace_id, term, chunk_id, tf, chunk_terms FROM khora_restem "
            "ON CONFLICT (namespace_id, term, chunk_id) DO UPDATE SET tf = khora_terms.tf + EXCLUDED.tf"
        )
    await conn.execute(
        "INSERT INTO khora_settings (key, value) VALUES ($1, 'porter') ON CONFLICT (key) DO UPDATE SET value = 'porter'",
        TERMS_KEY,
    )


async def _refresh_support_ddl(conn: asyncpg.Connection, ddl: str) -> None:
    """Re-apply the filter support functions when the compiler's DDL changed since last time."""
    digest = hashlib.sha256(ddl.encode()).hexdigest()
    key = "filters_support_ddl_sha256"
    if await conn.fetchval("SELECT value FROM khora_settings WHERE key = $1", key) == digest:
        return
    await conn.execute(ddl)
    await conn.execute(
        "INSERT INTO khora_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = $2",
        key,
        digest,
    )


async def migrate(
    target: str | asyncpg.Connection | asyncpg.Pool,
    dim: int | None = None,
    *,
    hnsw_m: int = 16,
    hnsw_ef_construction: int = 128,
    connect_timeout_s: float = 5.0,
) -> list[int]:
    """Bring the schema up to date; return the versions applied by this call.

    Args:
        target: a ``postgresql://`` URL, an open connection or a pool.
        dim: the embedding dimension; required on an empty database, checked otherwise
            (None skips the check).
        hnsw_m: HNSW ``m`` for the chunk vector index (used when it is created).
        hnsw_ef_construction: HNSW ``ef_construction`` (used when it is created).
        connect_timeout_s: connection timeout when ``target`` is a URL.

    Raises:
        ConfigError: pgvector missing or not creatable, or a dimension mismatch.
        StorageUnavailableError: the server cannot be reached.
        StorageError: a migration failed (nothing of this call is kept).
    """
    if dim is not None:
        _positive_int("dim", dim)
    _positive_int("hnsw_m", hnsw_m)
    _positive_int("hnsw_ef_construction", hnsw_ef_construction)
    try:
        if isinstance(target, str):
            conn = await connect(target, timeout=connect_timeout_s)
            try:
                return (await _migrate_conn(conn, dim, hnsw_m, hnsw_ef_construction))[0]
            finally:
                await conn.close()
        if isinstance(target, asyncpg.Pool):
            async with target.acquire() as conn:
                return (await _migrate_conn(conn, dim, hnsw_m, hnsw_ef_construction))[0]
        return (await _migrate_conn(target, dim, hnsw_m, hnsw_ef_construction))[0]
    except Exception as exc:
        translated = translate_query_error(exc)
        if translated is exc:
            raise
        raise translated from exc


async def schema_version(conn: asyncpg.Connection) -> tuple[int, int | None]:
    """``(highest applied version, recorded embedding dimension)``; ``(0, None)`` when empty."""
    exists = await conn.fetchval("SELECT to_regclass('khora_schema_version') IS NOT NULL")
    if not exists:
        return 0, None
    version = await conn.fetchval("SELECT coalesce(max(version), 0) FROM khora_schema_version")
    dim = await conn.fetchval("SELECT value FROM khora_settings WHERE key = 'embedding_dim'")
    return int(version), int(dim) if dim is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m khora_core.storage.postgres.migrate",
        description="Apply Khora's PostgreSQL migrations.",
    )
    parser.add_argument("dsn", help="postgresql://user:password@host:port/database")
    parser.add_argument(
        "--dim", type=int, default=None, help="embedding dimension (required on a new database)"
    )
    parser.add_argument("--hnsw-m", type=int, default=16)
    parser.add_argument("--hnsw-ef-construction", type=int, default=128)
    args = parser.parse_args(argv)
    try:
        applied = asyncio.run(
            migrate(args.dsn, args.dim, hnsw_m=args.hnsw_m, hnsw_ef_construction=args.hnsw_ef_construction)
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"applied: {', '.join(map(str, applied))}" if applied else "schema is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
