"""The framework-neutral pieces: abstention policy, chunk metadata, the Khora handle."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from khora_core import Khora, KhoraConfig, KhoraSync
from khora_core.errors import ConfigError, InvalidInputError, KhoraAbstention
from khora_core.models import DocumentProjection, RecallChunk, RecallResult
from khora_integrations._bridge import KhoraRef, apply_abstention_policy, chunk_metadata

T = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def _result(should_abstain: bool | None) -> RecallResult:
    info = (
        {}
        if should_abstain is None
        else {
            "abstention_signals": {
                "should_abstain": should_abstain,
                "combined_score": 0.8,
                "chunks_empty": False,
            }
        }
    )
    return RecallResult(
        query="what?",
        namespace_id="ns",
        chunks=[
            RecallChunk(
                id="c1",
                document_id="d1",
                content="Ada met Babbage.",
                score=1.0,
                index=2,
                start_char=10,
                end_char=26,
                channels=["vector", "graph"],
                channel_scores={"vector": 0.61, "graph": 3.0},
                channel_ranks={"vector": 1, "graph": 2},
                vector_similarity=0.61,
                entity_ids=["e1", "e2"],
                entity_names=["Ada", "Babbage"],
                metadata={"tier": "gold"},
            )
        ],
        documents=[
            DocumentProjection(
                id="d1",
                namespace_id="ns",
                title="Notes",
                created_at=T,
                occurred_at=T,
                source="linear",
                external_id="ext-1",
                metadata={"tier": "gold", "score": "user value", "when": T},
                tags=["a"],
            )
        ],
        engine_info=info,
    )


@pytest.mark.parametrize(
    ("policy", "abstain", "keep"),
    [
        ("flag", True, True),
        ("flag", False, True),
        ("empty", True, False),
        ("empty", False, True),
        ("raise", False, True),
        ("flag", None, True),
        ("empty", None, True),
        ("raise", None, True),
    ],
)
def test_abstention_policy(policy, abstain, keep):
    kept, signals = apply_abstention_policy(_result(abstain), policy)
    assert kept is keep
    assert signals["should_abstain"] is bool(abstain)
    if abstain is not None:
        assert signals["combined_score"] == 0.8


def test_raise_policy_carries_the_signals():
    with pytest.raises(KhoraAbstention) as info:
        apply_abstention_policy(_result(True), "raise")
    assert info.value.query == "what?"
    assert info.value.signals["combined_score"] == 0.8


def test_unknown_policy():
    with pytest.raises(InvalidInputError, match="abstain"):
        apply_abstention_policy(_result(False), "ignore")


def test_chunk_metadata_carries_system_fields_user_metadata_scores_channels_entities():
    result = _result(False)
    meta = chunk_metadata(result, result.chunks[0])
    assert meta["tier"] == "gold"
    assert meta["when"] == T.isoformat()  # JSON-friendly
    assert meta["title"] == "Notes"
    assert meta["source"] == "linear"
    assert meta["external_id"] == "ext-1"
    assert meta["occurred_at"] == T.isoformat()
    assert meta["created_at"] == T.isoformat()
    assert meta["tags"] == ["a"]
    assert "source_url" not in meta  # unset system fields are left out
    assert meta["score"] == 1.0  # Khora's keys win over a user key of the same name
    assert meta["channel_scores"] == {"vector": 0.61, "graph": 3.0}
    assert meta["vector_similarity"] == 0.61
    assert meta["channels"] == ["vector", "graph"]
    assert meta["entities"] == ["Ada", "Babbage"]
    assert meta["entity_ids"] == ["e1", "e2"]
    assert (meta["chunk_id"], meta["document_id"], meta["chunk_index"]) == ("c1", "d1", 2)
    assert meta["namespace_id"] == "ns"


def test_chunk_metadata_without_the_document():
    result = _result(False).model_copy(update={"documents": []})
    meta = chunk_metadata(result, result.chunks[0])
    assert meta["tier"] == "gold"
    assert "source" not in meta


def test_ref_rejects_kb_plus_owner_arguments_and_non_khora():
    with pytest.raises(ConfigError, match="not both"):
        KhoraRef(Khora(data_dir="/nonexistent"), embedder=object())
    with pytest.raises(ConfigError, match="Khora or KhoraSync"):
        KhoraRef("not a khora")  # type: ignore[arg-type]


def test_ref_knows_which_loop_its_khora_lives_on():
    assert KhoraRef(KhoraSync(data_dir="/nonexistent")).on_bridge is True
    assert KhoraRef(Khora(data_dir="/nonexistent")).on_bridge is False
    owned = KhoraRef(config=KhoraConfig(storage={"data_dir": "/nonexistent"}))
    assert owned.on_bridge is True and owned.owned is True
