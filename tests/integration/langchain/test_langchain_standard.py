"""LangChain's own standard suites against ``KhoraVectorStore`` and ``KhoraRetriever``, on
the embedded store and on PostgreSQL + Neo4j."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests

from khora_core import KhoraSync
from khora_integrations.langchain import KhoraRetriever, KhoraVectorStore


class TestKhoraVectorStoreStandard(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, fake_kb: tuple[KhoraSync, Embeddings]) -> Iterator[VectorStore]:  # type: ignore[override]
        kb, _ = fake_kb
        store = KhoraVectorStore(kb, namespace=f"lc-std-{uuid.uuid4().hex[:12]}")
        try:
            yield store
        finally:
            store.delete(None)  # drops the namespace


class TestKhoraRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _corpus(self, lc_corpus: tuple[KhoraSync, str]) -> None:
        self._kb, self._namespace = lc_corpus

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return KhoraRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"kb": self._kb, "namespace": self._namespace}

    @property
    def retriever_query_example(self) -> str:
        return "What did Ada Lovelace write for the Analytical Engine?"
