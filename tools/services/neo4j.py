"""A real Neo4j 5 Community server for tests and development, from ``tools/neo4j``.

The official server assembly is not on Maven Central, so ``tools/neo4j`` is a small Java
launcher around the embedded ``DatabaseManagementService`` with its Bolt connector on
``127.0.0.1:PORT`` and password auth for user ``neo4j``. This module builds it with Maven
(once; again only when its sources change), starts it in the background and stops it::

    python -m tools.services.neo4j start .khora-services/neo4j   # prints KHORA_NEO4J_URL=... lines
    python -m tools.services.neo4j stop  .khora-services/neo4j

Layout of ``STATE_DIR``: ``home/`` (Neo4j's data, transaction logs and logs),
``neo4j.pid``, ``khora.json`` (port and password, mode 0600) and ``neo4j.log`` (the
launcher's output). Heap and page cache default to 1g / 512m; override them with
``KHORA_NEO4J_HEAP`` and ``KHORA_NEO4J_PAGECACHE``. The heap is reserved whole at start
(``-Xms`` = ``-Xmx``). ``KHORA_NEO4J_JAVA_OPTS`` adds JVM options (split on whitespace),
e.g. ``-XX:TieredStopAtLevel=1`` to compare compilers (``docs/operations.md``). Give the
page cache at least the size of the store files (``home/data/databases/neo4j``), so that
reads after a bulk load do not go to disk. A start waits up to 120 s for Bolt
(``KHORA_NEO4J_START_TIMEOUT``); it takes 15-40 s on two busy cores.

Only the standard library is used, so this runs before the project's dependencies are
importable. Needs ``java`` 17 or 21 (``JAVA_HOME`` or ``PATH``) and ``mvn`` for the build.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.services._common import free_port as _free_port
from tools.services._common import port_free as _port_free
from tools.services._common import read_state as _read_state
from tools.services._common import write_state as _write_state

__all__ = ["DEFAULT_PASSWORD", "USER", "build", "jar_path", "start", "status", "stop"]

USER = "neo4j"
DEFAULT_PASSWORD = "khora-test-pw"
READY_MARK = "KHORA_NEO4J_READY"

PROJECT_DIR = Path(__file__).resolve().parents[1] / "neo4j"
_PID_FILE = "neo4j.pid"
_LOG_FILE = "neo4j.log"
_START_TIMEOUT = 120.0
_STOP_TIMEOUT = 30.0

# Our own children, kept so they are reaped (a zombie still answers ``kill(pid, 0)``).
_children: dict[int, subprocess.Popen[bytes]] = {}


def jar_path() -> Path:
    """The launcher jar ``build()`` produces (its dependencies sit in ``target/lib``)."""
    return PROJECT_DIR / "target" / "khora-neo4j.jar"


def _newest_source_mtime() -> float:
    paths = [PROJECT_DIR / "pom.xml", *(p for p in (PROJECT_DIR / "src").rglob("*") if p.is_file())]
    return max(p.stat().st_mtime for p in paths)


def _is_built() -> bool:
    jar, lib = jar_path(), PROJECT_DIR / "target" / "lib"
    if not jar.exists() or not lib.is_dir() or not any(lib.glob("neo4j-*.jar")):
        return False
    return jar.stat().st_mtime >= _newest_source_mtime()


@contextlib.contextmanager
def _build_lock() -> Any:
    """Serialise builds across processes (parallel test sessions share ``target/``)."""
    digest = hashlib.sha256(str(PROJECT_DIR).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"khora-neo4j-build-{digest}.lock"
    with open(path, "w") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no lock, builds are rare anyway
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(*, force: bool = False, timeout: float = 900) -> Path:
    """Build the launcher with ``mvn -q -B package`` when the jar is missing or stale.

    Args:
        force: rebuild even when the jar is newer than its sources.
        timeout: seconds allowed for Maven (the first build downloads ~125 MB into ~/.m2).

    Returns:
        The path of the jar.

    Raises:
        RuntimeError: Maven is missing or the build failed (the message holds its output).
    """
    with _build_lock():
        if not force and _is_built():
            return jar_path()
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("Maven (mvn) is not on PATH; it is needed once to build tools/neo4j")
        proc = subprocess.run(
            [mvn, "-q", "-B", "package"],
            cwd=PROJECT_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0 or not jar_path().exists():
            raise RuntimeError(
                f"building tools/neo4j failed (exit {proc.returncode}):\n{proc.stdout[-6000:]}"
            )
        jar_path().touch()  # an up-to-date jar must look newer than its sources
        return jar_path()


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise RuntimeError("java (17 or 21) is not on PATH and JAVA_HOME is not set; Neo4j 5 needs it")
    return found


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    child = _children.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is dead for our purposes
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return "Z" not in line.split()[1]
    return True


def _is_launcher(pid: int) -> bool:
    """Guard against a recycled pid: is ``pid`` our Java launcher (where /proc can tell)?"""
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():
        return True  # no /proc (macOS): trust the pid file
    with contextlib.suppress(OSError):
        return b"khora-neo4j" in cmdline.read_bytes()
    return False


def _read_pid(state_dir: Path) -> int | None:
    path = state_dir / _PID_FILE
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) and _is_launcher(pid) else None


def _env(port: int, password: str) -> dict[str, str]:
    return {
        "KHORA_NEO4J_URL": f"bolt://127.0.0.1:{port}",
        "KHORA_STORAGE_NEO4J_USER": USER,
        "KHORA_STORAGE_NEO4J_PASSWORD": password,
    }


def _log_tail(log: Path, size: int = 4000) -> str:
    return log.read_text(errors="replace")[-size:] if log.exists() else ""


def _launch(state_dir: Path, port: int, password: str, parent_pid: int | None) -> subprocess.Popen[bytes]:
    heap = os.environ.get("KHORA_NEO4J_HEAP", "1g")
    cmd = [
        _java(),
        f"-Xmx{heap}",
        # The whole heap from the start, as Neo4j's operations manual advises: a heap that
        # grows under a bulk load resizes and collects during the first reads after it.
        f"-Xms{heap}",
        "-XX:+UseG1GC",
        "-XX:ParallelGCThreads=2",
        "-XX:+ExitOnOutOfMemoryError",
        "-XX:-OmitStackTraceInFastThrow",
        "-Djdk.nio.maxCachedBufferSize=1024",
        "-Dio.netty.tryReflectionSetAccessible=true",
        "-Dlog4j2.disable.jmx=true",
        *os.environ.get("KHORA_NEO4J_JAVA_OPTS", "").split(),
        "-jar",
        str(jar_path()),
        "--home",
        str(state_dir / "home"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if parent_pid is not None:
        cmd += ["--parent-pid", str(parent_pid)]
    env = {**os.environ, "KHORA_NEO4J_PASSWORD": password}  # never on argv: `ps` shows argv
    with open(state_dir / _LOG_FILE, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=state_dir,
            start_new_session=True,  # a Ctrl-C in the terminal must not kill it mid-write
        )
    _children[proc.pid] = proc
    (state_dir / _PID_FILE).write_text(f"{proc.pid}\n")
    return proc


def _wait_ready(proc: subprocess.Popen[bytes], state_dir: Path, port: int, timeout: float) -> str:
    """Wait for the READY line and a TCP answer; return the version the launcher printed."""
    log = state_dir / _LOG_FILE
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"Neo4j exited with code {proc.returncode} before it was ready:\n{_log_tail(log)}"
            )
        text = log.read_text(errors="replace") if log.exists() else ""
        for line in text.splitlines():
            if line.startswith(READY_MARK) and _answers(port):
                return line.rpartition("version=")[2].strip()
        time.sleep(0.2)
    raise TimeoutError(f"Neo4j was not ready on port {port} within {timeout:.0f}s:\n{_log_tail(log)}")


def start(
    state_dir: Path,
    port: int | None = None,
    password: str = DEFAULT_PASSWORD,
    *,
    watch_parent: bool = False,
    timeout: float | None = None,
) -> dict[str, str]:
    """Start the Neo4j server kept in ``state_dir`` (building the launcher when needed).

    A server already running from ``state_dir`` with the same password is reused.

    Args:
        state_dir: folder for the data and the pid/state/log files; created when missing.
        port: Bolt port on 127.0.0.1. None reuses the last start's port when it is free,
            else picks a free one.
        password: the password of user ``neo4j`` (at least 8 characters).
        watch_parent: stop the server when this Python process dies (test sessions).
        timeout: seconds to wait for Bolt to accept connections (default
            ``KHORA_NEO4J_START_TIMEOUT`` or 120).

    Returns:
        ``KHORA_NEO4J_URL`` (``bolt://127.0.0.1:PORT``), ``KHORA_STORAGE_NEO4J_USER`` and
        ``KHORA_STORAGE_NEO4J_PASSWORD``.

    Raises:
        RuntimeError: the build failed or the server exited (the message holds its log).
        TimeoutError: the server did not become ready within ``timeout``.
    """
    if len(password) < 8:
        raise ValueError("the Neo4j password needs at least 8 characters")
    if timeout is None:
        timeout = float(os.environ.get("KHORA_NEO4J_START_TIMEOUT") or _START_TIMEOUT)
    state_dir = Path(state_dir).expanduser().resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    state = _read_state(state_dir)
    running = _read_pid(state_dir)
    if running is not None:
        if (
            state.get("password") == password
            and isinstance(state.get("port"), int)
            and _answers(state["port"])
        ):
            return _env(state["port"], password)
        stop(state_dir)

    build()
    chosen = port
    if chosen is None:
        old = state.get("port")
        chosen = old if isinstance(old, int) and _port_free(old) else _free_port()
    attempts = 1 if port is not None else 3
    for attempt in range(attempts):
        proc = _launch(state_dir, chosen, password, os.getpid() if watch_parent else None)
        try:
            version = _wait_ready(proc, state_dir, chosen, timeout)
        except RuntimeError:
            # Another process may have taken the free port we picked: pick again.
            bind_race = "address already in use" in _log_tail(state_dir / _LOG_FILE).lower()
            stop(state_dir)
            if bind_race and attempt + 1 < attempts:
                chosen = _free_port()
                continue
            raise
        except BaseException:
            stop(state_dir)
            raise
        _write_state(state_dir, {"port": chosen, "password": password, "pid": proc.pid, "version": version})
        return _env(chosen, password)
    raise AssertionError("unreachable")  # pragma: no cover


def stop(state_dir: Path, *, timeout: float = _STOP_TIMEOUT) -> None:
    """Stop the server of ``state_dir``: SIGTERM (clean shutdown), then SIGKILL after ``timeout``.

    A no-op when it is not running.
    """
    state_dir = Path(state_dir).expanduser().resolve()
    pid = _read_pid(state_dir)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)
        child = _children.pop(pid, None)
        if child is not None:
            child.wait()
    with contextlib.suppress(FileNotFoundError):
        (state_dir / _PID_FILE).unlink()


def status(state_dir: Path) -> dict[str, str] | None:
    """The connection settings of the running server in ``state_dir``, or None."""
    state_dir = Path(state_dir).expanduser().resolve()
    state = _read_state(state_dir)
    if _read_pid(state_dir) is None or not isinstance(state.get("port"), int) or not _answers(state["port"]):
        return None
    return _env(state["port"], state["password"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.services.neo4j", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("action", choices=["start", "stop", "status", "build"])
    parser.add_argument("state_dir", type=Path, nargs="?")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument(
        "--password", default=os.environ.get("KHORA_STORAGE_NEO4J_PASSWORD") or DEFAULT_PASSWORD
    )
    args = parser.parse_args(argv)
    if args.action == "build":
        t0 = time.monotonic()
        print(build(force=True))
        print(f"# built in {time.monotonic() - t0:.1f}s", file=sys.stderr)
        return 0
    if args.state_dir is None:
        parser.error(f"{args.action} needs STATE_DIR")
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
        env = start(args.state_dir, args.port, args.password)
        version = _read_state(Path(args.state_dir).expanduser().resolve()).get("version", "?")
        print(f"# Neo4j {version} started in {time.monotonic() - t0:.1f}s", file=sys.stderr)
    for key, value in env.items():
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
