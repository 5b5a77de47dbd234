"""Index keys computed in Cypher, and the step that adds one to a graph written without it.

A key joins stored strings, each after its length (``<len>:<text>``), so that one part can
never run into the next: the key of entity ``e`` in namespace ``ns`` is a prefix of no key of
entity ``e9``, nor of any key in namespace ``ns9``. Keys are built in Cypher from stored
values only, in the write, the backfill and the read, so the three always agree.
"""

from __future__ import annotations

import neo4j

__all__ = ["backfill_statement", "backfill_then_index", "length_prefixed"]


def length_prefixed(*parts: str) -> str:
    """Cypher for the parts (Cypher expressions: variable or parameter names, never user
    text), each after its length and a colon, joined."""
    return " + ".join(f"toString(size({p})) + ':' + {p}" for p in parts)


def backfill_statement(pattern: str, missing: str, carried: str, assignments: str) -> str:
    """One pass over the edges of ``pattern`` for which ``missing`` holds, setting
    ``assignments`` (with the ``carried`` variables in scope), committed every 10,000 edges:
    an auto-commit statement, since ``CALL ... IN TRANSACTIONS`` cannot run in a managed
    transaction. The arguments are Cypher of this package's own, never user text."""
    return (
        f"MATCH {pattern}\nWHERE {missing}\n"
        f"CALL {{\n  WITH {carried}\n  SET {assignments}\n}} IN TRANSACTIONS OF 10000 ROWS"
    )


async def backfill_then_index(driver: neo4j.AsyncDriver, *, database: str, index: str, backfill: str) -> None:
    """Run ``backfill`` (an auto-commit statement that keys every edge still without its
    key), then create ``index``, unless the index exists.

    The index's presence means every edge has its key: a store created by this version only
    creates the index; one written before the key existed is backfilled first, once (if
    interrupted, the next open finishes it). ``index`` is the full ``CREATE INDEX ... IF NOT
    EXISTS`` statement; its name is read from it.
    """
    name = index.split()[2]
    records, _, _ = await driver.execute_query(
        "SHOW INDEXES YIELD name WHERE name = $name RETURN count(*) AS n", {"name": name}, database_=database
    )
    if records and records[0]["n"]:
        return
    async with driver.session(database=database) as session:
        result = await session.run(backfill)
        await result.consume()
    await driver.execute_query(index, database_=database)
