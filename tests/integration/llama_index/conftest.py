"""Fixtures for the LlamaIndex integration tests: one ``KhoraSync`` per stack per module.

A ``KhoraSync`` lives on the sync bridge's loop, so the same store serves LlamaIndex's sync
and async entry points (``PropertyGraphIndex`` itself runs ``asyncio.run`` inside its sync
methods). ``li_stack`` runs every test on the embedded store and on PostgreSQL + Neo4j
(servers from ``tests/fixtures``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core import Document
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.base import BaseEvent
from pydantic import Field

from khora_core import KhoraConfig, KhoraSync
from khora_integrations.llama_index import KhoraAbstentionEvent, KhoraEmbedding, KhoraPropertyGraphStore
from tests.fixtures.stacks import config_for

STACK_PARAMS = [
    pytest.param("sqlite_lance", id="sqlite_lance"),
    pytest.param(
        "postgres", id="postgres", marks=[pytest.mark.postgres, pytest.mark.neo4j, pytest.mark.services]
    ),
]

#: Source documents for the property-graph tests: (text, metadata).
DOCUMENTS = [
    (
        "Ada Lovelace wrote the first published algorithm for the Analytical Engine designed by "
        "Charles Babbage in London.",
        {"topic": "computing", "year": 1843},
    ),
    (
        "Marie Curie discovered polonium and radium in Paris with Pierre Curie.",
        {"topic": "chemistry", "year": 1898},
    ),
    (
        "Alan Turing worked at Bletchley Park and described the Turing machine at Cambridge.",
        {"topic": "computing", "year": 1936},
    ),
]


def stack_config(
    stack: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> KhoraConfig:
    """A config for ``stack``: a fresh data dir, or the session's PostgreSQL and Neo4j."""
    return config_for(stack, request, tmp_path_factory.mktemp("khora-llama"))


@pytest.fixture(scope="module", params=STACK_PARAMS)
def li_stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def li_kb(
    li_stack: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, embedder: Any
) -> Iterator[KhoraSync]:
    """An opened ``KhoraSync`` on ``li_stack`` with the packaged MiniLM embedder."""
    kb = KhoraSync(config=stack_config(li_stack, request, tmp_path_factory), embedder=embedder).open()
    try:
        yield kb
    finally:
        kb.close()


@pytest.fixture(scope="module")
def embed_model(li_kb: KhoraSync) -> KhoraEmbedding:
    """Khora's own embedder as a LlamaIndex ``BaseEmbedding`` (real MiniLM vectors)."""
    return KhoraEmbedding.from_khora(li_kb)


@pytest.fixture
def li_namespace(li_kb: KhoraSync) -> Iterator[str]:
    """A namespace id nobody has used; deleted afterwards."""
    ns = f"li-{uuid.uuid4().hex[:12]}"
    try:
        yield ns
    finally:
        li_kb.delete_namespace(ns)


@pytest.fixture(scope="module")
def corpus(li_kb: KhoraSync) -> Iterator[str]:
    """A namespace holding ``DOCUMENTS``, remembered by Khora (``external_id`` ``doc-<i>``)."""
    ns = li_kb.create_namespace("llama-corpus", namespace=f"li-corpus-{uuid.uuid4().hex[:10]}").namespace_id
    for i, (text, meta) in enumerate(DOCUMENTS):
        li_kb.remember(text, namespace=ns, external_id=f"doc-{i}", title=f"doc {i}", metadata=meta)
    try:
        yield ns
    finally:
        li_kb.delete_namespace(ns)


@pytest.fixture
def graph_store(li_kb: KhoraSync, li_namespace: str) -> KhoraPropertyGraphStore:
    """The store with Khora's extractor on: these tests index with ``ImplicitPathExtractor``,
    which finds no entities, and read the graph Khora builds."""
    return KhoraPropertyGraphStore(li_kb, namespace=li_namespace, khora_extraction=True)


@pytest.fixture
def documents() -> list[Document]:
    # Fixed ids keep prompts byte-identical between recording and replay of LLM cassettes.
    return [
        Document(text=text, metadata=dict(meta), id_=f"li-doc-{i}")
        for i, (text, meta) in enumerate(DOCUMENTS)
    ]


class EventRecorder(BaseEventHandler):
    """Collects the ``KhoraAbstentionEvent``s dispatched while it is registered."""

    events: list[BaseEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "EventRecorder"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, KhoraAbstentionEvent):
            self.events.append(event)


@pytest.fixture
def recorder() -> Iterator[EventRecorder]:
    handler = EventRecorder()
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        yield handler
    finally:
        root.event_handlers.remove(handler)
