"""MMR ordering."""

from __future__ import annotations

import numpy as np
import pytest

from khora_core.retrieval.mmr import mmr_order


def test_pure_relevance_keeps_order() -> None:
    embs = np.eye(4)
    assert mmr_order([0.9, 0.8, 0.7, 0.1], embs, lambda_=1.0) == [0, 1, 2, 3]


def test_near_duplicate_is_pushed_down() -> None:
    # 0 and 1 are the same passage; 2 is different and a bit less relevant.
    embs = [[1.0, 0.0], [1.0, 0.001], [0.0, 1.0]]
    order = mmr_order([1.0, 0.95, 0.8], embs, lambda_=0.5)
    assert order[0] == 0  # the top hit never changes
    assert order[1] == 2


def test_k_limits_picks_and_rest_follow_by_relevance() -> None:
    embs = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.7, 0.7]]
    order = mmr_order([1.0, 0.9, 0.5, 0.4], embs, lambda_=0.3, k=2)
    assert order[:2] == [0, 2]
    assert order[2:] == [1, 3]
    assert sorted(order) == [0, 1, 2, 3]


def test_all_equal_relevance_and_zero_vectors() -> None:
    order = mmr_order([0.5, 0.5, 0.5], [[0.0, 0.0], [1.0, 0.0], [1.0, 0.0]], lambda_=0.5)
    assert sorted(order) == [0, 1, 2]


def test_empty_and_mismatch() -> None:
    assert mmr_order([], np.zeros((0, 3))) == []
    with pytest.raises(ValueError, match="embeddings"):
        mmr_order([1.0, 0.5], [[1.0, 0.0]])


def test_duplicate_floor_demotes_near_duplicates_but_not_related_passages() -> None:
    # 0 is the question's passage, 1 a second hop on the same subject (cosine 0.6), 2 a
    # near-copy of 0 (cosine 0.99), 3 an unrelated, less relevant passage.
    related = [0.6, 0.8, 0.0]
    copy = [0.99, float(np.sqrt(1 - 0.99**2)), 0.0]
    embs = [[1.0, 0.0, 0.0], related, copy, [0.0, 0.0, 1.0]]
    relevance = [1.0, 0.9, 0.85, 0.8]
    # Classic MMR (floor 0) pushes the related passage below the unrelated one.
    assert mmr_order(relevance, embs, lambda_=0.5) == [0, 3, 1, 2]
    # With a floor of 0.8 only the near-copy is redundant: the related passage keeps its place.
    assert mmr_order(relevance, embs, lambda_=0.5, duplicate_floor=0.8) == [0, 1, 3, 2]
    with pytest.raises(ValueError, match="duplicate_floor"):
        mmr_order(relevance, embs, duplicate_floor=1.0)
