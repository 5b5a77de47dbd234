"""Running statements on Neo4j: managed transactions, and one-statement reads in auto-commit
transactions retried like managed ones. Driver errors are translated here (``errors.py``).

A managed transaction (``execute_read``) costs a BEGIN and a COMMIT round trip around its
statements. For one statement, an auto-commit transaction reads the same with one round
trip. A failure the
driver calls retryable (a transient error, a lost connection) is retried up to
``_READ_ATTEMPTS`` times, as a managed transaction would; reads of several statements stay
in one managed transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import neo4j

from khora_core.storage.neo4j.errors import translated
from khora_core.storage.neo4j.search import records_of, rows_of

__all__ = ["Sessions"]

T = TypeVar("T")

#: Attempts of a one-statement read whose failure the driver calls retryable.
_READ_ATTEMPTS = 3
#: Pause before the second attempt (doubled before the third), in seconds.
_RETRY_PAUSE_S = 0.1


class Sessions:
    """Sessions on one database of an open driver (the caller owns and closes the driver)."""

    def __init__(self, driver: neo4j.AsyncDriver, database: str) -> None:
        self._driver = driver
        self._database = database

    async def read(self, work: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``work(tx, *args)`` in one managed read transaction."""
        async with translated(), self._driver.session(database=self._database) as session:
            return await session.execute_read(work, *args)

    async def write(self, work: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``work(tx, *args)`` in one managed write transaction."""
        async with translated(), self._driver.session(database=self._database) as session:
            return await session.execute_write(work, *args)

    async def statement(self, fetch: Callable[..., Awaitable[T]], query: str, params: dict[str, Any]) -> T:
        """``fetch(session, query, **params)`` in an auto-commit read transaction, retried
        while the driver calls the failure retryable (module docstring)."""
        async with translated():
            for attempt in range(1, _READ_ATTEMPTS + 1):
                try:
                    async with self._driver.session(
                        database=self._database, default_access_mode=neo4j.READ_ACCESS
                    ) as session:
                        return await fetch(session, query, **params)
                except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError) as exc:
                    if attempt == _READ_ATTEMPTS or not exc.is_retryable():
                        raise
                    await asyncio.sleep(_RETRY_PAUSE_S * attempt)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def fetch(self, query: str, **params: Any) -> list[dict[str, Any]]:
        """Every record of a statement that returns a record or a few (``search.records_of``)."""
        return await self.statement(records_of, query, params)

    async def fetch_rows(self, query: str, **params: Any) -> list[dict[str, Any]]:
        """The rows of a statement that returns them as one list (``search.rows_of``)."""
        return await self.statement(rows_of, query, params)
