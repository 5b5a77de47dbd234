"""Graph assembly from extractions, with a deterministic LangChain fake embedder."""

from __future__ import annotations

from langchain_core.embeddings import DeterministicFakeEmbedding

from khora_core.embedding.adapters import LangChainEmbedder
from khora_core.ingest.extract_base import ChunkExtraction, ExtractedEntity, ExtractedRelation
from khora_core.ingest.graph_build import build_graph, relationship_id
from khora_core.ingest.names import NameVectors
from khora_core.ingest.resolve import EntityResolver, entity_id
from khora_core.models import Entity

TEXTS = [
    "Dr. Alice Chen works at Acme Corp. Alice Chen leads the team.",
    "Acme Corp hired Bob. Alice Chen works at Acme Corp again.",
    "Later, Globex and Acme Corp talked.",  # not core: keyword links only
]


def _extractions() -> dict[str, ChunkExtraction]:
    works = ExtractedRelation("Alice Chen", "Acme Corp", "WORKS_AT", "works at")
    return {
        "c0": ChunkExtraction(
            "c0",
            entities=[
                ExtractedEntity("Dr. Alice Chen", "PERSON"),
                ExtractedEntity("Acme Corp", "ORGANIZATION"),
            ],
            relations=[works],
        ),
        "c1": ChunkExtraction(
            "c1",
            entities=[ExtractedEntity("Acme Corp", "ORGANIZATION"), ExtractedEntity("Alice Chen", "PERSON")],
            relations=[works],
        ),
    }


async def test_entities_mentions_and_relationships() -> None:
    stored = Entity(id="globex-id", namespace_id="ns", name="Globex", type="ORGANIZATION", mention_count=4)
    parts = await build_graph(
        namespace_id="ns",
        document_id="doc",
        chunk_ids=["c0", "c1", "c2"],
        chunk_texts=TEXTS,
        extractions=_extractions(),
        existing=[stored],
        resolver=EntityResolver(),
        names=NameVectors(LangChainEmbedder(DeterministicFakeEmbedding(size=8))),
    )
    by_name = {e.name: e for e in parts.entities}
    assert set(by_name) == {"Alice Chen", "Acme Corp", "Globex"}
    alice = by_name["Alice Chen"]
    assert alice.id == entity_id("ns", "Alice Chen") and alice.aliases == ["Dr. Alice Chen"]
    assert alice.embedding is not None and len(alice.embedding) == 8
    assert by_name["Globex"].id == "globex-id" and by_name["Globex"].mention_count == 1

    counts = {(m.entity_id, m.chunk_id): m.count for m in parts.mentions}
    acme = by_name["Acme Corp"].id
    assert counts[(acme, "c0")] == 1 and counts[(acme, "c1")] == 2 and counts[(acme, "c2")] == 1
    assert counts[(alice.id, "c0")] == 2  # "Dr. Alice Chen" and "Alice Chen"
    assert ("globex-id", "c2") in counts and (alice.id, "c2") not in counts
    assert by_name["Acme Corp"].mention_count == 4

    [rel] = parts.relationships
    assert rel.id == relationship_id("ns", alice.id, "WORKS_AT", acme, "doc")
    assert rel.weight == 2.0 and rel.chunk_id == "c0" and rel.document_id == "doc"


async def test_failed_chunks_contribute_only_keyword_links() -> None:
    extractions = _extractions()
    extractions["c1"] = ChunkExtraction("c1", failed=True, error="boom")
    parts = await build_graph(
        namespace_id="ns",
        document_id="doc",
        chunk_ids=["c0", "c1", "c2"],
        chunk_texts=TEXTS,
        extractions=extractions,
        existing=[],
        resolver=EntityResolver(),
        names=NameVectors(LangChainEmbedder(DeterministicFakeEmbedding(size=8))),
    )
    assert [r.weight for r in parts.relationships] == [1.0]
    chunks_with_mentions = {m.chunk_id for m in parts.mentions}
    assert chunks_with_mentions == {"c0", "c1", "c2"}
