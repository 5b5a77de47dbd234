"""``build_embedder``: turn a config or a user's embedding object into an ``Embedder``."""

from __future__ import annotations

import inspect
import sys
from typing import Any

from khora_core.config import EmbeddingConfig
from khora_core.embedding.adapters import LangChainEmbedder, LlamaIndexEmbedder
from khora_core.embedding.base import Embedder
from khora_core.errors import ConfigError

__all__ = ["build_embedder", "ensure_dimension"]


def _is_instance_of_loaded(obj: Any, module: str, cls_name: str) -> bool:
    """isinstance against a framework class without importing the framework.

    If ``obj`` is an instance of the class, its module is necessarily loaded already.
    """
    mod = sys.modules.get(module)
    cls = getattr(mod, cls_name, None) if mod is not None else None
    return isinstance(cls, type) and isinstance(obj, cls)


def _is_khora_embedder(obj: Any) -> bool:
    # Checked structurally (static lookup) so a lazy ``dimension`` property is not triggered.
    return (
        inspect.iscoroutinefunction(getattr(obj, "embed_documents", None))
        and inspect.iscoroutinefunction(getattr(obj, "embed_query", None))
        and isinstance(getattr(obj, "name", None), str)
        and inspect.getattr_static(obj, "dimension", None) is not None
    )


def build_embedder(config: EmbeddingConfig | None = None, embedder: object | None = None) -> Embedder:
    """Return the embedder Khora should use.

    Args:
        config: the embedding section; the default local model when None.
        embedder: optional user object: a Khora ``Embedder``, a LangChain ``Embeddings`` or a
            LlamaIndex ``BaseEmbedding``. It wins over ``config``.

    Returns:
        An ``Embedder``.

    Raises:
        ConfigError: ``embedder`` is none of the supported kinds.
    """
    if embedder is not None:
        if _is_instance_of_loaded(embedder, "langchain_core.embeddings", "Embeddings"):
            return LangChainEmbedder(embedder)
        if _is_instance_of_loaded(embedder, "llama_index.core.base.embeddings.base", "BaseEmbedding"):
            return LlamaIndexEmbedder(embedder)
        if _is_khora_embedder(embedder):
            return embedder  # type: ignore[return-value]
        # Duck typing for framework look-alikes that do not subclass the base classes.
        if callable(getattr(embedder, "aembed_documents", None)) and callable(
            getattr(embedder, "aembed_query", None)
        ):
            return LangChainEmbedder(embedder)
        if callable(getattr(embedder, "aget_text_embedding_batch", None)) and callable(
            getattr(embedder, "aget_query_embedding", None)
        ):
            return LlamaIndexEmbedder(embedder)
        raise ConfigError(
            f"Unsupported embedder {type(embedder).__name__}: pass a Khora Embedder, a LangChain "
            "Embeddings or a LlamaIndex BaseEmbedding.",
            setting="embedder",
        )
    config = config or EmbeddingConfig()
    if config.provider == "litellm":
        from khora_core.embedding.litellm import LiteLLMEmbedder

        return LiteLLMEmbedder.from_config(config)
    from khora_core.embedding.local import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder.from_config(config)


async def ensure_dimension(embedder: Embedder) -> int:
    """The embedder's dimension, probing it asynchronously when the embedder supports that.

    Call this at engine start-up (the storage stack needs the size for its vector columns)
    so no blocking probe happens inside the event loop.
    """
    probe = getattr(embedder, "probe_dimension", None)
    if callable(probe):
        return int(await probe())
    return int(embedder.dimension)
