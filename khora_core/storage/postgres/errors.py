"""asyncpg errors -> Khora errors, at the PostgreSQL backend boundary.

Two moments differ:

* connecting (``connect``): an unreachable server is ``StorageUnavailableError``; a wrong
  password, role or database is ``ConfigError``; both name ``KHORA_DATABASE_URL``;
* querying (``translate_query_error``): a lost connection is ``StorageUnavailableError``
  (the pool reconnects on the next call); anything else the server rejects is
  ``StorageError``.

Messages never include the password: URLs pass through ``redact`` first.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from khora_core.errors import ConfigError, KhoraError, StorageError, StorageUnavailableError

__all__ = [
    "DSN_SETTING",
    "connect",
    "is_connection_lost",
    "redact",
    "translate_connect_error",
    "translate_query_error",
]

DSN_SETTING = "KHORA_DATABASE_URL"

# Errors that mean "the server or the connection is gone", not "the query is wrong".
_LOST = (
    asyncpg.exceptions.PostgresConnectionError,  # 08xxx: connection failure / does not exist
    asyncpg.exceptions.AdminShutdownError,  # 57P01: server shut down (fast stop, restart)
    asyncpg.exceptions.CrashShutdownError,  # 57P02: another backend crashed
    asyncpg.exceptions.CannotConnectNowError,  # 57P03: server starting up or shutting down
    ConnectionError,  # refused / reset by the OS
    asyncio.TimeoutError,
    TimeoutError,
)
_BAD_CREDENTIALS = (
    asyncpg.exceptions.InvalidAuthorizationSpecificationError,  # 28xxx: bad password, role, pg_hba
    asyncpg.exceptions.InvalidCatalogNameError,  # 3D000: database does not exist
    asyncpg.exceptions.ClientConfigurationError,  # malformed URL or options
)


def redact(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***``."""
    try:
        parts = urlsplit(dsn)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return dsn
    netloc = parts.netloc.rsplit("@", 1)
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[-1]}"))


def is_connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` means the connection or server went away (safe to retry a read)."""
    if isinstance(exc, _LOST):
        return True
    if isinstance(exc, asyncpg.exceptions.InternalClientError):
        # The protocol state machine of a connection whose backend was killed mid-use.
        return True
    if isinstance(exc, asyncpg.InterfaceError):
        text = str(exc).lower()
        return "connection" in text and ("closed" in text or "lost" in text)
    return isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError | PermissionError)


def translate_connect_error(exc: BaseException, dsn: str) -> KhoraError:
    """The Khora error for a failed connection attempt to ``dsn``."""
    where = redact(dsn)
    if isinstance(exc, KhoraError):
        return exc
    if isinstance(exc, asyncpg.exceptions.InvalidPasswordError):
        return ConfigError(
            f"PostgreSQL rejected the password in {DSN_SETTING} ({where}): fix the password in the URL",
            setting=DSN_SETTING,
        )
    if isinstance(exc, _BAD_CREDENTIALS):
        return ConfigError(
            f"PostgreSQL refused {DSN_SETTING} ({where}): {exc}. Fix the user, database or options in the URL",
            setting=DSN_SETTING,
        )
    if isinstance(exc, ValueError):  # urllib / asyncpg DSN parsing
        return ConfigError(
            f"{DSN_SETTING} is not a valid postgresql:// URL ({where}): {exc}", setting=DSN_SETTING
        )
    if is_connection_lost(exc) or isinstance(exc, OSError):
        reason = (
            "timed out"
            if isinstance(exc, asyncio.TimeoutError | TimeoutError)
            else str(exc) or type(exc).__name__
        )
        return StorageUnavailableError(
            f"Cannot reach PostgreSQL at {where} ({reason}). Start the server or fix {DSN_SETTING}",
            setting=DSN_SETTING,
        )
    return StorageError(f"Connecting to PostgreSQL at {where} failed: {exc}")


def translate_query_error(exc: BaseException) -> BaseException:
    """The Khora error for a failed query; non-database exceptions come back unchanged."""
    if isinstance(exc, KhoraError):
        return exc
    if is_connection_lost(exc):
        return StorageUnavailableError(
            f"Lost the connection to PostgreSQL ({type(exc).__name__}: {exc}); the next call reconnects. "
            f"Check that the server in {DSN_SETTING} is running",
            setting=DSN_SETTING,
        )
    if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError):
        return StorageError(f"PostgreSQL query failed: {type(exc).__name__}: {exc}")
    return exc


async def connect(dsn: str, *, timeout: float) -> asyncpg.Connection:
    """One plain connection (no codecs), failing typed and within about ``timeout`` seconds.

    Raises:
        StorageUnavailableError: the server is unreachable or timed out.
        ConfigError: bad credentials, database name or URL.
    """
    try:
        # asyncpg's own timeout covers the TCP connect and the handshake; the outer
        # wait_for is a guard against a server that accepts and then stalls.
        return await asyncio.wait_for(asyncpg.connect(dsn, timeout=timeout), timeout + 1.0)
    except Exception as exc:
        raise translate_connect_error(exc, dsn) from exc
