"""``LiteLLMEmbedder``: embeddings from any provider litellm supports (OpenAI, Cohere, ...).

Calls ``litellm.aembedding`` in batches with ``max_retries=0`` and retries with Khora's
single retry predicate (:mod:`khora_core.llm.retry`); vectors are L2-normalised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from khora_core.config import EmbeddingConfig
from khora_core.embedding._vectors import normalise_rows
from khora_core.errors import LLMError
from khora_core.llm.client import import_litellm
from khora_core.llm.retry import retry_async

__all__ = ["LiteLLMEmbedder"]

_PROBE_TEXT = "dimension probe"


class LiteLLMEmbedder:
    """Embeds text through ``litellm.aembedding``.

    Args:
        model: a litellm embedding model (``"openai/text-embedding-3-small"``).
        api_base: provider URL (for OpenAI-compatible servers).
        api_key: provider key.
        batch_size: texts per request.
        dimension: the vector size; when None it is learned from the first answer, or
            probed with :meth:`probe_dimension`.
        max_retries: retries after the first attempt, for transient failures.
        timeout_s: per-request timeout.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        batch_size: int = 64,
        dimension: int | None = None,
        max_retries: int = 2,
        timeout_s: float = 60.0,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.batch_size = max(1, int(batch_size))
        self.max_retries = max(0, int(max_retries))
        self.timeout_s = timeout_s
        self.name = f"litellm:{model}"
        self._dimension = dimension

    @classmethod
    def from_config(
        cls, config: EmbeddingConfig, *, api_base: str | None = None, api_key: str | None = None
    ) -> LiteLLMEmbedder:
        """Build from an ``EmbeddingConfig`` (provider ``litellm``)."""
        return cls(
            config.model,
            api_base=api_base,
            api_key=api_key,
            batch_size=config.batch_size,
            dimension=config.dimension,
        )

    @property
    def dimension(self) -> int:
        """Vector size. Unknown until set, learned, or probed: then one blocking probe call.

        Prefer ``await probe_dimension()`` (or ``EmbeddingConfig.dimension``) inside async code.
        """
        if self._dimension is None:
            litellm = import_litellm()
            try:
                response = litellm.embedding(**self._kwargs([_PROBE_TEXT]))
            except Exception as exc:
                raise LLMError(
                    f"Could not probe the dimension of {self.model!r} ({exc}). Set KHORA_EMBEDDING_DIMENSION."
                ) from exc
            self._dimension = len(_vectors_of(response)[0])
        return self._dimension

    @dimension.setter
    def dimension(self, value: int) -> None:
        self._dimension = int(value)

    async def probe_dimension(self) -> int:
        """Learn the vector size by embedding one short string (once)."""
        if self._dimension is None:
            await self.embed_query(_PROBE_TEXT)
        assert self._dimension is not None
        return self._dimension

    def _kwargs(self, batch: list[str]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "input": batch,
            "timeout": self.timeout_s,
            "max_retries": 0,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        return kwargs

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        litellm = import_litellm()
        kwargs = self._kwargs(batch)

        async def attempt() -> Any:
            return await litellm.aembedding(**kwargs)

        response = await retry_async(
            attempt, attempts=1 + self.max_retries, what=f"embedding call to {self.model}"
        )
        vectors = _vectors_of(response)
        if len(vectors) != len(batch):
            raise LLMError(f"{self.model} returned {len(vectors)} embeddings for {len(batch)} texts.")
        return normalise_rows(vectors)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages in batches; unit-length vectors in order. See ``Embedder``."""
        out: list[list[float]] = []
        items = list(texts)
        for start in range(0, len(items), self.batch_size):
            out.extend(await self._embed_batch(items[start : start + self.batch_size]))
        if out and self._dimension is None:
            self._dimension = len(out[0])
        return out

    async def embed_query(self, text: str) -> list[float]:
        """Embed one query. See ``Embedder``."""
        return (await self.embed_documents([text]))[0]


def _vectors_of(response: Any) -> list[list[float]]:
    """Vectors of a litellm ``EmbeddingResponse`` in input order (items may be dicts or objects)."""
    data = response["data"] if isinstance(response, dict) else response.data
    items = []
    for pos, item in enumerate(data):
        index = item.get("index", pos) if isinstance(item, dict) else getattr(item, "index", pos)
        vector = item["embedding"] if isinstance(item, dict) else item.embedding
        items.append((index if index is not None else pos, vector))
    items.sort(key=lambda pair: pair[0])
    return [list(v) for _, v in items]
