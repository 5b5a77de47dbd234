"""Fixtures for the LangChain integration tests: one ``KhoraSync`` per stack per module.

A ``KhoraSync`` lives on the sync bridge's loop, so the same store serves LangChain's sync
and async entry points. ``lc_stack`` runs every test on the embedded store and on
PostgreSQL + Neo4j (servers from ``tests/fixtures``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from khora_core import KhoraConfig, KhoraSync
from tests.fixtures.stacks import config_for

STACK_PARAMS = [
    pytest.param("sqlite_lance", id="sqlite_lance"),
    pytest.param(
        "postgres", id="postgres", marks=[pytest.mark.postgres, pytest.mark.neo4j, pytest.mark.services]
    ),
]

#: A small corpus the retriever tests recall from (real MiniLM embeddings).
CORPUS = [
    ("Ada Lovelace wrote the first published algorithm for Charles Babbage's Analytical Engine.", "ada"),
    ("Charles Babbage designed the Analytical Engine, a mechanical general-purpose computer.", "babbage"),
    ("The Analytical Engine was to be programmed with punched cards, like the Jacquard loom.", "cards"),
    ("Ada Lovelace noted that the Analytical Engine might compose elaborate pieces of music.", "music"),
    ("Babbage's earlier Difference Engine computed polynomial tables mechanically.", "difference"),
    ("Luigi Menabrea described the Analytical Engine in a paper that Ada Lovelace translated.", "menabrea"),
]


def stack_config(
    stack: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> KhoraConfig:
    """A config for ``stack``: a fresh data dir, or the session's PostgreSQL and Neo4j."""
    return config_for(stack, request, tmp_path_factory.mktemp("khora-langchain"))


@pytest.fixture(scope="module", params=STACK_PARAMS)
def lc_stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def lc_kb(
    lc_stack: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, embedder: Any
) -> Iterator[KhoraSync]:
    """An opened ``KhoraSync`` on ``lc_stack`` with the packaged MiniLM embedder."""
    kb = KhoraSync(config=stack_config(lc_stack, request, tmp_path_factory), embedder=embedder).open()
    try:
        yield kb
    finally:
        kb.close()


@pytest.fixture(scope="module")
def lc_corpus(lc_kb: KhoraSync) -> Iterator[tuple[KhoraSync, str]]:
    """``(kb, namespace)`` holding ``CORPUS``."""
    ns = lc_kb.create_namespace(
        "langchain-corpus", namespace=f"lc-corpus-{uuid.uuid4().hex[:10]}"
    ).namespace_id
    for text, key in CORPUS:
        lc_kb.remember(
            text, namespace=ns, external_id=key, title=key, metadata={"key": key}, source="history"
        )
    try:
        yield lc_kb, ns
    finally:
        lc_kb.delete_namespace(ns)


@pytest.fixture
def fresh_namespace(lc_kb: KhoraSync) -> Iterator[str]:
    """A namespace id nobody has used; deleted afterwards."""
    ns = f"lc-{uuid.uuid4().hex[:12]}"
    try:
        yield ns
    finally:
        lc_kb.delete_namespace(ns)


@pytest.fixture(scope="module")
def fake_kb(
    lc_stack: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[KhoraSync, Embeddings]]:
    """A ``KhoraSync`` whose embedder is the suite's deterministic fake embedding.

    The embedded store takes the suite's 6-dimension embedding as is. The PostgreSQL and
    Neo4j servers are shared by the whole session and fix the vector dimension at the
    first open (384, MiniLM's), so there the same fake embedding runs at 384 dimensions.
    """
    embedding = (
        VectorStoreIntegrationTests.get_embeddings()
        if lc_stack == "sqlite_lance"
        else DeterministicFakeEmbedding(size=384)
    )
    kb = KhoraSync(config=stack_config(lc_stack, request, tmp_path_factory), embedder=embedding).open()
    try:
        yield kb, embedding
    finally:
        kb.close()
