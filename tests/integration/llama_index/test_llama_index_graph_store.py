"""``KhoraPropertyGraphStore`` on real stacks: a ``PropertyGraphIndex`` built on it, its
retrievers, and the same nodes seen from ``Khora.recall`` and the entity reads (both ways)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest
from llama_index.core import PropertyGraphIndex
from llama_index.core.graph_stores.types import (
    KG_NODES_KEY,
    KG_RELATIONS_KEY,
    TRIPLET_SOURCE_KEY,
    ChunkNode,
    EntityNode,
    Relation,
)
from llama_index.core.indices.property_graph import ImplicitPathExtractor, VectorContextRetriever
from llama_index.core.schema import TransformComponent
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery

from khora_core import KhoraSync
from khora_core.errors import InvalidInputError
from khora_core.ingest.resolve import entity_id
from khora_integrations.llama_index import (
    KhoraPropertyGraphStore,
    ReadOnlyQueryError,
    UnsupportedGraphOperationError,
)

RADIUM = "Who discovered radium?"


def _index(graph_store, documents, embed_model) -> PropertyGraphIndex:
    return PropertyGraphIndex.from_documents(
        documents,
        property_graph_store=graph_store,
        kg_extractors=[ImplicitPathExtractor()],
        embed_model=embed_model,
    )


def _vector_retriever(graph_store, embed_model, **kwargs) -> VectorContextRetriever:
    return VectorContextRetriever(graph_store, embed_model=embed_model, include_text=True, **kwargs)


def test_property_graph_index_nodes_are_found_by_its_retrievers_and_by_recall(
    li_kb: KhoraSync, li_namespace, graph_store, documents, embed_model
):
    index = _index(graph_store, documents, embed_model)
    chunks = [n for n in graph_store.get() if isinstance(n, ChunkNode)]
    assert sorted(c.properties["ref_doc_id"] for c in chunks) == sorted(d.doc_id for d in documents)

    # LlamaIndex's vector-context retriever, through the index
    retriever = index.as_retriever(
        sub_retrievers=[_vector_retriever(graph_store, embed_model, similarity_top_k=2)]
    )
    top = retriever.retrieve(RADIUM)[0]
    assert "Marie Curie discovered polonium and radium" in top.node.get_content()
    assert top.node.ref_doc_id == documents[1].doc_id  # the original LlamaIndex node came back
    assert top.node.metadata["topic"] == "chemistry"

    # Khora recalls the same text, stored under the LlamaIndex node id
    recalled = li_kb.recall(RADIUM, namespace=li_namespace, limit=3)
    assert "Marie Curie" in recalled.chunks[0].content
    doc = next(d for d in recalled.documents if d.id == recalled.chunks[0].document_id)
    assert doc.external_id == top.node.node_id
    assert doc.metadata["topic"] == "chemistry" and doc.metadata["ref_doc_id"] == documents[1].doc_id

    # inserting the same documents again stores nothing new
    before = li_kb.stats(li_namespace)
    index.insert(documents[0])
    assert li_kb.stats(li_namespace).documents == before.documents


async def test_the_async_retrieval_path_finds_the_same(
    li_kb, li_namespace, graph_store, documents, embed_model
):
    # PropertyGraphIndex builds with asyncio.run(), so it cannot run on this loop's thread.
    await asyncio.to_thread(_index, graph_store, documents, embed_model)
    nodes = await _vector_retriever(graph_store, embed_model, similarity_top_k=2).aretrieve(RADIUM)
    assert "Marie Curie discovered polonium and radium" in nodes[0].node.get_content()
    nodes = await _vector_retriever(graph_store, embed_model, similarity_top_k=2).aretrieve(
        "Where did Alan Turing work?"
    )
    assert "Bletchley Park" in nodes[0].node.get_content()


def test_khora_memories_are_visible_to_llama_index(li_kb: KhoraSync, li_namespace, graph_store, embed_model):
    li_kb.create_namespace(namespace=li_namespace)
    text = "Grace Hopper worked with Howard Aiken at Harvard University in Cambridge."
    li_kb.remember(text, namespace=li_namespace, external_id="hopper", metadata={"field": "compilers"})

    entity, chunk = graph_store.get(ids=["Grace Hopper", "hopper"])
    assert isinstance(entity, EntityNode) and entity.name == "Grace Hopper"
    assert entity.properties["khora_id"] == entity_id(li_namespace, "Grace Hopper")
    assert entity.properties[TRIPLET_SOURCE_KEY] == "hopper"
    assert isinstance(chunk, ChunkNode) and chunk.text == text and chunk.properties["field"] == "compilers"
    (llama,) = graph_store.get_llama_nodes(["hopper"])
    assert llama.node_id == "hopper" and llama.get_content() == text

    triplets = graph_store.get_triplets(entity_names=["grace hopper"])  # names match case-insensitively
    assert triplets and all("Grace Hopper" in (t[0].name, t[2].name) for t in triplets)
    assert all(t[1].properties[TRIPLET_SOURCE_KEY] == "hopper" for t in triplets)

    query = VectorStoreQuery(
        query_embedding=embed_model.get_query_embedding("Grace Hopper"), similarity_top_k=1
    )
    nodes, scores = graph_store.vector_query(query)
    assert [n.name for n in nodes] == ["Grace Hopper"] and scores[0] > 0.5

    found = _vector_retriever(graph_store, embed_model, similarity_top_k=1).retrieve(
        "Who did Grace Hopper work with?"
    )
    assert found and text in found[0].node.get_content()


def test_entities_and_relations_written_through_llama_index_are_seen_by_khora(
    li_kb: KhoraSync, li_namespace, graph_store
):
    text = "Zorblax Prime is a cold planet that orbits the star Quuxar every ninety days."
    graph_store.upsert_nodes(
        [ChunkNode(text=text, id_="chunk-1", properties={"topic": "astro", "title": "Zorblax"})]
    )
    graph_store.upsert_nodes(
        [
            EntityNode(name="Zorblax Prime", label="PLANET", properties={"description": "a cold planet"}),
            EntityNode(name="Quuxar", label="STAR"),
        ]
    )
    graph_store.upsert_relations(
        [
            Relation(
                label="ORBITS",
                source_id="Zorblax Prime",
                target_id="Quuxar",
                properties={TRIPLET_SOURCE_KEY: "chunk-1", "weight": 2.0},
            ),
            Relation(label="NEAR", source_id="Quuxar", target_id="Vega"),  # a new end becomes an entity
            Relation(label="NEXT", source_id="chunk-1", target_id="chunk-2"),  # chunk edges are not stored
        ]
    )
    ns = li_namespace
    planet = li_kb.get_entity(entity_id(ns, "Zorblax Prime"), namespace=ns)
    assert planet is not None and planet.type == "PLANET" and planet.description == "a cold planet"
    related = {e.name for e in li_kb.find_related_entities(planet.id, namespace=ns, depth=2)}
    assert {"Quuxar", "Vega"} <= related
    assert li_kb.get_entity(entity_id(ns, "chunk-2"), namespace=ns) is None

    recalled = li_kb.recall("What does Zorblax Prime orbit?", namespace=ns)
    assert recalled.chunks[0].content == text
    assert recalled.documents[0].external_id == "chunk-1" and recalled.documents[0].title == "Zorblax"
    assert ("Zorblax Prime", "ORBITS", "Quuxar") in {
        (r.source_name, r.type, r.target_name) for r in recalled.relationships
    }

    (orbit,) = graph_store.get_triplets(relation_names=["ORBITS"])
    assert (orbit[0].name, orbit[0].label, orbit[2].name, orbit[2].label) == (
        "Zorblax Prime",
        "PLANET",
        "Quuxar",
        "STAR",
    )
    assert orbit[1].properties["weight"] == 2.0 and orbit[1].properties[TRIPLET_SOURCE_KEY] == "chunk-1"
    assert graph_store.get_triplets(relation_names=["ORBITS"], properties={"weight": 2.0}) == [orbit]
    assert graph_store.get_triplets(relation_names=["ORBITS"], properties={"weight": 3.0}) == []
    assert graph_store.get_triplets() == []

    rel_map = graph_store.get_rel_map([EntityNode(name="Zorblax Prime")], depth=2)
    labels = [t[1].label for t in rel_map]
    assert "ORBITS" in labels and "NEAR" in labels
    assert labels.index("ORBITS") < labels.index("NEAR")  # nearest first
    assert "ORBITS" not in [
        t[1].label
        for t in graph_store.get_rel_map([EntityNode(name="Zorblax Prime")], ignore_rels=["ORBITS"])
    ]
    assert len(graph_store.get_rel_map([EntityNode(name="Zorblax Prime")], depth=2, limit=1)) == 1

    by_props = graph_store.get(properties={"topic": "astro"})
    assert [n.id for n in by_props] == ["chunk-1"]
    assert [n.id for n in graph_store.get(properties={"description": "a cold planet"})] == ["Zorblax Prime"]
    assert {n.id for n in graph_store.get()} >= {"Zorblax Prime", "Quuxar", "Vega", "chunk-1"}
    assert graph_store.get(ids=[]) == []  # no ids named: nothing (not the whole graph)


def test_vector_query_filters_node_ids_and_dimensions(
    li_kb: KhoraSync, li_namespace, graph_store, embed_model
):
    graph_store.upsert_nodes(
        [
            EntityNode(name="Zorblax Prime", label="PLANET"),
            EntityNode(name="Quuxar", label="STAR"),
            EntityNode(name="Vega", label="STAR"),
        ]
    )
    vector = embed_model.get_query_embedding("the planet Zorblax Prime")
    nodes, scores = graph_store.vector_query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3))
    assert nodes[0].name == "Zorblax Prime" and scores == sorted(scores, reverse=True) and len(nodes) == 3
    stars = MetadataFilters(filters=[MetadataFilter(key="label", value="STAR")])
    nodes, _ = graph_store.vector_query(
        VectorStoreQuery(query_embedding=vector, similarity_top_k=3, filters=stars)
    )
    assert {n.name for n in nodes} == {"Quuxar", "Vega"}
    nodes, _ = graph_store.vector_query(
        VectorStoreQuery(query_embedding=vector, similarity_top_k=3, node_ids=["Vega"])
    )
    assert [n.name for n in nodes] == ["Vega"]
    nodes, _ = graph_store.vector_query(VectorStoreQuery(query_str="Quuxar", similarity_top_k=1))
    assert [n.name for n in nodes] == ["Quuxar"]
    with pytest.raises(InvalidInputError, match="KhoraEmbedding"):
        graph_store.vector_query(VectorStoreQuery(query_embedding=[0.1] * 7, similarity_top_k=1))
    with pytest.raises(InvalidInputError):
        graph_store.vector_query(VectorStoreQuery(similarity_top_k=1))


def test_delete_entities_documents_and_llama_nodes(
    li_kb: KhoraSync, li_namespace, graph_store, documents, embed_model
):
    _index(graph_store, documents, embed_model)
    ns = li_namespace
    curie = li_kb.recall(RADIUM, namespace=ns).chunks[0]
    with pytest.raises(InvalidInputError, match="chunk id"):
        graph_store.delete(ids=[curie.id])

    assert li_kb.get_entity(entity_id(ns, "Pierre Curie"), namespace=ns) is not None
    graph_store.delete(entity_names=["Pierre Curie"])
    assert li_kb.get_entity(entity_id(ns, "Pierre Curie"), namespace=ns) is None

    node_id = next(
        d for d in li_kb.recall(RADIUM, namespace=ns).documents if d.id == curie.document_id
    ).external_id
    graph_store.delete(ids=[node_id])
    assert graph_store.get(ids=[node_id]) == []
    assert all("Marie Curie" not in c.content for c in li_kb.recall(RADIUM, namespace=ns).chunks)
    assert (
        li_kb.get_entity(entity_id(ns, "Marie Curie"), namespace=ns) is None
    )  # only that text mentioned her

    graph_store.delete_llama_nodes(ref_doc_ids=[documents[0].doc_id])
    assert li_kb.stats(ns).documents == 1
    graph_store.delete(properties={"topic": "computing"})
    assert li_kb.stats(ns).documents == 0


class _RuleExtractor(TransformComponent):
    """A LlamaIndex kg_extractor without a model: one fixed triple per node that names both ends."""

    def __call__(self, nodes, **kwargs):
        for node in nodes:
            text = node.get_content()
            ents, rels = [], []
            if "Ada Lovelace" in text and "Charles Babbage" in text:
                ents = [
                    EntityNode(name="Ada Lovelace", label="PERSON"),
                    EntityNode(name="Charles Babbage", label="PERSON"),
                ]
                rels = [Relation(label="WORKED_WITH", source_id="Ada Lovelace", target_id="Charles Babbage")]
            node.metadata[KG_NODES_KEY] = ents
            node.metadata[KG_RELATIONS_KEY] = rels
        return nodes


def test_graph_store_does_not_double_what_llama_index_extracted(
    li_kb: KhoraSync, li_namespace, documents, embed_model
):
    store = KhoraPropertyGraphStore(li_kb, namespace=li_namespace)  # khora_extraction off by default
    PropertyGraphIndex.from_documents(
        documents[:1], property_graph_store=store, kg_extractors=[_RuleExtractor()], embed_model=embed_model
    )
    ns = li_namespace
    edges = store.get_triplets(entity_names=["Ada Lovelace", "Charles Babbage"])
    assert [(t[0].name, t[1].label, t[2].name) for t in edges] == [
        ("Ada Lovelace", "WORKED_WITH", "Charles Babbage")
    ]
    assert {n.id for n in store.get() if not isinstance(n, ChunkNode)} == {"Ada Lovelace", "Charles Babbage"}
    stats = li_kb.stats(ns)
    assert (stats.documents, stats.entities, stats.relationships) == (1, 2, 1)
    assert "Ada Lovelace" in li_kb.recall("Who wrote the first algorithm?", namespace=ns).chunks[0].content

    # With Khora's extractor on, the same text gains Khora's own entities (what doubled relations).
    other_ns = f"{ns}-khora"
    both = KhoraPropertyGraphStore(li_kb, namespace=other_ns, khora_extraction=True)
    try:
        PropertyGraphIndex.from_documents(
            documents[:1],
            property_graph_store=both,
            kg_extractors=[_RuleExtractor()],
            embed_model=embed_model,
        )
        names = {n.id for n in both.get() if not isinstance(n, ChunkNode)}
        assert {"Ada Lovelace", "Charles Babbage"} < names  # Khora found more (Analytical Engine, London...)
    finally:
        li_kb.delete_namespace(other_ns)


def test_delete_by_relation_label_keeps_entities_and_other_relations(
    li_kb: KhoraSync, li_namespace, graph_store
):
    graph_store.upsert_nodes(
        [EntityNode(name="Zorblax Prime", label="PLANET"), EntityNode(name="Quuxar", label="STAR")]
    )
    graph_store.upsert_relations(
        [
            Relation(label="ORBITS", source_id="Zorblax Prime", target_id="Quuxar"),
            Relation(label="ORBITS", source_id="Vega", target_id="Quuxar"),
            Relation(label="NEAR", source_id="Quuxar", target_id="Vega"),
        ]
    )
    other_ns = f"{li_namespace}-other"
    other = KhoraPropertyGraphStore(li_kb, namespace=other_ns)
    try:
        other.upsert_relations([Relation(label="ORBITS", source_id="Zorblax Prime", target_id="Quuxar")])
        graph_store.delete(relation_names=["ORBITS", "NO_SUCH_LABEL"])
        assert graph_store.get_triplets(relation_names=["ORBITS"]) == []
        assert [
            (t[0].name, t[1].label, t[2].name) for t in graph_store.get_triplets(entity_names=["Quuxar"])
        ] == [("Quuxar", "NEAR", "Vega")]
        assert {n.id for n in graph_store.get()} == {"Zorblax Prime", "Quuxar", "Vega"}  # entities stay
        assert len(other.get_triplets(relation_names=["ORBITS"])) == 1  # another namespace untouched
        recalled = li_kb.find_related_entities(
            entity_id(li_namespace, "Zorblax Prime"), namespace=li_namespace
        )
        assert recalled == []
    finally:
        li_kb.delete_namespace(other_ns)


def test_schema_and_structured_queries(li_stack: str, li_kb: KhoraSync, li_namespace, graph_store):
    graph_store.upsert_nodes(
        [EntityNode(name="Zorblax Prime", label="PLANET"), EntityNode(name="Quuxar", label="STAR")]
    )
    graph_store.upsert_relations([Relation(label="ORBITS", source_id="Zorblax Prime", target_id="Quuxar")])
    schema = graph_store.get_schema(refresh=True)
    assert schema["backend"] == li_stack and {"PLANET", "STAR"} <= set(schema["entity_labels"])
    assert ("PLANET", "ORBITS", "STAR") in schema["triplet_patterns"]
    text = graph_store.get_schema_str()
    assert "(PLANET)-[ORBITS]->(STAR)" in text

    query = "MATCH (e:Entity {namespace_id: $namespace_id}) RETURN e.name AS name ORDER BY name"
    if li_stack == "sqlite_lance":
        assert graph_store.supports_structured_queries is False
        with pytest.raises(UnsupportedGraphOperationError, match="Neo4j"):
            graph_store.structured_query(query)
        return
    assert graph_store.supports_structured_queries is True
    assert "RELATES" in text and "'ORBITS'" in text
    assert graph_store.structured_query(query) == [{"name": "Quuxar"}, {"name": "Zorblax Prime"}]
    other = KhoraPropertyGraphStore(li_kb, namespace=f"{li_namespace}-other")
    assert other.structured_query(query) == []  # $namespace_id scopes it
    rows = graph_store.structured_query(
        "MATCH (a:Entity {namespace_id: $namespace_id})-[r:RELATES {type: $t}]->(b) RETURN a.name AS a, b.name AS b",
        {"t": "ORBITS"},
    )
    assert rows == [{"a": "Zorblax Prime", "b": "Quuxar"}]
    with pytest.raises(InvalidInputError):
        graph_store.structured_query(query, {"namespace_id": "someone-else"})
    with pytest.raises(InvalidInputError, match="rejected"):
        graph_store.structured_query("MATCH (n RETURN n")


def test_structured_query_is_read_only_unless_writes_are_allowed(
    li_stack: str, li_kb: KhoraSync, li_namespace, graph_store
):
    if li_stack == "sqlite_lance":  # no Cypher engine: every statement is refused, writes too
        with pytest.raises(UnsupportedGraphOperationError):
            KhoraPropertyGraphStore(li_kb, namespace=li_namespace, allow_cypher_writes=True).structured_query(
                "CREATE (:Entity {name: 'x'})"
            )
        return
    other_ns = f"{li_namespace}-victim"
    victim = KhoraPropertyGraphStore(li_kb, namespace=other_ns)
    try:
        victim.upsert_nodes([EntityNode(name="Quuxar", label="STAR")])
        graph_store.upsert_nodes([EntityNode(name="Zorblax Prime", label="PLANET")])
        names = "MATCH (e:Entity {namespace_id: $ns}) RETURN e.name AS name ORDER BY name"
        # Not namespace-scoped (documented): Cypher that ignores $namespace_id reads other namespaces.
        assert graph_store.structured_query(names, {"ns": other_ns}) == [{"name": "Quuxar"}]

        writes = [
            "MATCH (e:Entity {namespace_id: $ns}) DETACH DELETE e",
            "MATCH (e:Entity {namespace_id: $ns}) SET e.name = 'pwned'",
            "CREATE (:Entity {namespace_id: $ns, id: 'x', name: 'Intruder'})",
            "MERGE (e:Entity {namespace_id: $ns, id: 'y'}) RETURN e.id AS id",
        ]
        for statement in writes:
            with pytest.raises(ReadOnlyQueryError, match="read-only"):
                graph_store.structured_query(statement, {"ns": other_ns})
        assert graph_store.structured_query(names, {"ns": other_ns}) == [{"name": "Quuxar"}]
        assert [n.id for n in victim.get()] == ["Quuxar"]
        assert li_kb.get_entity(entity_id(other_ns, "Quuxar"), namespace=other_ns) is not None

        writer = KhoraPropertyGraphStore(li_kb, namespace=li_namespace, allow_cypher_writes=True)
        rows = writer.structured_query(
            "MATCH (e:Entity {namespace_id: $namespace_id, name: 'Zorblax Prime'}) "
            "SET e.description = $d RETURN e.description AS d",
            {"d": "a cold planet"},
        )
        assert rows == [{"d": "a cold planet"}]
        planet = li_kb.get_entity(entity_id(li_namespace, "Zorblax Prime"), namespace=li_namespace)
        assert planet is not None and planet.description == "a cold planet"
    finally:
        li_kb.delete_namespace(other_ns)


async def test_async_twins_share_the_implementation(li_kb: KhoraSync, li_namespace, graph_store, embed_model):
    await graph_store.aupsert_nodes(
        [ChunkNode(text="Quuxar is a blue giant star.", id_="c-1"), EntityNode(name="Quuxar", label="STAR")]
    )
    await graph_store.aupsert_relations([Relation(label="NEAR", source_id="Quuxar", target_id="Vega")])
    assert {n.id for n in await graph_store.aget(ids=["Quuxar", "c-1"])} == {"Quuxar", "c-1"}
    assert [t[1].label for t in await graph_store.aget_triplets(entity_names=["Vega"])] == ["NEAR"]
    assert [t[2].name for t in await graph_store.aget_rel_map([EntityNode(name="Vega")], depth=1)] == ["Vega"]
    vector = await embed_model.aget_query_embedding("Quuxar")
    nodes, _ = await graph_store.avector_query(VectorStoreQuery(query_embedding=vector, similarity_top_k=1))
    assert [n.name for n in nodes] == ["Quuxar"]
    assert "NEAR" in (await graph_store.aget_schema(refresh=True))["relation_labels"]
    assert "Triplet patterns" in await graph_store.aget_schema_str()
    assert [n.get_content() for n in await graph_store.aget_llama_nodes(["c-1"])] == [
        "Quuxar is a blue giant star."
    ]
    await graph_store.adelete(entity_names=["Vega"])
    assert await graph_store.aget(ids=["Vega"]) == []
    await graph_store.adelete_llama_nodes(node_ids=["c-1"])
    assert await graph_store.aget(ids=["c-1"]) == []


def test_namespaces_do_not_see_each_other(li_kb: KhoraSync, li_namespace, graph_store, embed_model):
    graph_store.upsert_nodes([EntityNode(name="Zorblax Prime", label="PLANET")])
    other_ns = f"{li_namespace}-other"
    try:
        other = KhoraPropertyGraphStore(li_kb, namespace=other_ns)
        other.upsert_nodes([EntityNode(name="Quuxar", label="STAR")])
        assert [n.id for n in other.get()] == ["Quuxar"]
        assert other.get(ids=["Zorblax Prime"]) == []
        vector = embed_model.get_query_embedding("Zorblax Prime")
        nodes, _ = other.vector_query(VectorStoreQuery(query_embedding=vector, similarity_top_k=5))
        assert [n.name for n in nodes] == ["Quuxar"]
    finally:
        li_kb.delete_namespace(other_ns)


def test_entity_and_relation_properties_are_kept_merged_and_filtered(
    li_kb: KhoraSync, li_namespace, embed_model
):
    """Issue 42 item 7: the properties LlamaIndex gives entities and relations come back from
    every read, merge key by key when written again, and are what ``properties=`` filters
    on; Khora's read-only keys stay Khora's."""
    graph_store = KhoraPropertyGraphStore(li_kb, namespace=li_namespace)  # no Khora extraction
    graph_store.upsert_nodes([ChunkNode(text="Ada Lovelace wrote to Charles Babbage.", id_="letters")])
    graph_store.upsert_nodes(
        [
            EntityNode(
                name="Ada Lovelace",
                label="PERSON",
                properties={
                    "description": "a mathematician",
                    "born": 1815,
                    "works": {"notes": ["Note G"], "year": 1843},
                    "seen": datetime(2024, 1, 2, tzinfo=timezone.utc),
                    "khora_id": "not-mine",  # read-only: Khora's id wins
                },
            ),
            EntityNode(name="Charles Babbage", label="PERSON"),
        ]
    )
    graph_store.upsert_nodes(
        [EntityNode(name="Ada Lovelace", label="PERSON", properties={"born": 1816, "city": "London"})]
    )
    graph_store.upsert_relations(
        [
            Relation(
                label="WROTE_TO",
                source_id="Ada Lovelace",
                target_id="Charles Babbage",
                properties={TRIPLET_SOURCE_KEY: "letters", "weight": 2.0, "since": 1833, "medium": "letter"},
            )
        ]
    )
    graph_store.upsert_relations(
        [
            Relation(
                label="WROTE_TO",
                source_id="Ada Lovelace",
                target_id="Charles Babbage",
                properties={"medium": "post"},
            )
        ]
    )
    ns = li_namespace
    (ada,) = graph_store.get(ids=["Ada Lovelace"])
    assert {k: ada.properties[k] for k in ("born", "works", "seen", "city", "description")} == {
        "born": 1816,
        "works": {"notes": ["Note G"], "year": 1843},
        "seen": "2024-01-02T00:00:00+00:00",
        "city": "London",
        "description": "a mathematician",
    }
    assert ada.properties["khora_id"] == entity_id(ns, "Ada Lovelace")
    ada_read = li_kb.get_entity(entity_id(ns, "Ada Lovelace"), namespace=ns)
    assert ada_read.description == "a mathematician"
    assert ada_read.properties["born"] == 1816 and ada_read.properties["city"] == "London"

    (triplet,) = graph_store.get_triplets(relation_names=["WROTE_TO"])
    assert triplet[0].properties["born"] == 1816 and triplet[2].properties.get("born") is None
    assert {k: triplet[1].properties.get(k) for k in ("since", "medium", "weight")} == {
        "since": 1833,
        "medium": "post",
        "weight": 2.0,  # written again without a weight or a source: both kept, as properties are
    }
    assert triplet[1].properties[TRIPLET_SOURCE_KEY] == "letters"
    assert graph_store.get_triplets(properties={"medium": "post"}) == [triplet]
    assert graph_store.get_triplets(properties={"medium": "letter"}) == []
    assert graph_store.get_triplets(entity_names=["Charles Babbage"], properties={"city": "London"}) == [
        triplet
    ]
    (mapped,) = graph_store.get_rel_map([EntityNode(name="Charles Babbage")], depth=1)
    assert mapped[1].properties["since"] == 1833 and mapped[0].properties["city"] == "London"

    assert [n.id for n in graph_store.get(properties={"city": "London"})] == ["Ada Lovelace"]
    assert graph_store.get(properties={"born": 1815}) == []
    only_ada = MetadataFilters(filters=[MetadataFilter(key="born", value=1816)])
    vector = embed_model.get_query_embedding("Charles Babbage")
    nodes, _ = graph_store.vector_query(
        VectorStoreQuery(query_embedding=vector, similarity_top_k=2, filters=only_ada)
    )
    assert [n.name for n in nodes] == ["Ada Lovelace"]

    with pytest.raises(InvalidInputError, match="'tags' is of type set"):
        graph_store.upsert_nodes([EntityNode(name="Vega", properties={"tags": {"star"}})])
    with pytest.raises(InvalidInputError, match="'at' is of type object"):
        graph_store.upsert_relations(
            [Relation(label="NEAR", source_id="Ada Lovelace", target_id="Vega", properties={"at": object()})]
        )
    assert graph_store.get(ids=["Vega"]) == []  # nothing was written

    graph_store.delete(properties={"city": "London"})
    assert (
        graph_store.get(ids=["Ada Lovelace"]) == []
        and graph_store.get_triplets(relation_names=["WROTE_TO"]) == []
    )
