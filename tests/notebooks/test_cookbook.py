"""Execute every cookbook notebook top to bottom, as a user would (no API key, no network).

Notebooks run on the embedded store in a fresh data dir; the one that moves to PostgreSQL +
Neo4j reads ``KHORA_DATABASE_URL`` / ``KHORA_NEO4J_URL`` (set by ``make test``).
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

COOKBOOK = Path(__file__).resolve().parents[2] / "cookbook"
NOTEBOOKS = sorted(COOKBOOK.glob("*.ipynb"))

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


def test_cookbook_is_not_empty() -> None:
    assert len(NOTEBOOKS) >= 7, f"expected the seven cookbook notebooks, found {[p.name for p in NOTEBOOKS]}"


def test_notebooks_are_committed_without_outputs() -> None:
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        dirty = [
            i
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count"))
        ]
        assert not dirty, f"{path.name}: clear outputs before committing (cells {dirty})"


def _kernel_env(path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """Server settings for the notebook that moves to PostgreSQL + Neo4j (the session's servers)."""
    if "postgres" not in path.stem:
        return {}
    dsn = request.getfixturevalue("postgres_dsn")
    neo = request.getfixturevalue("neo4j_settings")
    return {
        "KHORA_DATABASE_URL": dsn,
        "KHORA_NEO4J_URL": neo["uri"],
        "KHORA_STORAGE_NEO4J_USER": neo["user"],
        "KHORA_STORAGE_NEO4J_PASSWORD": neo["password"],
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    nb = nbformat.read(path, as_version=4)
    # The kernel inherits this process's environment when it starts.
    env = {"KHORA_DATA_DIR": str(tmp_path / "data"), **_kernel_env(path, request)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        )
        client.execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    # Every code cell ran and none raised (nbclient raises CellExecutionError otherwise).
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code_cells)
