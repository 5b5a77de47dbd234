"""Every Python block in the README and ``docs/`` runs, on the embedded store.

The blocks of one page run in order in one namespace, like a notebook, in a fresh folder
with no database server, no LLM and the packaged local embedder. A block may ``await`` at
top level; ``kb`` (an open async ``Khora``) and ``ns_id`` (an empty namespace's id) are
defined for it. A block that needs a server or an API key is marked by the line
``<!-- docs-test: skip -->`` just before its opening fence; keep those few.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from pathlib import Path

import pytest

from khora_core import Khora

ROOT = Path(__file__).resolve().parents[2]
SKIP_MARKER = "<!-- docs-test: skip -->"
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
_SERVICE_ENV = (
    "KHORA_DATABASE_URL",
    "KHORA_NEO4J_URL",
    "KHORA_STORAGE_DATABASE_URL",
    "KHORA_STORAGE_NEO4J_URL",
    "KHORA_LLM_MODEL",
    "KHORA_CONFIG_FILE",
    "KHORA_PRESET",
)
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def python_blocks(page: str) -> list[tuple[int, str]]:
    """``(first line, code)`` for each Python block of ``page`` not marked to skip."""
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip().splitlines()
        if before and before[-1].strip() == SKIP_MARKER:
            continue
        blocks.append((text.count("\n", 0, match.start()) + 2, match.group(1)))
    return blocks


def test_the_readme_has_runnable_blocks() -> None:
    assert len(python_blocks("README.md")) >= 3


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)])
def test_page_blocks_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in _SERVICE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KHORA_DATA_DIR", str(tmp_path / ".khora"))
    loop = asyncio.new_event_loop()
    kb = Khora(data_dir=str(tmp_path / ".khora-page"))
    try:
        loop.run_until_complete(kb.open())
        ns_id = loop.run_until_complete(kb.create_namespace("docs")).namespace_id
        scope = {"__name__": "__main__", "kb": kb, "ns_id": ns_id}
        for line, code in python_blocks(page):
            compiled = compile(code, f"{page}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(compiled, scope)
            if inspect.iscoroutine(result):
                loop.run_until_complete(result)
    finally:
        loop.run_until_complete(kb.aclose())
        loop.close()
