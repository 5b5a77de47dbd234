"""The integration over an async ``Khora`` opened on the caller's loop (the backend-
parametrised ``kb``/``namespace`` fixtures of ``tests/fixtures/stacks.py``): the async
entry points await it directly, with no sync bridge involved."""

from __future__ import annotations

from llama_index.core.graph_stores.types import TRIPLET_SOURCE_KEY, ChunkNode, EntityNode, Relation
from llama_index.core.vector_stores.types import VectorStoreQuery

from khora_core import Khora
from khora_integrations.llama_index import KhoraEmbedding, KhoraPropertyGraphStore, KhoraRetriever


async def test_graph_store_and_retriever_on_an_async_khora(kb: Khora, namespace: str, stack_name: str):
    store = KhoraPropertyGraphStore(kb, namespace=namespace)
    assert store.supports_structured_queries is (stack_name == "postgres")
    text = "Zorblax Prime is a cold planet that orbits the star Quuxar."
    await store.aupsert_nodes([ChunkNode(text=text, id_="c-1", properties={"topic": "astro"})])
    await store.aupsert_nodes([EntityNode(name="Zorblax Prime", label="PLANET")])
    await store.aupsert_relations(
        [
            Relation(
                label="ORBITS",
                source_id="Zorblax Prime",
                target_id="Quuxar",
                properties={TRIPLET_SOURCE_KEY: "c-1"},
            )
        ]
    )
    (orbit,) = await store.aget_triplets(relation_names=["ORBITS"])
    assert (orbit[0].name, orbit[2].name, orbit[1].properties[TRIPLET_SOURCE_KEY]) == (
        "Zorblax Prime",
        "Quuxar",
        "c-1",
    )

    embedding = KhoraEmbedding.from_khora(kb)
    vector = await embedding.aget_query_embedding("Zorblax Prime")
    nodes, _ = await store.avector_query(VectorStoreQuery(query_embedding=vector, similarity_top_k=1))
    assert [n.name for n in nodes] == ["Zorblax Prime"]

    retrieved = await KhoraRetriever(kb, namespace=namespace, similarity_top_k=1).aretrieve(
        "What does Zorblax orbit?"
    )
    assert retrieved[0].node.get_content() == text and retrieved[0].node.metadata["external_id"] == "c-1"
    recalled = await kb.recall("What does Zorblax orbit?", namespace=namespace, limit=1)
    assert retrieved[0].node.node_id == recalled.chunks[0].id
