"""Adapters that let a LangChain ``Embeddings`` or a LlamaIndex ``BaseEmbedding`` serve as
Khora's ``Embedder``.

Both call the framework's async methods, L2-normalise what comes back (Khora's vector
channels assume unit vectors), and learn the dimension from the first answer. When the
dimension is asked for before any call, they embed a probe string once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from khora_core.embedding._vectors import normalise_rows

__all__ = ["LangChainEmbedder", "LlamaIndexEmbedder"]

_PROBE_TEXT = "dimension probe"


def _model_label(obj: Any) -> str:
    for attr in ("model", "model_name", "model_id"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(obj).__name__


class _AdapterBase:
    name: str
    _dimension: int | None

    def _learn(self, vectors: list[list[float]]) -> list[list[float]]:
        if vectors and self._dimension is None:
            self._dimension = len(vectors[0])
        return vectors

    def _sync_probe(self) -> list[float]:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def dimension(self) -> int:
        """Vector size; the first access before any embedding runs one blocking probe.

        Prefer ``await probe_dimension()`` inside async code.
        """
        if self._dimension is None:
            self._dimension = len(self._sync_probe())
        return self._dimension

    @dimension.setter
    def dimension(self, value: int) -> None:
        self._dimension = int(value)

    async def probe_dimension(self) -> int:
        """Learn the vector size by embedding one short string (once)."""
        if self._dimension is None:
            await self.embed_query(_PROBE_TEXT)  # type: ignore[attr-defined]
        assert self._dimension is not None
        return self._dimension


class LangChainEmbedder(_AdapterBase):
    """Wraps any ``langchain_core.embeddings.Embeddings``.

    Args:
        embeddings: the LangChain embeddings object (uses ``aembed_documents`` / ``aembed_query``).
        name: the name recorded with stored vectors; ``"langchain:<model>"`` by default.
        dimension: the vector size, if known (skips the probe).
    """

    def __init__(self, embeddings: Any, *, name: str | None = None, dimension: int | None = None) -> None:
        self.embeddings = embeddings
        self.name = name or f"langchain:{_model_label(embeddings)}"
        self._dimension = dimension

    def _sync_probe(self) -> list[float]:
        return list(self.embeddings.embed_query(_PROBE_TEXT))

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """See ``Embedder.embed_documents``."""
        if not texts:
            return []
        return self._learn(normalise_rows(await self.embeddings.aembed_documents(list(texts))))

    async def embed_query(self, text: str) -> list[float]:
        """See ``Embedder.embed_query``."""
        return self._learn(normalise_rows([await self.embeddings.aembed_query(text)]))[0]


class LlamaIndexEmbedder(_AdapterBase):
    """Wraps any ``llama_index.core.base.embeddings.base.BaseEmbedding``.

    Args:
        embed_model: the LlamaIndex embedding (uses ``aget_text_embedding_batch`` /
            ``aget_query_embedding``).
        name: the name recorded with stored vectors; ``"llama_index:<model>"`` by default.
        dimension: the vector size, if known (skips the probe).
    """

    def __init__(self, embed_model: Any, *, name: str | None = None, dimension: int | None = None) -> None:
        self.embed_model = embed_model
        self.name = name or f"llama_index:{_model_label(embed_model)}"
        self._dimension = dimension

    def _sync_probe(self) -> list[float]:
        return list(self.embed_model.get_query_embedding(_PROBE_TEXT))

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """See ``Embedder.embed_documents``."""
        if not texts:
            return []
        return self._learn(normalise_rows(await self.embed_model.aget_text_embedding_batch(list(texts))))

    async def embed_query(self, text: str) -> list[float]:
        """See ``Embedder.embed_query``."""
        return self._learn(normalise_rows([await self.embed_model.aget_query_embedding(text)]))[0]
