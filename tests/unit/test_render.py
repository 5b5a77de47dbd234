"""Terminal rendering of recall results (shared by the CLI and the demo)."""

from __future__ import annotations

from datetime import datetime, timezone

from khora_core.models import (
    DocumentProjection,
    EntityProjection,
    Namespace,
    NamespaceStats,
    RecallChunk,
    RecallResult,
    RelationshipProjection,
)
from khora_core.render import excerpt, format_namespaces, format_result, format_stats

WHEN = datetime(2024, 3, 18, 13, 0, tzinfo=timezone.utc)


def _result(**engine_info: object) -> RecallResult:
    long_text = "Tube drops fell to one in 2,500 after the switch to Talon grippers. " * 10
    return RecallResult(
        query="Whose grippers cut tube drops?",
        namespace_id="ns",
        chunks=[
            RecallChunk(
                id="c1",
                document_id="d1",
                content=long_text,
                score=1.0,
                channels=["vector", "graph"],
                vector_similarity=0.58,
                entity_names=["Talon"],
            ),
            RecallChunk(id="c2", document_id="d2", content="Second chunk.", score=0.4, channels=["graph"]),
        ],
        entities=[
            EntityProjection(id="e1", name="Northwind Robotics", type="ORGANIZATION"),
            EntityProjection(id="e2", name="Halcyon Bio", type="ORGANIZATION"),
        ],
        relationships=[
            RelationshipProjection(id="r1", source_id="e1", target_id="e2", type="SUPPLIES", document_id="d1")
        ],
        documents=[
            DocumentProjection(
                id="d1", namespace_id="ns", title="Pilot review", created_at=WHEN, occurred_at=WHEN
            ),
            DocumentProjection(id="d2", namespace_id="ns", title=None, created_at=WHEN),
        ],
        engine_info=dict(engine_info),
    )


def test_chunks_are_numbered_with_title_date_channels_and_excerpt():
    text = format_result(_result(), excerpt_chars=120)
    assert " 1. [1.000] Pilot review  (2024-03-18)  via vector, graph  cos=0.580" in text
    assert " 2. [0.400] d2  (undated)  via graph" in text
    assert "entities: Talon" in text
    assert "Tube drops fell" in text and " ..." in text
    assert text.count("Tube drops fell") == 2  # cut near 120 characters, not the whole chunk


def test_entities_relationships_use_names():
    text = format_result(_result())
    assert "entities (2): Northwind Robotics (ORGANIZATION), Halcyon Bio (ORGANIZATION)" in text
    assert "Northwind Robotics -[SUPPLIES]-> Halcyon Bio" in text


def test_routing_filter_and_abstention_sections():
    plain = format_result(_result())
    assert "routing: (not reported)" in plain
    assert "filter pushdown" not in plain
    assert "abstention: (not reported)" in plain

    text = format_result(
        _result(
            routing={
                "complexity": "moderate",
                "depth": 1,
                "use_graph": True,
                "reasons": ["relationship:with"],
            },
            filter={
                "pushed_down": False,
                "post_filtered": True,
                "pushed_keys": ["metadata.tier"],
                "post_filtered_keys": ["metadata.team.name"],
                "unenforced_keys": [],
                "channels": {"graph": {"pushed_keys": [], "post_filtered_keys": ["metadata.tier"]}},
            },
            abstention_signals={"top_score_low": True, "combined_score": 0.75, "should_abstain": True},
            max_raw_vector_score=0.12,
        )
    )
    assert "routing: complexity=moderate  depth=1  use_graph=True  reasons=[relationship:with]" in text
    assert "pushed_keys=[metadata.tier]  post_filtered_keys=[metadata.team.name]  unenforced_keys=[]" in text
    assert "graph: pushed=[] post_filtered=[metadata.tier]" in text
    assert "abstention: ABSTAIN" in text
    assert "combined_score=0.750" in text and "max_raw_vector_score=0.120" in text
    assert "flags=top_score_low" in text


def test_empty_result():
    text = format_result(RecallResult(query="q", namespace_id="ns"))
    assert "chunks (0):\n   (none)" in text
    assert "entities (0): (none)" in text


def test_excerpt_stats_namespaces():
    assert excerpt("a  b\n c") == "a b c"
    assert excerpt("word " * 100, 20).endswith(" ...")
    assert len(excerpt("word " * 100, 20)) <= 24
    stats = NamespaceStats(namespace_id="n", documents=2, chunks=5, entities=7, relationships=3)
    assert format_stats(stats) == "namespace n: 2 documents, 5 chunks, 7 entities, 3 relationships"
    listing = format_namespaces(
        [
            Namespace(namespace_id="b", created_at=WHEN),
            Namespace(namespace_id="a", name="Alpha", created_at=WHEN),
        ]
    )
    assert listing.splitlines()[0].startswith("a  name=Alpha  created 2024-03-18T13:00:00")
    assert format_namespaces([]) == "(no namespaces)"


def test_repeated_relationships_are_shown_once_with_a_count():
    result = _result()
    again = result.relationships[0].model_copy(update={"id": "r2", "document_id": "d2"})
    other = RelationshipProjection(
        id="r3", source_id="e2", target_id="e1", type="BUYS_FROM", document_id="d2", source_name="Halcyon Bio"
    )
    text = format_result(result.model_copy(update={"relationships": [*result.relationships, again, other]}))
    assert "Northwind Robotics -[SUPPLIES]-> Halcyon Bio (x2)" in text
    assert "Halcyon Bio -[BUYS_FROM]-> Northwind Robotics" in text
    assert text.count("-[SUPPLIES]->") == 1


def test_chunk_entity_names_are_capped():
    result = _result()
    chunk = result.chunks[0].model_copy(update={"entity_names": [f"E{i}" for i in range(12)]})
    text = format_result(result.model_copy(update={"chunks": [chunk]}), max_chunk_entities=4)
    assert "entities: E0, E1, E2, E3, ... (+8 more)" in text
