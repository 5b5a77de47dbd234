"""``KhoraRetriever``'s translation of a ``RecallResult`` into LlamaIndex nodes, its
abstention policies and its instrumentation event, over a ``Khora`` whose ``recall``
returns a fixed result (no storage involved: the integration tests cover real stores)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.base import BaseEvent
from llama_index.core.schema import MetadataMode, NodeRelationship
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)
from pydantic import Field

from khora_core import Khora
from khora_core.errors import InvalidInputError, KhoraAbstention, RecallFilterUnsupportedError
from khora_core.filters import RecallFilter
from khora_core.filters.tree import metadata_key
from khora_core.models import DocumentProjection, RecallChunk, RecallResult
from khora_integrations.llama_index import (
    KhoraAbstentionEvent,
    KhoraRetriever,
    KhoraVectorStore,
    metadata_filters_to_recall_filter,
)

WHEN = datetime(2026, 3, 1, tzinfo=timezone.utc)


class CannedKhora(Khora):
    """A Khora whose recall answers with ``result`` and records the call."""

    def __init__(self, result: RecallResult) -> None:
        super().__init__()
        self.result = result
        self.calls: list[dict[str, Any]] = []

    async def open(self) -> CannedKhora:
        return self

    async def aclose(self) -> None:
        return None

    async def recall(self, query: str, **kwargs: Any) -> RecallResult:  # type: ignore[override]
        self.calls.append({"query": query, **kwargs})
        return self.result.model_copy(update={"query": query})


def _result(*, abstain: bool) -> RecallResult:
    chunks = [
        RecallChunk(
            id=f"chunk-{i}",
            document_id="doc-1",
            content=f"Ada Lovelace fact {i}.",
            score=1.0 - i / 10,
            index=i,
            start_char=i * 20,
            end_char=i * 20 + 19,
            channels=["vector", "graph"],
            channel_scores={"vector": 0.8, "graph": 2.0},
            channel_ranks={"vector": 1, "graph": 1},
            vector_similarity=0.8,
            entity_ids=["e-ada"],
            entity_names=["Ada Lovelace"],
        )
        for i in range(3)
    ]
    doc = DocumentProjection(
        id="doc-1",
        namespace_id="ns",
        title="Ada",
        created_at=WHEN,
        occurred_at=WHEN,
        source="history",
        metadata={"tier": "gold", "year": 1843},
        tags=["people"],
    )
    signals = {"combined_score": 0.9 if abstain else 0.1, "top_score_low": abstain, "should_abstain": abstain}
    return RecallResult(
        query="q",
        namespace_id="ns",
        chunks=chunks,
        documents=[doc],
        engine_info={"abstention_signals": signals},
    )


class Recorder(BaseEventHandler):
    events: list[BaseEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Recorder"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, KhoraAbstentionEvent):
            self.events.append(event)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    handler = Recorder()
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        yield handler
    finally:
        root.event_handlers.remove(handler)


def test_nodes_carry_chunk_ids_document_source_metadata_and_scores():
    kb = CannedKhora(_result(abstain=False))
    nodes = KhoraRetriever(kb, namespace="ns", similarity_top_k=2).retrieve("Who was Ada?")
    assert [n.node.node_id for n in nodes] == ["chunk-0", "chunk-1"]  # top_k caps the result
    assert [n.score for n in nodes] == [1.0, 0.9]
    node = nodes[0].node
    assert node.relationships[NodeRelationship.SOURCE].node_id == "doc-1"
    assert node.ref_doc_id == "doc-1"
    assert node.get_content() == "Ada Lovelace fact 0."
    meta = node.metadata
    assert meta["tier"] == "gold" and meta["year"] == 1843  # user metadata
    assert meta["title"] == "Ada" and meta["source"] == "history" and meta["tags"] == ["people"]
    assert meta["occurred_at"] == WHEN.isoformat()
    assert meta["chunk_id"] == "chunk-0" and meta["document_id"] == "doc-1" and meta["namespace_id"] == "ns"
    assert meta["channels"] == ["vector", "graph"] and meta["entities"] == ["Ada Lovelace"]
    assert meta["channel_scores"] == {"vector": 0.8, "graph": 2.0} and meta["vector_similarity"] == 0.8
    assert meta["should_abstain"] is False and meta["abstention_signals"]["combined_score"] == 0.1
    # the LLM sees the content and the user's fields, not Khora's bookkeeping
    llm_text = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "tier: gold" in llm_text and "Ada Lovelace fact 0." in llm_text
    assert "channel_scores" not in llm_text and "chunk_id" not in llm_text
    assert kb.calls[0]["limit"] == 2 and kb.calls[0]["namespace"] == "ns" and kb.calls[0]["filter"] is None


def test_flag_policy_keeps_nodes_marks_them_and_dispatches_the_event(recorder):
    nodes = KhoraRetriever(CannedKhora(_result(abstain=True)), namespace="ns").retrieve("off topic")
    assert len(nodes) == 3 and all(n.node.metadata["should_abstain"] is True for n in nodes)
    assert len(recorder.events) == 1
    event = recorder.events[0]
    assert (event.query, event.namespace, event.policy) == ("off topic", "ns", "flag")
    assert event.signals["should_abstain"] is True and event.signals["combined_score"] == 0.9
    assert event.class_name() == "KhoraAbstentionEvent"


async def test_async_retrieval_dispatches_the_event_too(recorder):
    nodes = await KhoraRetriever(CannedKhora(_result(abstain=True)), namespace="ns").aretrieve("off topic")
    assert len(nodes) == 3
    assert [e.policy for e in recorder.events] == ["flag"]


def test_no_event_when_recall_does_not_abstain(recorder):
    KhoraRetriever(CannedKhora(_result(abstain=False)), namespace="ns").retrieve("on topic")
    assert recorder.events == []


def test_empty_policy_returns_nothing_when_abstaining(recorder):
    retriever = KhoraRetriever(CannedKhora(_result(abstain=True)), namespace="ns", abstain="empty")
    assert retriever.retrieve("off topic") == []
    assert [e.policy for e in recorder.events] == ["empty"]
    on_topic = KhoraRetriever(CannedKhora(_result(abstain=False)), namespace="ns", abstain="empty")
    assert len(on_topic.retrieve("on topic")) == 3


async def test_raise_policy_raises_with_the_signals_after_dispatching(recorder):
    retriever = KhoraRetriever(CannedKhora(_result(abstain=True)), namespace="ns", abstain="raise")
    with pytest.raises(KhoraAbstention) as info:
        retriever.retrieve("off topic")
    assert info.value.query == "off topic" and info.value.signals["should_abstain"] is True
    with pytest.raises(KhoraAbstention):
        await retriever.aretrieve("off topic")
    assert [e.policy for e in recorder.events] == ["raise", "raise"]


def test_metadata_filters_are_translated_before_recall():
    """LlamaIndex's dialect: a bare key is the user's metadata key, taken literally, even when
    it is named like a system field or holds a dot (as ``KhoraVectorStore`` reads it)."""
    kb = CannedKhora(_result(abstain=False))
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="tier", value=["gold", "silver"], operator=FilterOperator.IN),
            MetadataFilter(key="source", value="history"),
            MetadataFilter(key="created_at", value="2020-01-01", operator=FilterOperator.LT),
            MetadataFilter(key="a.b", value="x"),
        ]
    )
    KhoraRetriever(kb, namespace="ns", filters=filters, mode="vector", min_similarity=0.2).retrieve("q")
    call = kb.calls[0]
    expected = metadata_filters_to_recall_filter(filters, node_metadata=True)
    assert call["filter"] == RecallFilter.parse(expected)
    assert call["filter"] == KhoraVectorStore._query_filter(
        VectorStoreQuery(filters=filters, similarity_top_k=1)
    )
    leaves = expected["$and"]
    assert leaves[1] == {metadata_key("source"): {"$eq": "history"}}  # not Khora's source field
    assert leaves[2] == {metadata_key("created_at"): {"$lt": "2020-01-01"}}  # not the ingest time
    assert leaves[3] == {metadata_key("a.b"): {"$eq": "x"}}  # one key, not a nested path
    assert call["mode"].value == "vector" and call["min_similarity"] == 0.2


def test_system_fields_are_filtered_with_a_recall_filter():
    kb = CannedKhora(_result(abstain=False))
    KhoraRetriever(kb, namespace="ns", filters={"source": "history"}).retrieve("q")
    assert kb.calls[0]["filter"] == RecallFilter.parse({"source": {"$eq": "history"}})


def test_recall_filter_dicts_pass_through():
    kb = CannedKhora(_result(abstain=False))
    KhoraRetriever(kb, namespace="ns", filters={"metadata.tier": "gold"}).retrieve("q")
    assert kb.calls[0]["filter"] == RecallFilter.parse({"metadata.tier": "gold"})


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"similarity_top_k": 0}, InvalidInputError),
        ({"similarity_top_k": True}, InvalidInputError),
        ({"abstain": "maybe"}, InvalidInputError),
        ({"mode": "psychic"}, InvalidInputError),
        (
            {
                "filters": MetadataFilters(
                    filters=[MetadataFilter(key="t", value="x", operator=FilterOperator.TEXT_MATCH)]
                )
            },
            RecallFilterUnsupportedError,
        ),
    ],
)
def test_bad_arguments_fail_at_construction(kwargs, error):
    with pytest.raises(error):
        KhoraRetriever(CannedKhora(_result(abstain=False)), namespace="ns", **kwargs)


def test_an_empty_query_is_rejected():
    with pytest.raises(InvalidInputError):
        KhoraRetriever(CannedKhora(_result(abstain=False)), namespace="ns").retrieve("  ")
