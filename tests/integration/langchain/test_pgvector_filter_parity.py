"""The vector store's filters select what langchain-postgres ``PGVector`` selects.

Both stores hold the same documents with the same metadata (missing keys, ``null``,
numbers, numeric strings, booleans, a user ``created_at`` and ``source``); each PGVector
filter case runs on PGVector (on the test PostgreSQL) and on ``KhoraVectorStore`` (on every
stack), and the returned ids must be equal. Keys PGVector refuses (``"a.b"``,
``"page label"``) are checked against the documents' metadata directly.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from khora_core import KhoraSync
from khora_integrations.langchain import KhoraVectorStore

DIM = 384  # the shared PostgreSQL fixes the vector dimension at MiniLM's

METADATA: dict[str, dict[str, Any]] = {
    "d01": {"n": 1, "tier": "gold", "flag": True, "created_at": "2019-05-01", "source": "wiki"},
    "d02": {"n": 5, "tier": "silver", "flag": False, "created_at": "2021-01-01"},
    "d03": {"n": 8, "tier": "8", "flag": True, "source": "web"},
    "d04": {"n": "8", "tier": "bronze"},
    "d05": {"n": 2.5, "tier": None, "created_at": "2018-12-31"},
    "d06": {"n": None, "flag": False, "source": "wiki"},
    "d07": {"tier": "gold", "a.b": 1, "page label": "intro"},
    "d08": {"n": 10, "tier": "Gold", "page label": "body"},
    "d09": {"n": -3, "tier": "true", "flag": True},
    "d10": {"n": 5.5, "tier": "silver", "nested": {"x": 1}},
    "d11": {"n": 0, "tier": ""},
    "d12": {},
}

CASES: list[dict[str, Any]] = [
    {"tier": "gold"},
    {"n": 5},
    {"n": "8"},
    {"flag": True},
    {"n": None},
    {"n": {"$ne": 5}},
    {"tier": {"$ne": "gold"}},
    {"flag": {"$ne": True}},
    {"n": {"$ne": None}},
    {"n": {"$gt": 2}},
    {"n": {"$lte": 5}},
    {"tier": {"$gte": "g"}},
    {"tier": {"$lt": "gold"}},
    {"flag": {"$gt": False}},
    {"n": {"$between": [1, 8]}},
    {"created_at": {"$lt": "2020-01-01"}},
    {"created_at": {"$gte": "2020-01-01"}},
    {"source": "wiki"},
    {"n": {"$in": [5, 8]}},
    {"n": {"$in": [5.5]}},
    {"n": {"$in": ["8", "1"]}},
    {"tier": {"$in": ["gold", "8"]}},
    {"tier": {"$in": ["true"]}},
    {"n": {"$nin": [5, 8]}},
    {"tier": {"$nin": ["gold"]}},
    {"n": {"$exists": True}},
    {"n": {"$exists": False}},
    {"$not": {"n": {"$in": [1]}}},
    {"$not": {"n": 1}},
    {"$not": [{"tier": "gold"}, {"n": {"$gt": 4}}]},
    {"$or": [{"n": {"$lt": 2}}, {"tier": {"$in": ["silver"]}}]},
    {"$and": [{"flag": True}, {"n": {"$gte": 1}}]},
    {"$not": {"$or": [{"n": {"$lt": 2}}, {"tier": {"$nin": ["silver"]}}]}},
    {"$not": {"$and": [{"flag": {"$ne": False}}, {"tier": "gold"}]}},
    {"tier": "gold", "flag": True},
]


def _docs() -> list[Document]:
    return [
        Document(id=i, page_content=f"Document {i} about topic {i}.", metadata=m) for i, m in METADATA.items()
    ]


@pytest.fixture(scope="module")
def embedding() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=DIM)


@pytest.fixture(scope="module")
def pgvector(postgres_dsn: str, embedding: DeterministicFakeEmbedding) -> Iterator[Any]:
    from langchain_postgres import PGVector

    url = "postgresql+psycopg://" + postgres_dsn.split("://", 1)[1]
    store = PGVector(
        embeddings=embedding,
        connection=url,
        collection_name=f"parity_{uuid.uuid4().hex[:10]}",
        use_jsonb=True,
    )
    docs = _docs()
    store.add_documents(docs, ids=[d.id for d in docs])
    try:
        yield store
    finally:
        store.delete_collection()


@pytest.fixture(scope="module")
def khora_store(
    lc_stack: str, request: pytest.FixtureRequest, tmp_path_factory: Any, embedding: Any
) -> Iterator[Any]:
    from tests.integration.langchain.conftest import stack_config

    kb = KhoraSync(config=stack_config(lc_stack, request, tmp_path_factory), embedder=embedding).open()
    store = KhoraVectorStore(kb, namespace=f"parity-{uuid.uuid4().hex[:10]}")
    docs = _docs()
    store.add_documents(docs, ids=[d.id for d in docs])
    try:
        yield store
    finally:
        store.delete()
        kb.close()


def _ids(store: Any, filter_: dict[str, Any]) -> list[str]:
    return sorted(str(d.id) for d in store.similarity_search("topic", k=len(METADATA), filter=filter_))


@pytest.mark.postgres
@pytest.mark.reference_pgvector
@pytest.mark.parametrize("filter_", CASES, ids=[str(c) for c in CASES])
def test_khora_selects_what_pgvector_selects(
    pgvector: Any, khora_store: Any, filter_: dict[str, Any]
) -> None:
    expected = _ids(pgvector, filter_)
    assert _ids(khora_store, filter_) == expected


@pytest.mark.postgres
@pytest.mark.reference_pgvector
def test_the_cases_tell_the_semantics_apart(pgvector: Any) -> None:
    """The data exercises what differed: $ne/$nin on missing keys, $in text matching."""
    assert _ids(pgvector, {"n": {"$ne": 5}}) == ["d01", "d03", "d05", "d06", "d08", "d09", "d10", "d11"]
    assert _ids(pgvector, {"n": {"$in": ["8"]}}) == ["d03", "d04"]
    assert "d12" not in _ids(pgvector, {"tier": {"$nin": ["gold"]}})
    assert _ids(pgvector, {"created_at": {"$lt": "2020-01-01"}}) == ["d01", "d05"]


@pytest.mark.parametrize(
    ("filter_", "expected"),
    [
        ({"a.b": 1}, ["d07"]),
        ({"page label": {"$in": ["intro", "body"]}}, ["d07", "d08"]),
        ({"page label": {"$exists": False}}, sorted(set(METADATA) - {"d07", "d08"})),
    ],
)
def test_any_stored_key_is_filterable(khora_store: Any, filter_: dict[str, Any], expected: list[str]) -> None:
    assert _ids(khora_store, filter_) == expected


@pytest.mark.postgres
@pytest.mark.reference_pgvector
def test_known_difference_numbers_in_in_compare_by_value(pgvector: Any, khora_store: Any) -> None:
    """Documented in docs/integrations.md: PGVector compares ``$in`` members as text, so
    ``5`` misses a stored ``5.0``; Khora compares numbers by value and finds it."""
    pgvector.add_documents(
        [Document(id="f50", page_content="Five point zero.", metadata={"m": 5.0})], ids=["f50"]
    )
    khora_store.add_documents(
        [Document(id="f50", page_content="Five point zero.", metadata={"m": 5.0})], ids=["f50"]
    )
    try:
        assert _ids(pgvector, {"m": {"$in": [5]}}) == []
        assert _ids(khora_store, {"m": {"$in": [5]}}) == ["f50"]
        assert _ids(pgvector, {"m": 5}) == _ids(khora_store, {"m": 5}) == ["f50"]
    finally:
        pgvector.delete(["f50"])
        khora_store.delete(["f50"])
