"""The LangChain integration's public surface and its missing-extra error."""

from __future__ import annotations

import subprocess
import sys

from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool
from langchain_core.vectorstores import VectorStore

import khora_integrations
import khora_integrations.langchain as lc


def test_all_names_exist_and_are_the_public_classes():
    assert sorted(lc.__all__) == lc.__all__
    for name in lc.__all__:
        assert getattr(lc, name) is not None, name
    assert issubclass(lc.KhoraRetriever, BaseRetriever)
    assert issubclass(lc.KhoraVectorStore, VectorStore)
    assert issubclass(lc.KhoraRememberTool, BaseTool)
    assert issubclass(lc.KhoraRecallTool, BaseTool)
    assert khora_integrations.__all__ == []


def test_missing_langchain_core_names_the_extra():
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "from khora_core.errors import MissingExtraError\n"
        "try:\n"
        "    import khora_integrations.langchain\n"
        "except MissingExtraError as exc:\n"
        "    print(exc.extra, exc.package, isinstance(exc, ImportError))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["langchain", "langchain-core", "True"]
