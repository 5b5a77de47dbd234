"""Abstention flags and the combined score."""

from __future__ import annotations

import pytest

from khora_core.retrieval.abstention import abstention_signals


def sig(**kw: object):  # type: ignore[no-untyped-def]
    base = {"n_chunks": 5, "n_entities": 3, "max_raw_vector_score": 0.55}
    return abstention_signals(**{**base, **kw})  # type: ignore[arg-type]


def test_on_topic_does_not_abstain() -> None:
    s = sig()
    assert not s.should_abstain and not s.top_score_low and s.combined_score == 0.0


@pytest.mark.parametrize("top", [0.05, 0.15, 0.22, 0.25])
def test_off_topic_abstains(top: float) -> None:
    s = sig(max_raw_vector_score=top)
    assert s.top_score_low and s.should_abstain


@pytest.mark.parametrize("top", [0.4, 0.45, 0.6])
def test_on_topic_range(top: float) -> None:
    assert not sig(max_raw_vector_score=top).should_abstain
    # even with no entities extracted, a good text match still answers
    assert not sig(max_raw_vector_score=top, n_entities=0).should_abstain


def test_combined_formula_at_threshold() -> None:
    s = sig(max_raw_vector_score=0.3)
    assert not s.top_score_low  # 0.3 is not below 0.3
    assert s.combined_score == pytest.approx(0.5)
    assert s.should_abstain  # >= threshold
    s = sig(max_raw_vector_score=0.35, n_entities=0)
    assert s.combined_score == pytest.approx(1 - 0.75 * 0.7)


def test_empty_result() -> None:
    s = sig(n_chunks=0, n_entities=0)
    assert s.chunks_empty and s.entities_empty and s.chunks_below_min
    assert s.combined_score == 1.0 and s.should_abstain


def test_chunks_below_min() -> None:
    s = sig(n_chunks=2, min_chunks=3)
    assert s.chunks_below_min and not s.chunks_empty


def test_graph_only_recall() -> None:
    no_link = sig(max_raw_vector_score=None)
    assert no_link.top_score_low and no_link.should_abstain
    exact_link = sig(max_raw_vector_score=None, other_evidence=1.0)
    assert exact_link.top_score_low  # the flag stays honest
    assert exact_link.combined_score == pytest.approx(0.4) and not exact_link.should_abstain


def test_as_dict_keys() -> None:
    assert set(sig().as_dict()) == {
        "chunks_empty",
        "entities_empty",
        "chunks_below_min",
        "top_score_low",
        "combined_score",
        "should_abstain",
    }
