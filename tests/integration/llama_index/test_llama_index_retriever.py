"""``KhoraRetriever`` on real stacks: the nodes match ``Khora.recall``, abstention policies
and their instrumentation event, ``MetadataFilters``, and use inside a query engine.

``corpus`` (conftest) is a namespace holding ``DOCUMENTS`` remembered by Khora itself."""

from __future__ import annotations

import uuid

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeRelationship, TextNode
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

from khora_core import KhoraSync
from khora_core.errors import KhoraAbstention, NamespaceNotFoundError
from khora_integrations.llama_index import KhoraRetriever, KhoraVectorStore

OFF_TOPIC = "What is a good recipe for sourdough bread with a crispy crust?"
ON_TOPIC = "Who discovered radium and polonium?"


def test_nodes_are_the_recalled_chunks(li_kb: KhoraSync, corpus: str):
    nodes = KhoraRetriever(li_kb, namespace=corpus, similarity_top_k=2).retrieve(ON_TOPIC)
    recalled = li_kb.recall(ON_TOPIC, namespace=corpus, limit=2)
    assert [n.node.node_id for n in nodes] == [c.id for c in recalled.chunks]
    assert [n.score for n in nodes] == [c.score for c in recalled.chunks]
    top = nodes[0].node
    assert "Marie Curie" in top.get_content()
    assert top.relationships[NodeRelationship.SOURCE].node_id == recalled.chunks[0].document_id
    meta = top.metadata
    assert meta["topic"] == "chemistry" and meta["year"] == 1898 and meta["title"] == "doc 1"
    assert meta["external_id"] == "doc-1" and "vector" in meta["channels"]
    assert "Marie Curie" in meta["entities"] and meta["should_abstain"] is False


async def test_async_retrieval_matches_sync(li_kb: KhoraSync, corpus: str):
    retriever = KhoraRetriever(li_kb, namespace=corpus, similarity_top_k=3)
    sync_ids = [n.node.node_id for n in retriever.retrieve(ON_TOPIC)]
    async_ids = [n.node.node_id for n in await retriever.aretrieve(ON_TOPIC)]
    assert async_ids == sync_ids


def test_flag_policy_marks_nodes_and_a_custom_handler_sees_the_event(li_kb, corpus, recorder):
    nodes = KhoraRetriever(li_kb, namespace=corpus, similarity_top_k=3).retrieve(OFF_TOPIC)
    assert nodes and all(n.node.metadata["should_abstain"] is True for n in nodes)
    assert len(recorder.events) == 1
    event = recorder.events[0]
    assert (event.query, event.namespace, event.policy) == (OFF_TOPIC, corpus, "flag")
    assert event.signals["should_abstain"] is True and 0.0 <= event.signals["combined_score"] <= 1.0
    KhoraRetriever(li_kb, namespace=corpus).retrieve(ON_TOPIC)
    assert len(recorder.events) == 1  # on topic: no event


async def test_the_event_is_dispatched_from_async_retrieval(li_kb, corpus, recorder):
    await KhoraRetriever(li_kb, namespace=corpus, abstain="empty").aretrieve(OFF_TOPIC)
    assert [e.policy for e in recorder.events] == ["empty"]


def test_empty_and_raise_policies(li_kb, corpus):
    assert KhoraRetriever(li_kb, namespace=corpus, abstain="empty").retrieve(OFF_TOPIC) == []
    assert KhoraRetriever(li_kb, namespace=corpus, abstain="empty").retrieve(ON_TOPIC)
    with pytest.raises(KhoraAbstention) as info:
        KhoraRetriever(li_kb, namespace=corpus, abstain="raise").retrieve(OFF_TOPIC)
    assert info.value.signals["should_abstain"] is True


