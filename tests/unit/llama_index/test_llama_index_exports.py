"""The LlamaIndex integration's public surface, its missing-extra error and the embedding
adapters both ways (with small deterministic embedders; the real model runs in the
integration tests)."""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys
from collections.abc import Sequence

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.graph_stores.types import PropertyGraphStore
from llama_index.core.instrumentation.events.base import BaseEvent

import khora_integrations.llama_index as li
from khora_core import Khora, KhoraConfig
from khora_core.embedding import LlamaIndexEmbedder, build_embedder
from khora_core.errors import KhoraError


def test_all_names_exist_and_are_the_public_classes():
    assert sorted(li.__all__) == li.__all__
    for name in li.__all__:
        assert getattr(li, name) is not None, name
    assert issubclass(li.KhoraRetriever, BaseRetriever)
    assert issubclass(li.KhoraPropertyGraphStore, PropertyGraphStore)
    assert issubclass(li.KhoraEmbedding, BaseEmbedding)
    assert issubclass(li.KhoraAbstentionEvent, BaseEvent)
    assert issubclass(li.UnsupportedGraphOperationError, KhoraError)
    assert issubclass(li.UnsupportedGraphOperationError, NotImplementedError)
    assert li.LlamaIndexEmbedder is LlamaIndexEmbedder


def test_the_graph_store_implements_the_whole_abstract_interface():
    assert not getattr(li.KhoraPropertyGraphStore, "__abstractmethods__", None)
    for name in ("get", "get_triplets", "get_rel_map", "upsert_nodes", "upsert_relations", "delete"):
        # the async twins are Khora's own, not the base class's sync fallbacks
        assert getattr(li.KhoraPropertyGraphStore, f"a{name}") is not getattr(PropertyGraphStore, f"a{name}")
    assert li.KhoraPropertyGraphStore.supports_vector_queries is True


def test_missing_llama_index_core_names_the_extra():
    code = (
        "import sys; sys.modules['llama_index.core'] = None\n"
        "from khora_core.errors import MissingExtraError\n"
        "try:\n"
        "    import khora_integrations.llama_index\n"
        "except MissingExtraError as exc:\n"
        "    print(exc.extra, exc.package, isinstance(exc, ImportError))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["llamaindex", "llama-index-core", "True"]


class HashEmbedder:
    """A tiny deterministic Khora ``Embedder``: unit vectors from a text's SHA-256."""

    name = "hash-8"
    dimension = 8

    def _vector(self, text: str) -> list[float]:
        raw = [b - 127.5 for b in hashlib.sha256(text.encode()).digest()[:8]]
        norm = math.sqrt(sum(x * x for x in raw))
        return [x / norm for x in raw]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


async def test_khora_embedding_serves_llama_index_sync_and_async():
    inner = HashEmbedder()
    embedding = li.KhoraEmbedding(inner)
    assert embedding.model_name == "hash-8"
    assert embedding.get_query_embedding("ada") == inner._vector("ada")
    assert embedding.get_text_embedding("ada") == inner._vector("ada")
    assert embedding.get_text_embedding_batch(["a", "b"]) == [inner._vector("a"), inner._vector("b")]
    assert await embedding.aget_query_embedding("ada") == inner._vector("ada")
    assert await embedding.aget_text_embedding_batch(["a", "b"]) == [inner._vector("a"), inner._vector("b")]


async def test_a_llama_index_embedding_becomes_a_khora_embedder():
    mock = MockEmbedding(embed_dim=4)  # every vector is [0.5] * 4
    embedder = li.as_khora_embedder(mock)
    assert isinstance(embedder, LlamaIndexEmbedder)
    vectors = await embedder.embed_documents(["a", "b"])
    assert vectors == [[0.5] * 4, [0.5] * 4]  # already unit length
    assert await embedder.embed_query("q") == [0.5] * 4
    assert embedder.dimension == 4
    # Khora(embedder=...) wraps one the same way
    assert isinstance(build_embedder(None, MockEmbedding(embed_dim=4)), LlamaIndexEmbedder)


def test_wrapping_a_khora_embedding_gives_back_the_khora_embedder():
    inner = HashEmbedder()
    assert li.as_khora_embedder(li.KhoraEmbedding(inner)) is inner


@pytest.mark.parametrize("dimension", [None, 4])
async def test_the_dimension_is_learned_or_given(dimension):
    embedder = li.as_khora_embedder(MockEmbedding(embed_dim=4), dimension=dimension)
    assert await embedder.probe_dimension() == 4


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        ({"database_url": None}, False),
        ({"database_url": "postgresql://u:p@127.0.0.1:1/db", "neo4j_url": "bolt://127.0.0.1:1"}, True),
    ],
)
def test_structured_query_support_of_an_unopened_async_khora_comes_from_its_config(storage, expected):
    kb = Khora(config=KhoraConfig(storage=storage))
    store = li.KhoraPropertyGraphStore(kb, namespace="ns")
    assert store.supports_structured_queries is expected
    assert store.client is kb and kb._engine is None  # still closed: nothing was opened
