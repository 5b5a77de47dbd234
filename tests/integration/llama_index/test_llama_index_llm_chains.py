"""LLM-backed LlamaIndex pipelines over Khora, replayed from recorded cassettes.

The LLM is the one in ``tests/llm_settings.py`` (an OpenAI-compatible server on loopback,
recorded by ``make cassettes``). No LlamaIndex LLM package that speaks OpenAI-compatible
HTTP is installed (``llama-index-llms-litellm`` / ``-openai-like`` are not dependencies), so
``LiteLLM`` below is a small ``CustomLLM`` calling ``litellm`` directly.

These run on the embedded store only: the prompts carry retrieved text, and one cassette
per test must match whatever stack replays it.
"""

from __future__ import annotations

from typing import Any

import litellm
import pytest
from llama_index.core import PropertyGraphIndex
from llama_index.core.graph_stores.types import KG_RELATIONS_KEY, EntityNode
from llama_index.core.indices.property_graph import (
    ImplicitPathExtractor,
    SimpleLLMPathExtractor,
    VectorContextRetriever,
)
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import RetrieverQueryEngine

from khora_core import KhoraSync
from khora_core.ingest.resolve import entity_id
from khora_integrations.llama_index import KhoraRetriever
from tests.llm_settings import LLM_API_BASE, LLM_API_KEY, LLM_MODEL

pytestmark = pytest.mark.vcr


class LiteLLM(CustomLLM):
    """A LlamaIndex completion LLM over ``litellm`` pointed at the recording server."""

    model: str = LLM_MODEL
    api_base: str = LLM_API_BASE
    api_key: str = LLM_API_KEY
    max_tokens: int = 256

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=4096, num_output=self.max_tokens, model_name=self.model)

    def _arguments(self, prompt: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "api_base": self.api_base,
            "api_key": self.api_key,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
        }

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        response = litellm.completion(**self._arguments(prompt))
        return CompletionResponse(text=response.choices[0].message.content or "")

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        response = await litellm.acompletion(**self._arguments(prompt))
        return CompletionResponse(text=response.choices[0].message.content or "")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt, formatted=formatted, **kwargs)


@pytest.fixture(scope="module")
def li_stack() -> str:
    """Overrides the conftest's stack parameter: the embedded store only (see the docstring)."""
    return "sqlite_lance"


@pytest.fixture
def llm() -> LiteLLM:
    return LiteLLM()


def test_llm_extracted_triplets_land_in_khora(
    li_kb: KhoraSync, li_namespace, graph_store, documents, embed_model, llm
):
    extractor = SimpleLLMPathExtractor(llm=llm, max_paths_per_chunk=5, num_workers=1)
    nodes = extractor(SentenceSplitter()(documents[:2]))
    triples = [
        (r.source_id, r.label, r.target_id)
        for node in nodes
        for r in node.metadata[KG_RELATIONS_KEY]
        if r.source_id != r.target_id
    ]
    assert triples, "the LLM extracted no triplet from two plain factual sentences"
    PropertyGraphIndex(
        nodes=nodes,
        property_graph_store=graph_store,
        kg_extractors=[ImplicitPathExtractor()],
        embed_model=embed_model,
        use_async=False,
    )
    stored = {
        (t[0].name, t[1].label, t[2].name)
        for t in graph_store.get_triplets(relation_names=[t[1] for t in triples])
    }
    ns = li_namespace
    for source, label, target in triples:
        head = graph_store.get(ids=[source])
        assert head and isinstance(head[0], EntityNode), source
        assert (head[0].name, label, graph_store.get(ids=[target])[0].name) in stored
        related = li_kb.find_related_entities(entity_id(ns, head[0].name), namespace=ns)
        assert graph_store.get(ids=[target])[0].name in {e.name for e in related}


def test_query_engine_over_the_khora_retriever(li_kb: KhoraSync, corpus: str, llm):
    engine = RetrieverQueryEngine.from_args(
        KhoraRetriever(li_kb, namespace=corpus, similarity_top_k=2), llm=llm
    )
    response = engine.query("Who discovered radium?")
    assert response.response and response.response.strip()
    assert response.source_nodes[0].node.metadata["external_id"] == "doc-1"
    assert "Marie Curie" in response.source_nodes[0].node.get_content()


def test_query_engine_over_a_property_graph_index(graph_store, documents, embed_model, llm):
    index = PropertyGraphIndex.from_documents(
        documents,
        transformations=[SentenceSplitter(id_func=lambda i, doc: f"{doc.id_}-node-{i}")],
        property_graph_store=graph_store,
        kg_extractors=[ImplicitPathExtractor()],
        embed_model=embed_model,
    )
    retriever = VectorContextRetriever(
        graph_store, embed_model=embed_model, include_text=True, similarity_top_k=2
    )
    response = index.as_query_engine(llm=llm, sub_retrievers=[retriever]).query("Where did Alan Turing work?")
    assert response.response and response.response.strip()
    assert any("Bletchley Park" in n.node.get_content() for n in response.source_nodes)
