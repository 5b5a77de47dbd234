"""LlamaIndex integration: ``KhoraRetriever``, ``KhoraVectorStore``, ``KhoraPropertyGraphStore``, filter
translation both ways, embeddings both ways and instrumentation events.

Needs the ``llamaindex`` extra (``pip install 'khora-memory[llamaindex]'``)::

    from khora_core import KhoraSync
    from khora_integrations.llama_index import KhoraRetriever

    kb = KhoraSync().open()
    retriever = KhoraRetriever(kb, namespace="notes", similarity_top_k=5)
    nodes = retriever.retrieve("What did Ada work on?")
"""

from __future__ import annotations

try:
    import llama_index.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from khora_core.errors import MissingExtraError

    raise MissingExtraError("The LlamaIndex integration", "llamaindex", "llama-index-core") from exc

from khora_integrations.llama_index.chat_store import KhoraChatStore
from khora_integrations.llama_index.embeddings import KhoraEmbedding, LlamaIndexEmbedder, as_khora_embedder
from khora_integrations.llama_index.events import KhoraAbstentionEvent
from khora_integrations.llama_index.filters import (
    metadata_filters_to_recall_filter,
    recall_filter_to_metadata_filters,
    to_recall_filter,
)
from khora_integrations.llama_index.graph_store import (
    KhoraPropertyGraphStore,
    ReadOnlyQueryError,
    UnsupportedGraphOperationError,
)
from khora_integrations.llama_index.memory import KhoraMemoryBlock
from khora_integrations.llama_index.retriever import KhoraRetriever
from khora_integrations.llama_index.vector_store import KhoraVectorStore

__all__ = [
    "KhoraAbstentionEvent",
    "KhoraChatStore",
    "KhoraEmbedding",
    "KhoraMemoryBlock",
    "KhoraPropertyGraphStore",
    "KhoraRetriever",
    "KhoraVectorStore",
    "LlamaIndexEmbedder",
    "ReadOnlyQueryError",
    "UnsupportedGraphOperationError",
    "as_khora_embedder",
    "metadata_filters_to_recall_filter",
    "recall_filter_to_metadata_filters",
    "to_recall_filter",
]
