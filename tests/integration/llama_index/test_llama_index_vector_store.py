"""``KhoraVectorStore`` under ``VectorStoreIndex`` on both stacks, and its filters against
LlamaIndex's own ``SimpleVectorStore`` on the same nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from khora_core import KhoraSync
from khora_core.errors import InvalidInputError, RecallFilterUnsupportedError
from khora_integrations.llama_index import KhoraEmbedding, KhoraVectorStore

O = FilterOperator  # noqa: E741
C = FilterCondition


def F(key: str, value: Any, op: FilterOperator = O.EQ) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=op)


def FS(*filters: Any, condition: FilterCondition = C.AND) -> MetadataFilters:
    return MetadataFilters(filters=list(filters), condition=condition)


def _ref_ids(nodes: list[Any]) -> set[str]:
    return {n.node.ref_doc_id for n in nodes}


def test_vector_store_index_retrieves_filters_and_deletes_by_ref_doc(
    li_kb: KhoraSync, li_namespace: str, documents: list[Any], embed_model: KhoraEmbedding
) -> None:
    store = KhoraVectorStore(li_kb, namespace=li_namespace)
    index = VectorStoreIndex.from_documents(
        documents, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
    )
    top = index.as_retriever(similarity_top_k=1).retrieve("Who discovered polonium and radium?")
    assert len(top) == 1
    node = top[0].node
    assert node.ref_doc_id == "li-doc-1"
    assert "polonium" in node.get_content()
    assert node.metadata == {"topic": "chemistry", "year": 1898}  # the node's metadata, nothing added
    assert 0.3 < top[0].score <= 1.0

    computing = index.as_retriever(similarity_top_k=10, filters=FS(F("topic", "computing")))
    assert _ref_ids(computing.retrieve("Who worked on computing machines?")) == {"li-doc-0", "li-doc-2"}
    old = index.as_retriever(similarity_top_k=10, filters=FS(F("year", 1900, O.LT)))
    assert _ref_ids(old.retrieve("discoveries")) == {"li-doc-0", "li-doc-1"}

    index.delete_ref_doc("li-doc-0")
    assert _ref_ids(computing.retrieve("Who worked on computing machines?")) == {"li-doc-2"}
    assert {n.ref_doc_id for n in store.get_nodes()} == {"li-doc-1", "li-doc-2"}


async def test_async_add_query_and_delete_nodes(
    li_kb: KhoraSync, li_namespace: str, embed_model: KhoraEmbedding
) -> None:
    store = KhoraVectorStore(li_kb, namespace=li_namespace)
    nodes = [
        TextNode(id_="a", text="Seals eat fish.", metadata={"src": "a"}),
        TextNode(id_="b", text="Seals eat fish.", metadata={"src": "b"}),  # same text, own id
        TextNode(id_="c", text="Owls hunt mice at night.", metadata={"src": "c"}),
    ]
    for node in nodes:
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="doc-x")
    assert await store.async_add(nodes) == ["a", "b", "c"]
    result = await store.aquery(VectorStoreQuery(query_str="What do seals eat?", similarity_top_k=2))
    assert sorted(result.ids) == ["a", "b"]
    assert {n.metadata["src"] for n in result.nodes} == {"a", "b"}
    assert result.similarities[0] >= result.similarities[1]

    # A query embedding without text is searched as given (it comes from Khora's embedder).
    vector = await embed_model.aget_query_embedding("owls at night")
    by_vector = await store.aquery(VectorStoreQuery(query_embedding=vector, similarity_top_k=1))
    assert by_vector.ids == ["c"]
    with pytest.raises(InvalidInputError, match="dimensions"):
        await store.aquery(VectorStoreQuery(query_embedding=[0.1, 0.2], similarity_top_k=1))

    await store.adelete_nodes(filters=FS(F("src", "a")))
    assert [n.node_id for n in await store.aget_nodes(["a", "b", "c"])] == ["b", "c"]
    await store.adelete_nodes(["b"])
    assert [n.node_id for n in await store.aget_nodes()] == ["c"]


def test_unsupported_operators_and_modes_raise_typed_errors(li_kb: KhoraSync, li_namespace: str) -> None:
    store = KhoraVectorStore(li_kb, namespace=li_namespace)
    store.add([TextNode(id_="a", text="Seals eat fish.", metadata={"tags": ["x"], "s": "seal"})])
    for op, value in ((O.CONTAINS, "x"), (O.TEXT_MATCH, "se"), (O.ANY, ["x"]), (O.ALL, ["x"])):
        query = VectorStoreQuery(query_str="seals", similarity_top_k=1, filters=FS(F("tags", value, op)))
        with pytest.raises(RecallFilterUnsupportedError, match=op.value):
            store.query(query)
    with pytest.raises(InvalidInputError, match="DEFAULT"):
        store.query(VectorStoreQuery(query_str="seals", mode=VectorStoreQueryMode.MMR))
    assert [n.node_id for n in store.get_nodes(["a"])] == ["a"]  # nothing lost


def test_zero_argument_store_uses_the_default_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built bare: the embedded store in the working folder, namespace "llama_index"."""
    monkeypatch.chdir(tmp_path)
    for var in ("KHORA_DATABASE_URL", "KHORA_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    store = KhoraVectorStore()
    try:
        assert store.namespace == "llama_index"
        store.add([TextNode(id_="n1", text="Ada Lovelace wrote the first algorithm.")])
        result = store.query(VectorStoreQuery(query_str="first algorithm", similarity_top_k=1))
        assert result.ids == ["n1"]
    finally:
        store.close()


# -- filters against SimpleVectorStore ------------------------------------------------------

#: Metadata with missing keys, None, numbers, booleans, numeric strings, lists, system-like
#: names and keys with dots and spaces.
PARITY_METADATA: list[dict[str, Any]] = [
    {"n": 5, "s": "a", "tags": ["x"], "flag": True},
    {"n": 1, "s": "b", "flag": False},
    {"n": 0, "s": "", "created_at": "2019-05-01", "title": "Zebras"},
    {"n": None, "s": "c", "created_at": "2021-01-01"},
    {"s": "5", "tags": []},
    {"n": 2.5, "page label": "x", "a.b": 1, "source": "wiki"},
    {"flag": True, "title": "Apes"},
    {"n": 8, "s": "8"},
]
PARITY_CASES: list[tuple[str, MetadataFilters]] = [
    ("eq int", FS(F("n", 5))),
    ("eq float vs int", FS(F("n", 5.0))),
    ("eq 1 vs True", FS(F("flag", 1))),
    ("eq 0 vs False and 0", FS(F("flag", 0))),
    ("eq numeric string", FS(F("s", "5"))),
    ("ne int (missing and None match)", FS(F("n", 5, O.NE))),
    ("ne 1 vs True", FS(F("flag", 1, O.NE))),
    ("ne string", FS(F("s", "a", O.NE))),
    ("gt", FS(F("n", 1, O.GT))),
    ("gte", FS(F("n", 1, O.GTE))),
    ("lt float", FS(F("n", 2.5, O.LT))),
    ("lte 0", FS(F("n", 0, O.LTE))),
    ("gt 0 on booleans", FS(F("flag", 0, O.GT))),
    ("lt string", FS(F("s", "b", O.LT))),
    ("gte numeric string", FS(F("s", "5", O.GTE))),
    ("in numbers", FS(F("n", [5, 8], O.IN))),
    ("in strings vs numbers", FS(F("n", ["8"], O.IN))),
    ("in strings", FS(F("s", ["8", "a"], O.IN))),
    ("in 1 vs True", FS(F("flag", [1], O.IN))),
    ("nin numbers", FS(F("n", [5, 8], O.NIN))),
    ("nin strings", FS(F("s", ["a"], O.NIN))),
    ("in empty", FS(F("n", [], O.IN))),
    ("nin empty", FS(F("n", [], O.NIN))),
    ("is_empty number", FS(F("n", None, O.IS_EMPTY))),
    ("is_empty string", FS(F("s", None, O.IS_EMPTY))),
    ("is_empty list", FS(F("tags", None, O.IS_EMPTY))),
    ("user created_at", FS(F("created_at", "2020-01-01", O.LT))),
    ("user title", FS(F("title", "Apes"))),
    ("user source", FS(F("source", "wiki"))),
    ("key with a space", FS(F("page label", "x"))),
    ("key with a dot", FS(F("a.b", 1))),
    ("ref_doc_id", FS(F("ref_doc_id", "r1"))),
    ("or", FS(F("s", "a"), F("n", 4, O.GT), condition=C.OR)),
    ("not", FS(F("s", "a"), F("n", None, O.IS_EMPTY), condition=C.NOT)),
    ("and", FS(F("n", 5, O.NE), F("s", ["b"], O.NIN))),
    ("empty or", FS(condition=C.OR)),
]


@pytest.fixture(scope="module")
def parity_stores(li_kb: KhoraSync, embed_model: KhoraEmbedding) -> Any:
    nodes = []
    for i, metadata in enumerate(PARITY_METADATA):
        node = TextNode(id_=f"p{i}", text=f"Parity node number {i} about animals.", metadata=dict(metadata))
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=f"r{i % 3}")
        node.embedding = embed_model.get_text_embedding(node.get_content())
        nodes.append(node)
    namespace = li_kb.create_namespace("li-parity", namespace=f"li-parity-{id(nodes):x}").namespace_id
    khora = KhoraVectorStore(li_kb, namespace=namespace)
    khora.add(nodes)
    simple = SimpleVectorStore()
    simple.add(nodes)
    try:
        yield khora, simple, embed_model.get_query_embedding("animals")
    finally:
        li_kb.delete_namespace(namespace)


@pytest.mark.parametrize(("case", "filters"), PARITY_CASES, ids=[c for c, _ in PARITY_CASES])
def test_filters_select_what_simple_vector_store_selects(
    parity_stores: Any, case: str, filters: MetadataFilters
) -> None:
    khora, simple, vector = parity_stores
    k = len(PARITY_METADATA)
    expected = simple.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=k, filters=filters)).ids
    got = khora.query(VectorStoreQuery(query_str="animals", similarity_top_k=k, filters=filters)).ids
    assert sorted(got) == sorted(expected), case


def test_a_type_error_in_simple_vector_store_is_no_match_in_khora(parity_stores: Any) -> None:
    """SimpleVectorStore raises TypeError ordering a string against a number; Khora's
    typed comparison skips that value (documented in docs/integrations.md)."""
    khora, simple, vector = parity_stores
    filters = FS(F("s", 4, O.GT))
    with pytest.raises(TypeError):
        simple.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=8, filters=filters))
    assert khora.query(VectorStoreQuery(query_str="animals", similarity_top_k=8, filters=filters)).ids == []
