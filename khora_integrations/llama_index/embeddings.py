"""Embeddings across the LlamaIndex boundary, both ways.

* A LlamaIndex ``BaseEmbedding`` as Khora's embedder: pass it straight to
  ``Khora(embedder=...)`` (it is wrapped in ``khora_core.embedding.LlamaIndexEmbedder``,
  re-exported here), or wrap it yourself with ``as_khora_embedder``.
* Khora's embedder as a LlamaIndex ``BaseEmbedding``: ``KhoraEmbedding``. Give it to a
  ``PropertyGraphIndex`` / ``VectorContextRetriever`` on a ``KhoraPropertyGraphStore`` so
  their query vectors live in the same space as the entity vectors Khora stores.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from khora_core import Khora, KhoraSync
from khora_core.embedding.adapters import LlamaIndexEmbedder
from khora_core.embedding.base import Embedder
from khora_core.sync import run_sync

__all__ = ["KhoraEmbedding", "LlamaIndexEmbedder", "as_khora_embedder"]


class KhoraEmbedding(BaseEmbedding):
    """A Khora ``Embedder`` (unit vectors) as a LlamaIndex ``BaseEmbedding``.

    Async methods await the embedder; sync ones run it through ``khora_core.sync.run_sync``.

    Args:
        embedder: any Khora ``Embedder`` (e.g. ``kb.engine.embedder`` of an open Khora).
        **kwargs: ``BaseEmbedding`` fields (``embed_batch_size``, ``callback_manager``...).
    """

    _embedder: Any = PrivateAttr()

    def __init__(self, embedder: Embedder, **kwargs: Any) -> None:
        kwargs.setdefault("model_name", getattr(embedder, "name", type(embedder).__name__))
        super().__init__(**kwargs)
        self._embedder = embedder

    @classmethod
    def from_khora(cls, kb: Khora | KhoraSync, **kwargs: Any) -> KhoraEmbedding:
        """The embedder of an open ``Khora``/``KhoraSync``.

        Raises:
            ConfigError: ``kb`` is not open yet.
        """
        aio = kb.aio if isinstance(kb, KhoraSync) else kb
        return cls(aio.engine.embedder, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "KhoraEmbedding"

    @property
    def embedder(self) -> Embedder:
        """The wrapped Khora embedder."""
        return self._embedder

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return list(await self._embedder.embed_query(query))

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return list((await self._embedder.embed_documents([text]))[0])

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [list(v) for v in await self._embedder.embed_documents(list(texts))]

    def _get_query_embedding(self, query: str) -> list[float]:
        return run_sync(self._aget_query_embedding(query))

    def _get_text_embedding(self, text: str) -> list[float]:
        return run_sync(self._aget_text_embedding(text))

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return run_sync(self._aget_text_embeddings(texts))


def as_khora_embedder(embed_model: BaseEmbedding, *, dimension: int | None = None) -> Embedder:
    """A LlamaIndex ``BaseEmbedding`` as a Khora ``Embedder`` (for ``Khora(embedder=...)``).

    A ``KhoraEmbedding`` gives back the Khora embedder it wraps rather than a second layer.

    Args:
        embed_model: the LlamaIndex embedding.
        dimension: its vector size when known (skips a probe call).
    """
    if isinstance(embed_model, KhoraEmbedding):
        return embed_model.embedder
    return LlamaIndexEmbedder(embed_model, dimension=dimension)
