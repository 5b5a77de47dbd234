"""Bringing Neo4j to steady reads after a large write: indexes online, statistics fresh, plans replanned.

After a bulk load three things make the first reads slow or uneven:

* an index created or rebuilt over existing data is ``POPULATING`` until a background job
  has read every node; queries that would use it fall back to scans meanwhile
  (``db.awaitIndexes`` waits for them);
* index samples (the selectivity the planner uses) are refreshed only when a background
  job notices that enough of an index changed (``db.resampleOutdatedIndexes`` asks for
  them now; the call returns once they are sampled);
* Cypher plans cached while the graph was small were chosen for a small graph, and are
  replaced only when the statistics have moved far enough and a minimum interval has
  passed (``db.clearQueryCaches`` drops them, so the next call of each query is planned
  against the loaded graph).

``settle`` does the three, each bounded in time; ``pending_indexes`` reads what is not
online yet (for a readiness check). A user without the rights for a procedure (an
administrator can restrict them) gets the step skipped and named in the report rather
than an error: settling is an optimisation, never a condition for correctness.

One more kind of work follows a start or a bulk load and no procedure shortcuts it: the JVM
compiles Neo4j's code paths as queries make them hot, for minutes, at a share of a core that
recall then lacks on a small machine. ``jvm_compilation`` reads how long the JVM has compiled
so far (JMX, ``dbms.queryJmx``), so that a warm-up can run until the compiling dies down.
"""

from __future__ import annotations

import time
from typing import Any, NoReturn

import neo4j

from khora_core.storage.neo4j.errors import translate_error, translated

__all__ = ["jvm_compilation", "pending_indexes", "settle"]

_COMPILATION = """
CALL dbms.queryJmx('java.lang:type=Compilation') YIELD attributes AS compilation
CALL dbms.queryJmx('java.lang:type=Runtime') YIELD attributes AS runtime
RETURN compilation.TotalCompilationTime.value AS ms, runtime.Uptime.value AS uptime
"""


def _reraise(exc: Exception) -> NoReturn:
    """Raise ``exc`` as the Khora error it maps to (itself when it maps to nothing)."""
    mapped = translate_error(exc)
    if mapped is exc:
        raise exc
    raise mapped from exc


async def pending_indexes(driver: neo4j.AsyncDriver, *, database: str) -> list[str]:
    """Names of indexes that are not ``ONLINE`` yet, with their state and population percent."""
    async with translated():
        records, _, _ = await driver.execute_query(
            "SHOW INDEXES YIELD name, state, populationPercent WHERE state <> 'ONLINE' "
            "RETURN name, state, populationPercent",
            database_=database,
            routing_=neo4j.RoutingControl.READ,
        )
    return [f"{r['name']} ({r['state']}, {r['populationPercent']:.0f}%)" for r in records]


async def jvm_compilation(driver: neo4j.AsyncDriver, *, database: str) -> tuple[float, float] | None:
    """(milliseconds the server's JVM has spent compiling, milliseconds since it started),
    from JMX (``TotalCompilationTime``, summed over its compiler threads, and ``Uptime``);
    None when the server does not say (the procedure restricted or absent, a JVM without the
    counters). Never raises for that: it is a measurement, not a condition.

    Raises:
        StorageUnavailableError: the server is unreachable.
    """
    try:
        records, _, _ = await driver.execute_query(
            _COMPILATION, database_=database, routing_=neo4j.RoutingControl.READ
        )
    except neo4j.exceptions.ClientError:
        return None  # no such procedure, or not allowed to this user
    except Exception as exc:
        _reraise(exc)
    if not records:
        return None
    ms, uptime = records[0]["ms"], records[0]["uptime"]
    if not all(isinstance(v, (int, float)) and v >= 0 for v in (ms, uptime)):
        return None
    return float(ms), float(uptime)


async def settle(driver: neo4j.AsyncDriver, *, database: str, timeout_s: float = 300.0) -> dict[str, Any]:
    """Wait for indexes, refresh outdated index samples and drop cached plans (module doc).

    Returns:
        Seconds per step (``neo4j_await_indexes_s``, ``neo4j_resample_s``,
        ``neo4j_clear_plans_s``) and, under ``neo4j_skipped``, the steps the server refused.

    Raises:
        StorageUnavailableError: the server is unreachable.
        StorageError: an index failed to come online within ``timeout_s``.
    """
    report: dict[str, Any] = {}
    skipped: list[str] = []
    steps: tuple[tuple[str, str, dict[str, Any]], ...] = (
        ("neo4j_await_indexes_s", "CALL db.awaitIndexes($timeout)", {"timeout": int(max(1, timeout_s))}),
        ("neo4j_resample_s", "CALL db.resampleOutdatedIndexes()", {}),
        ("neo4j_clear_plans_s", "CALL db.clearQueryCaches()", {}),
    )
    for key, statement, params in steps:
        t0 = time.perf_counter()
        try:
            await driver.execute_query(statement, params, database_=database)
        except neo4j.exceptions.ClientError as exc:
            if key != "neo4j_await_indexes_s" and "Security" in (exc.code or ""):
                skipped.append(statement)  # restricted by an administrator: not ours to force
                continue
            _reraise(exc)
        except Exception as exc:
            _reraise(exc)
        report[key] = round(time.perf_counter() - t0, 3)
    if skipped:
        report["neo4j_skipped"] = skipped
    return report
