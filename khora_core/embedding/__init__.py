"""Embedders: local sentence-transformers (default), litellm, and LangChain / LlamaIndex adapters.

Heavy dependencies (sentence-transformers, litellm, the frameworks) load on first use.
"""

from __future__ import annotations

from khora_core.embedding.adapters import LangChainEmbedder, LlamaIndexEmbedder
from khora_core.embedding.base import Embedder
from khora_core.embedding.factory import build_embedder, ensure_dimension
from khora_core.embedding.litellm import LiteLLMEmbedder
from khora_core.embedding.local import SentenceTransformerEmbedder, default_model_path

__all__ = [
    "Embedder",
    "LangChainEmbedder",
    "LiteLLMEmbedder",
    "LlamaIndexEmbedder",
    "SentenceTransformerEmbedder",
    "build_embedder",
    "default_model_path",
    "ensure_dimension",
]
