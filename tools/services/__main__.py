"""Start PostgreSQL + pgvector and Neo4j on loopback, run a command, stop them.

    python -m tools.services run [--state DIR] -- CMD ARGS...   # what `make test` uses
    python -m tools.services start [--state DIR]                # prints `export ...` lines
    python -m tools.services stop [--state DIR]

`run` exports KHORA_DATABASE_URL, KHORA_NEO4J_URL, KHORA_STORAGE_NEO4J_USER,
KHORA_STORAGE_NEO4J_PASSWORD and KHORA_SERVICES_DIR (the servers' folder, where
`benchmarks.scale` measures Neo4j's disk) to the command, and always stops both servers
afterwards.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.services import neo4j, postgres


def _start(state: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    t0 = time.monotonic()
    env.update(postgres.start(state / "postgres", fsync=False))
    t1 = time.monotonic()
    env.update(neo4j.start(state / "neo4j"))
    t2 = time.monotonic()
    env["KHORA_SERVICES_DIR"] = str(state.resolve())
    print(
        f"[services] PostgreSQL ready in {t1 - t0:.1f}s, Neo4j ready in {t2 - t1:.1f}s",
        file=sys.stderr,
        flush=True,
    )
    return env


def _stop(state: Path) -> None:
    for name, svc in (("neo4j", neo4j), ("postgres", postgres)):
        try:
            svc.stop(state / name)
        except Exception as exc:  # stopping is best effort; report and go on
            print(f"[services] stopping {name} failed: {exc}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.services")
    parser.add_argument("action", choices=["run", "start", "stop"])
    parser.add_argument("--state", type=Path, default=None, help="folder for server data and pid files")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.action != "run" and args.command:
        # "start --state DIR": the trailing command slot swallowed the option; only run takes one.
        if len(args.command) != 2 or args.command[0] != "--state":
            parser.error(f"{args.action} takes only --state DIR")
        args.state = Path(args.command[1])
    state = args.state or Path(
        os.environ.get("KHORA_SERVICES_DIR") or tempfile.mkdtemp(prefix="khora-services-")
    )
    state.mkdir(parents=True, exist_ok=True)
    if args.action == "stop":
        _stop(state)
        return 0
    if args.action == "start":
        env = _start(state)
        for k, v in env.items():
            print(f"export {k}={shlex.quote(v)}")
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("run needs a command after --")
    try:
        env = _start(state)
        return subprocess.call(command, env={**os.environ, **env})
    finally:
        _stop(state)


if __name__ == "__main__":
    sys.exit(main())
