"""Fixtures for the LangGraph store tests: one ``KhoraSync`` per stack per module.

``lg_stack`` runs every test on the embedded store and on PostgreSQL + Neo4j (servers from
``tests/fixtures``). Each test gets a ``KhoraStore`` under its own prefix, so tests sharing
the module's Khora never see each other's items, and LangGraph's ``InMemoryStore`` with the
same embeddings to compare against.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from khora_core import KhoraSync
from khora_integrations.langchain import KhoraEmbeddings
from khora_integrations.langgraph import KhoraStore
from tests.fixtures.stacks import config_for

STACK_PARAMS = [
    pytest.param("sqlite_lance", id="sqlite_lance"),
    pytest.param(
        "postgres", id="postgres", marks=[pytest.mark.postgres, pytest.mark.neo4j, pytest.mark.services]
    ),
]

#: What both stores index: the ``text`` field of each value.
INDEX_FIELDS = ["text"]


@pytest.fixture(scope="module", params=STACK_PARAMS)
def lg_stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def lg_kb(
    lg_stack: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, embedder: Any
) -> Iterator[KhoraSync]:
    """An opened ``KhoraSync`` on ``lg_stack`` with the packaged MiniLM embedder."""
    config = config_for(lg_stack, request, tmp_path_factory.mktemp("khora-langgraph"))
    kb = KhoraSync(config=config, embedder=embedder).open()
    try:
        yield kb
    finally:
        kb.close()


@pytest.fixture
def store(lg_kb: KhoraSync) -> Iterator[KhoraStore]:
    """A ``KhoraStore`` under a fresh prefix; its namespaces are deleted afterwards."""
    prefix = f"lg-{uuid.uuid4().hex[:10]}"
    yield KhoraStore(lg_kb, index={"fields": INDEX_FIELDS}, prefix=prefix)
    for ns in lg_kb.list_namespaces():
        if ns.namespace_id.startswith(prefix + "/"):
            lg_kb.delete_namespace(ns.namespace_id)


@pytest.fixture
def reference(lg_kb: KhoraSync) -> InMemoryStore:
    """LangGraph's ``InMemoryStore`` indexing the same fields with the same embeddings."""
    return InMemoryStore(index={"dims": 384, "embed": KhoraEmbeddings(lg_kb), "fields": INDEX_FIELDS})
