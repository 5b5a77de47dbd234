"""Bringing PostgreSQL to steady reads after a large write: ``VACUUM (ANALYZE)`` on Khora's tables.

After a bulk load the planner's statistics describe the tables as they were before it
(empty, for a new database), and autovacuum notices the new rows only at its next round
(``autovacuum_naptime``, a minute by default), then analyzes and vacuums them in the
background while recalls run. The first reads of each new row also set its hint bits,
writing pages that a read would otherwise leave clean. ``VACUUM (ANALYZE)`` does all of
it at once, in the foreground: statistics for the loaded rows, the visibility map (so
index-only scans skip the heap) and hint bits, leaving autovacuum nothing to start during
the first minutes of serving.

VACUUM cannot run inside a transaction block, so it runs on a pooled connection outside
one. It takes no lock that blocks reads or writes (``SHARE UPDATE EXCLUSIVE``).
"""

from __future__ import annotations

import functools
import time
from typing import Any

from khora_core.errors import InvalidInputError
from khora_core.storage.postgres.pool import PgPool

__all__ = ["SETTLED_TABLES", "settle", "unanalyzed_tables"]

#: The tables a ``remember_batch`` writes, largest first. Fixed names, never user text.
SETTLED_TABLES = ("khora_terms", "khora_chunks", "khora_documents", "khora_namespaces")


async def settle(pool: PgPool, *, tables: tuple[str, ...] = SETTLED_TABLES) -> dict[str, Any]:
    """``VACUUM (ANALYZE)`` each of ``tables`` (module doc).

    Returns:
        ``{"postgres_vacuum_analyze_s": seconds}``.

    Raises:
        StorageUnavailableError: the server is unreachable.
        StorageError: the statement failed (for example, the role does not own the tables).
    """
    unknown = [t for t in tables if t not in SETTLED_TABLES]
    if unknown:
        raise InvalidInputError(f"not a Khora table: {unknown}")
    t0 = time.perf_counter()
    for table in tables:
        await pool.read(functools.partial(_vacuum_analyze, table=table))
    return {"postgres_vacuum_analyze_s": round(time.perf_counter() - t0, 3)}


async def _vacuum_analyze(conn: Any, *, table: str) -> None:
    await conn.execute(f"VACUUM (ANALYZE) {table}")


async def unanalyzed_tables(pool: PgPool, *, tables: tuple[str, ...] = SETTLED_TABLES) -> list[str]:
    """Khora's tables that autovacuum would analyze now: rows changed since the last
    ANALYZE above its threshold (``autovacuum_analyze_threshold`` +
    ``autovacuum_analyze_scale_factor`` x rows, the server's settings)."""
    rows = await pool.fetch(
        """
        SELECT s.relname, s.n_mod_since_analyze AS changed
        FROM pg_stat_user_tables s
        WHERE s.relname = ANY($1::text[])
          AND s.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8
              + current_setting('autovacuum_analyze_scale_factor')::float8 * s.n_live_tup
        ORDER BY s.relname
        """,
        list(tables),
    )
    return [f"{r['relname']} ({r['changed']} rows changed since its last ANALYZE)" for r in rows]
