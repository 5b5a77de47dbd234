"""LangChain integration: ``KhoraRetriever``, ``KhoraVectorStore``, filter translation and
agent memory tools.

Needs the ``langchain`` extra (``pip install 'khora-memory[langchain]'``)::

    from khora_core import KhoraSync
    from khora_integrations.langchain import KhoraRetriever

    kb = KhoraSync().open()
    retriever = KhoraRetriever(kb=kb, namespace="notes", k=5)
    docs = retriever.invoke("What did Ada work on?")
"""

from __future__ import annotations

try:
    import langchain_core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from khora_core.errors import MissingExtraError

    raise MissingExtraError("The LangChain integration", "langchain", "langchain-core") from exc

from khora_integrations.langchain.embeddings import KhoraEmbeddings
from khora_integrations.langchain.filters import pgvector_to_recall_filter, recall_filter_to_pgvector
from khora_integrations.langchain.retriever import ABSTENTION_EVENT, KhoraRetriever
from khora_integrations.langchain.self_query import KhoraTranslator
from khora_integrations.langchain.tools import (
    KhoraRecallTool,
    KhoraRememberTool,
    format_recall,
    khora_memory_tools,
)
from khora_integrations.langchain.vectorstore import KhoraVectorStore

__all__ = [
    "ABSTENTION_EVENT",
    "KhoraEmbeddings",
    "KhoraRecallTool",
    "KhoraRememberTool",
    "KhoraRetriever",
    "KhoraTranslator",
    "KhoraVectorStore",
    "format_recall",
    "khora_memory_tools",
    "pgvector_to_recall_filter",
    "recall_filter_to_pgvector",
]