def test_metadata_filters_narrow_the_recall(li_kb, corpus):
    computing = MetadataFilters(filters=[MetadataFilter(key="topic", value="computing")])
    nodes = KhoraRetriever(li_kb, namespace=corpus, similarity_top_k=5, filters=computing).retrieve(ON_TOPIC)
    assert nodes and {n.node.metadata["topic"] for n in nodes} == {"computing"}
    old = MetadataFilters(filters=[MetadataFilter(key="year", value=1900, operator=FilterOperator.LT)])
    nodes = KhoraRetriever(li_kb, namespace=corpus, similarity_top_k=5, filters=old).retrieve(ON_TOPIC)
    assert {n.node.metadata["external_id"] for n in nodes} == {"doc-0", "doc-1"}
    # Khora's system fields (external_id here) are filtered with a RecallFilter.
    old_ones = {"$and": [{"metadata.year": {"$lt": 1900}}, {"external_id": {"$in": ["doc-0", "doc-2"]}}]}
    nodes = KhoraRetriever(li_kb, namespace=corpus, similarity_top_k=5, filters=old_ones).retrieve(ON_TOPIC)
    assert {n.node.metadata["external_id"] for n in nodes} == {"doc-0"}


def test_metadata_filters_read_bare_keys_as_the_vector_store_does(li_kb: KhoraSync):
    """A bare key is the user's metadata key (issue 42 item 2), even one named like a system
    field (``created_at``, ``source``) or holding a dot: the retriever and ``KhoraVectorStore``
    select the same nodes for the same ``MetadataFilters``."""
    ns = li_kb.create_namespace(namespace=f"li-keys-{uuid.uuid4().hex[:10]}").namespace_id
    try:
        store = KhoraVectorStore(li_kb, namespace=ns)
        store.add(
            [
                TextNode(
                    id_="old",
                    text="Seals eat fish along the rocky northern coast.",
                    metadata={"created_at": "2019-05-01", "source": "archive", "a.b": 1},
                ),
                TextNode(
                    id_="new",
                    text="Seals rest on sea ice between their fishing trips.",
                    metadata={"created_at": "2024-02-01", "source": "field notes", "a.b": 2},
                ),
            ]
        )
        cases = [
            (MetadataFilter(key="created_at", value="2020-01-01", operator=FilterOperator.LT), {"old"}),
            (MetadataFilter(key="source", value="field notes"), {"new"}),
            (MetadataFilter(key="a.b", value=1), {"old"}),
            (MetadataFilter(key="source", value=["archive", "x"], operator=FilterOperator.IN), {"old"}),
        ]
        for leaf, expected in cases:
            filters = MetadataFilters(filters=[leaf])
            retrieved = KhoraRetriever(
                li_kb, namespace=ns, similarity_top_k=5, filters=filters, mode="vector"
            )
            by_retriever = {n.node.metadata["external_id"] for n in retrieved.retrieve("What do seals do?")}
            query = VectorStoreQuery(query_str="What do seals do?", similarity_top_k=5, filters=filters)
            by_store = set(store.query(query).ids)
            assert by_retriever == by_store == expected, leaf
    finally:
        li_kb.delete_namespace(ns)


def test_a_query_engine_answers_from_the_retrieved_chunks(li_kb, corpus):
    # MockLLM echoes its prompt, so the answer shows exactly what the LLM was given.
    engine = RetrieverQueryEngine.from_args(
        KhoraRetriever(li_kb, namespace=corpus, similarity_top_k=1), llm=MockLLM()
    )
    response = engine.query(ON_TOPIC)
    assert [n.node.metadata["external_id"] for n in response.source_nodes] == ["doc-1"]
    prompt = str(response)
    assert "Marie Curie discovered polonium and radium" in prompt and "topic: chemistry" in prompt
    assert "channel_scores" not in prompt and "abstention_signals" not in prompt


def test_a_namespace_name_is_answered_with_its_id(li_kb: KhoraSync) -> None:
    """A name is not an id; the error shows the id to pass."""
    name = f"team-{uuid.uuid4().hex[:8]}"
    ns = li_kb.create_namespace(name).namespace_id
    try:
        with pytest.raises(NamespaceNotFoundError, match=f"pass namespace='{ns}'"):
            KhoraRetriever(li_kb, namespace=name).retrieve("anything")
        assert KhoraRetriever(li_kb, namespace=ns).retrieve("anything") == []
    finally:
        li_kb.delete_namespace(ns)
