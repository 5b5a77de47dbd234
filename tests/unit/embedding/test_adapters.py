from __future__ import annotations

import numpy as np
import pytest

from khora_core.config import EmbeddingConfig
from khora_core.embedding import (
    Embedder,
    LangChainEmbedder,
    LiteLLMEmbedder,
    LlamaIndexEmbedder,
    SentenceTransformerEmbedder,
    build_embedder,
    ensure_dimension,
)
from khora_core.errors import ConfigError


async def test_langchain_embeddings_are_wrapped_and_normalised() -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    wrapped = build_embedder(None, DeterministicFakeEmbedding(size=12))
    assert isinstance(wrapped, LangChainEmbedder) and isinstance(wrapped, Embedder)
    assert wrapped.name.startswith("langchain:")
    vectors = await wrapped.embed_documents(["alpha", "beta"])
    assert len(vectors) == 2 and all(abs(np.linalg.norm(v) - 1) < 1e-6 for v in vectors)
    query = await wrapped.embed_query("alpha")
    assert np.allclose(query, vectors[0], atol=1e-6)  # deterministic fake: same text, same vector
    assert wrapped.dimension == 12 and await wrapped.probe_dimension() == 12


async def test_langchain_dimension_probe_before_any_call() -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    assert LangChainEmbedder(DeterministicFakeEmbedding(size=7)).dimension == 7
    assert await ensure_dimension(LangChainEmbedder(DeterministicFakeEmbedding(size=5))) == 5


async def test_llama_index_embeddings_are_wrapped() -> None:
    from llama_index.core.embeddings import MockEmbedding

    wrapped = build_embedder(None, MockEmbedding(embed_dim=8))
    assert isinstance(wrapped, LlamaIndexEmbedder)
    vectors = await wrapped.embed_documents(["a", "b", "c"])
    assert np.asarray(vectors).shape == (3, 8)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert len(await wrapped.embed_query("q")) == 8 == wrapped.dimension


async def test_khora_embedders_pass_through_and_config_selects_provider() -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    inner = LangChainEmbedder(DeterministicFakeEmbedding(size=4))
    assert build_embedder(None, inner) is inner
    local = build_embedder(EmbeddingConfig())
    assert isinstance(local, SentenceTransformerEmbedder)
    assert local.name == "sentence-transformers:all-MiniLM-L6-v2"
    remote = build_embedder(
        EmbeddingConfig(provider="litellm", model="openai/text-embedding-3-small", dimension=1536)
    )
    assert isinstance(remote, LiteLLMEmbedder) and remote.dimension == 1536
    with pytest.raises(ConfigError):
        build_embedder(None, object())


def test_local_dimension_is_read_without_loading_the_model() -> None:
    from khora_core.embedding import local

    before = dict(local._CACHE)
    assert SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2").dimension == 384
    assert local._CACHE == before


def test_litellm_response_vectors_are_ordered_by_index() -> None:
    from khora_core.embedding.litellm import _vectors_of

    response = {"data": [{"index": 1, "embedding": [0.0, 2.0]}, {"index": 0, "embedding": [3.0, 4.0]}]}
    assert _vectors_of(response) == [[3.0, 4.0], [0.0, 2.0]]


async def test_embed_names_uses_the_embedders_own_method_or_embed_documents() -> None:
    from khora_core.embedding.base import embed_names

    class Plain:
        name, dimension = "plain", 2

        async def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            return [[1.0, 0.0] for _ in texts]

        async def embed_query(self, text):  # type: ignore[no-untyped-def]
            return [1.0, 0.0]

    class WithNames(Plain):
        async def embed_names(self, texts):  # type: ignore[no-untyped-def]
            return [[0.0, 1.0] for _ in texts]

    assert await embed_names(Plain(), ["a", "b"]) == [[1.0, 0.0], [1.0, 0.0]]
    assert await embed_names(WithNames(), ["a"]) == [[0.0, 1.0]]
