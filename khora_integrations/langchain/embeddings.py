"""``KhoraEmbeddings``: a Khora's own embedder seen as LangChain ``Embeddings``."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from khora_core import Khora, KhoraSync
from khora_integrations._bridge import KhoraRef

__all__ = ["KhoraEmbeddings"]


class KhoraEmbeddings(Embeddings):
    """A Khora's embedder as LangChain ``Embeddings``; vectors are L2-normalised.

    ``KhoraVectorStore.embeddings`` returns one when the store was not given an embedding.

    Args:
        kb: a ``Khora``, a ``KhoraSync`` or a ``KhoraRef`` (see ``KhoraRetriever`` on which
            to pick for sync and async use).
    """

    def __init__(self, kb: Khora | KhoraSync | KhoraRef) -> None:
        self._ref = kb if isinstance(kb, KhoraRef) else KhoraRef(kb)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages with the Khora's embedder."""
        return self._ref.call(lambda kb: kb.engine.embedder.embed_documents(list(texts)))

    def embed_query(self, text: str) -> list[float]:
        """Embed a query with the Khora's embedder."""
        return self._ref.call(lambda kb: kb.engine.embedder.embed_query(text))

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """See ``embed_documents``."""
        return await self._ref.acall(lambda kb: kb.engine.embedder.embed_documents(list(texts)))

    async def aembed_query(self, text: str) -> list[float]:
        """See ``embed_query``."""
        return await self._ref.acall(lambda kb: kb.engine.embedder.embed_query(text))
