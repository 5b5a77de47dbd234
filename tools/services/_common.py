"""Helpers both service launchers share: loopback ports and the JSON state file."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

STATE_FILE = "khora.json"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    """True when a server could bind ``port`` on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # Like the servers themselves: a port whose old connections sit in TIME_WAIT is usable.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def read_state(state_dir: Path) -> dict[str, Any]:
    path = state_dir / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def write_state(state_dir: Path, state: dict[str, Any]) -> None:
    """Write the state (it holds a password: owner-only)."""
    path = state_dir / STATE_FILE
    path.write_text(json.dumps(state, indent=2))
    path.chmod(0o600)
