"""neo4j driver errors -> Khora errors, at the Neo4j backend boundary, and ``open_driver``.

* the server or the connection is gone (``ServiceUnavailable``, ``SessionExpired``, a
  database that is not available): ``StorageUnavailableError`` naming ``KHORA_NEO4J_URL``;
  the driver reconnects on the next call;
* a wrong user or password (``AuthError``): ``ConfigError`` naming
  ``KHORA_STORAGE_NEO4J_PASSWORD``; an unknown database: ``ConfigError`` naming
  ``KHORA_STORAGE_NEO4J_DATABASE``; a malformed URL: ``ConfigError`` naming ``KHORA_NEO4J_URL``;
* anything else the server rejects: ``StorageError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import neo4j
from neo4j import exceptions as nx

from khora_core.errors import ConfigError, KhoraError, StorageError, StorageUnavailableError

__all__ = [
    "DATABASE_SETTING",
    "PASSWORD_SETTING",
    "URL_SETTING",
    "USER_SETTING",
    "open_driver",
    "split_credentials",
    "translate_error",
    "translated",
]

URL_SETTING = "KHORA_NEO4J_URL"
USER_SETTING = "KHORA_STORAGE_NEO4J_USER"
PASSWORD_SETTING = "KHORA_STORAGE_NEO4J_PASSWORD"
DATABASE_SETTING = "KHORA_STORAGE_NEO4J_DATABASE"

# Errors that mean "the server or the connection is gone", not "the query is wrong".
_LOST = (
    nx.ServiceUnavailable,  # refused, reset, DNS, server stopped
    nx.SessionExpired,  # the connection died inside a session
    nx.DatabaseUnavailable,  # the database is starting or stopping
    nx.ConnectionAcquisitionTimeoutError,  # the pool could not hand out a connection in time
    nx.IncompleteCommit,  # the connection dropped during COMMIT
    ConnectionError,
    asyncio.TimeoutError,
    TimeoutError,
)


def translate_error(exc: BaseException) -> BaseException:
    """The Khora error for a neo4j driver failure; other exceptions come back unchanged."""
    if isinstance(exc, KhoraError):
        return exc
    if isinstance(exc, _LOST):
        return StorageUnavailableError(
            f"Cannot reach Neo4j ({type(exc).__name__}: {exc}); the next call reconnects. "
            f"Start the server or fix {URL_SETTING}",
            setting=URL_SETTING,
        )
    if isinstance(exc, nx.AuthError | nx.AuthConfigurationError | nx.TokenExpired):
        return ConfigError(
            f"Neo4j rejected the credentials ({exc}): set {PASSWORD_SETTING} (and {USER_SETTING}) "
            "to the password of the Neo4j user",
            setting=PASSWORD_SETTING,
        )
    if isinstance(exc, nx.Forbidden):
        return ConfigError(
            f"The Neo4j user in {USER_SETTING} may not do this ({exc}); grant it read/write access",
            setting=USER_SETTING,
        )
    code = getattr(exc, "code", None) or ""
    if code == "Neo.ClientError.Database.DatabaseNotFound":
        return ConfigError(
            f"Neo4j has no such database ({exc}); create it or fix {DATABASE_SETTING}",
            setting=DATABASE_SETTING,
        )
    if isinstance(exc, nx.ConfigurationError):
        return ConfigError(f"Bad Neo4j driver settings ({exc}); check {URL_SETTING}", setting=URL_SETTING)
    if isinstance(exc, nx.Neo4jError | nx.DriverError):
        return StorageError(f"Neo4j query failed: {type(exc).__name__}: {exc}")
    return exc


@asynccontextmanager
async def translated() -> AsyncIterator[None]:
    """Re-raise driver errors from the block as Khora errors (``raise ... from exc``)."""
    try:
        yield
    except Exception as exc:
        mapped = translate_error(exc)
        if mapped is exc:
            raise
        raise mapped from exc


def split_credentials(uri: str) -> tuple[str, str | None, str | None]:
    """``bolt://user:pw@host:port`` -> (``bolt://host:port``, user, pw); the driver refuses userinfo."""
    try:
        parts = urlsplit(uri)
    except ValueError as exc:
        raise ConfigError(f"{URL_SETTING} is not a valid Neo4j URL: {exc}", setting=URL_SETTING) from exc
    if "@" not in parts.netloc:
        return uri, None, None
    host = parts.netloc.rsplit("@", 1)[1]
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return urlunsplit(parts._replace(netloc=host)), user, password


async def open_driver(
    uri: str,
    user: str,
    password: str | None,
    *,
    database: str = "neo4j",
    timeout: float = 5.0,
    **config: Any,
) -> neo4j.AsyncDriver:
    """Create a ``neo4j.AsyncDriver`` and check that it can reach ``database`` with these credentials.

    Managed transactions retry transient failures for at most ``max(timeout, 5)`` seconds,
    so a stopped server surfaces as ``StorageUnavailableError`` instead of hanging 30 s.

    Credentials written into the URL (``bolt://neo4j:pw@host:7687``) win over ``user`` and
    ``password``: they are the more specific of the two.

    Args:
        uri: ``bolt://`` or ``neo4j://`` URL (``KHORA_NEO4J_URL``).
        user: the Neo4j user (``KHORA_STORAGE_NEO4J_USER``).
        password: its password (``KHORA_STORAGE_NEO4J_PASSWORD``).
        database: the database the graph lives in.
        timeout: seconds for the TCP connect and for acquiring a pooled connection.
        **config: extra driver settings, passed through.

    Raises:
        ConfigError: a malformed URL, missing/wrong credentials or an unknown database.
        StorageUnavailableError: the server cannot be reached.
    """
    uri, url_user, url_password = split_credentials(uri)
    user = url_user or user
    password = url_password or password
    if not password:
        raise ConfigError(
            f"Neo4j needs a password: set {PASSWORD_SETTING} (the user is {user!r})", setting=PASSWORD_SETTING
        )
    settings: dict[str, Any] = {
        "connection_timeout": timeout,
        "connection_acquisition_timeout": max(timeout * 2, 10.0),
        "max_transaction_retry_time": max(timeout, 5.0),
        # Schema statements are idempotent (IF NOT EXISTS); their notices are noise.
        "notifications_min_severity": "OFF",
        **config,
    }
    try:
        driver = neo4j.AsyncGraphDatabase.driver(uri, auth=(user, password), **settings)
    except (ValueError, nx.ConfigurationError) as exc:
        raise ConfigError(
            f"{URL_SETTING} is not a valid Neo4j URL ({uri!r}): {exc}", setting=URL_SETTING
        ) from exc
    try:
        async with translated():
            # A query, not verify_connectivity(): it also proves that ``database`` exists. An
            # auto-commit run is not retried, so an unreachable server fails within ``timeout``.
            async with driver.session(database=database) as session:
                await (await session.run("RETURN 1")).consume()
    except BaseException:
        await driver.close()
        raise
    return driver
