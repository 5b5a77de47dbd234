"""Fusion arithmetic against hand-computed values, and the no-dilution rules."""

from __future__ import annotations

import math
import random

import pytest

from khora_core.retrieval.fusion import (
    FusionPolicy,
    calibrated_similarity,
    confident_top,
    entity_specificity,
    evidence_weights,
    fuse,
    graph_quality,
    keep_anchor_order,
    keyword_quality,
    min_max,
    protect_top,
    ranks_from_scores,
    weighted_rrf,
    weighted_rrf_normalized,
)


def test_weighted_rrf_hand_computed() -> None:
    fused = weighted_rrf(
        {"vector": ["a", "b", "c"], "graph": ["b", "c", "d"]}, {"vector": 0.6, "graph": 0.4}, k=60
    )
    scores = {f.id: f.score for f in fused}
    assert scores["a"] == pytest.approx(0.6 / 61)
    assert scores["b"] == pytest.approx(0.6 / 62 + 0.4 / 61)
    assert scores["c"] == pytest.approx(0.6 / 63 + 0.4 / 62)
    assert scores["d"] == pytest.approx(0.4 / 63)
    assert [f.id for f in fused] == ["b", "c", "a", "d"]
    b = fused[0]
    assert b.ranks == {"vector": 2.0, "graph": 1.0}
    assert b.dominant == "vector"  # 0.6/62 > 0.4/61


def test_weighted_rrf_accepts_rank_maps_and_small_k() -> None:
    fused = weighted_rrf({"x": {"a": 1, "b": 1, "c": 3}}, {"x": 1.0}, k=1)
    scores = {f.id: f.score for f in fused}
    assert scores == {"a": pytest.approx(0.5), "b": pytest.approx(0.5), "c": pytest.approx(0.25)}
    # equal scores keep first-appearance order
    assert [f.id for f in fused] == ["a", "b", "c"]


def test_zero_weight_channel_contributes_nothing() -> None:
    fused = weighted_rrf({"vector": ["a", "b"], "graph": ["b"]}, {"vector": 1.0, "graph": 0.0})
    assert [f.id for f in fused] == ["a", "b"]
    assert fused[1].score == pytest.approx(1 / 62)


def test_ranks_from_scores_competition_ranking() -> None:
    ranks = ranks_from_scores([("a", 2.0), ("b", 3.0), ("c", 2.0), ("d", 1.0)])
    assert ranks == {"b": 1, "a": 2, "c": 2, "d": 4}


def test_min_max() -> None:
    assert min_max({"a": 0.3, "b": 0.9, "c": 0.6}) == pytest.approx({"a": 0.0, "b": 1.0, "c": 0.5})
    assert min_max({"a": 0.4, "b": 0.4}) == {"a": 1.0, "b": 1.0}
    assert min_max({}) == {}


def test_weighted_rrf_normalized_tiebreak_from_dominant_source() -> None:
    # "a" is 2nd in vector only, "b" 2nd in graph only, equal weights: equal RRF scores.
    scores = {
        "vector": {"t1": 0.9, "a": 0.85, "v_low": 0.1},
        "graph": {"t2": 10.0, "b": 2.0, "g_low": 0.0},
    }
    fused = weighted_rrf_normalized(scores, {"vector": 0.5, "graph": 0.5}, k=60)
    by_id = {f.id: f for f in fused}
    assert by_id["a"].score == pytest.approx(0.5 / 62)
    assert by_id["b"].score == pytest.approx(0.5 / 62)
    # tiebreak: the normalised score in each item's dominant channel
    assert by_id["a"].tiebreak == pytest.approx((0.85 - 0.1) / (0.9 - 0.1))
    assert by_id["b"].tiebreak == pytest.approx(0.2)
    ids = [f.id for f in fused]
    assert ids.index("a") < ids.index("b")
    assert set(ids[:2]) == {"t1", "t2"}


def test_evidence_weights_scale_by_quality() -> None:
    w = evidence_weights({"vector": 0.4, "graph": 0.6, "keyword": 0.3}, {"graph": 0.5, "keyword": 2.0})
    assert w == pytest.approx({"vector": 0.4, "graph": 0.3, "keyword": 0.3})


def test_graph_quality_is_strongest_entry_entity() -> None:
    assert graph_quality([]) == 0.0
    assert graph_quality([0.35, 0.5]) == pytest.approx(0.5)
    assert graph_quality([1.0, 0.2]) == 1.0


def test_entity_specificity_discounts_entities_named_in_many_chunks() -> None:
    assert entity_specificity(5, 100, common_share=0.05) == 1.0  # at the share: specific
    assert entity_specificity(1, 100, common_share=0.05) == 1.0
    assert entity_specificity(50, 100, common_share=0.05) == pytest.approx(math.log(2) / math.log(20))
    assert entity_specificity(10, 100, common_share=0.05) == pytest.approx(math.log(10) / math.log(20))
    assert entity_specificity(100, 100, common_share=0.05) == 0.0
    assert entity_specificity(250, 100, common_share=0.05) == 0.0  # repeated names: capped at all chunks
    assert entity_specificity(0, 100, common_share=0.05) == 1.0  # unknown count: one mention
    assert entity_specificity(90, 100, common_share=1.0) == 1.0  # off
    assert entity_specificity(3, 0, common_share=0.05) == 1.0  # no chunk count: no discount


def test_calibrated_similarity_rescales_from_the_acceptance_floor() -> None:
    assert calibrated_similarity(0.3, 0.3) == 0.0  # barely accepted: no evidence
    assert calibrated_similarity(0.65, 0.3) == pytest.approx(0.5)
    assert calibrated_similarity(1.0, 0.3) == 1.0
    assert calibrated_similarity(0.1, 0.3) == 0.0  # below the floor: clipped
    assert calibrated_similarity(0.4, 0.0) == pytest.approx(0.4)  # no floor: the cosine itself
    assert calibrated_similarity(0.99, 1.0) == 0.0


def test_keyword_quality_share_of_content_words() -> None:
    assert keyword_quality("Where does Alice Chen live?", "Alice Chen lives in Lisbon") == pytest.approx(
        2 / 3
    )
    assert keyword_quality("what is it", "anything") == 0.0  # only stop words
    assert keyword_quality("Alice", None) == 0.0


def test_confident_top() -> None:
    assert confident_top([0.62, 0.50, 0.4], min_score=0.4, margin=0.05)
    assert not confident_top([0.62, 0.60], min_score=0.4, margin=0.05)  # no margin
    assert not confident_top([0.35, 0.1], min_score=0.4, margin=0.05)  # too low
    assert confident_top([0.5], min_score=0.4, margin=0.05)
    assert not confident_top([], min_score=0.4, margin=0.05)


def test_protect_top_moves_anchor_first() -> None:
    fused = weighted_rrf({"g": ["x", "a"]}, {"g": 1.0})
    out = protect_top(fused, "a")
    assert [f.id for f in out] == ["a", "x"]
    assert out[0].score == pytest.approx(out[1].score)
    assert [f.id for f in protect_top(fused, "missing")] == [f.id for f in fused]


def test_keep_anchor_order_bounds_how_far_each_anchor_hit_moves() -> None:
    rng = random.Random(7)
    for _ in range(300):
        ids = [f"c{i}" for i in range(rng.randint(1, 40))]
        fused_order = rng.sample(ids, len(ids))
        anchor = rng.sample(ids, rng.randint(1, len(ids)))
        share = rng.choice([0.1, 0.3, 0.4, 0.5, 2 / 3, 1.0])
        fused = weighted_rrf({"x": fused_order}, {"x": 1.0})
        out = keep_anchor_order(fused, anchor, share)
        got = [f.id for f in out]
        assert sorted(got) == sorted(ids)
        for i, cid in enumerate(anchor, start=1):
            assert got.index(cid) + 1 <= math.ceil(round(i / share, 9))
        others = [c for c in fused_order if c not in anchor]
        assert [c for c in got if c not in anchor] == others  # the rest keep their order
        scores = [f.score for f in out]
        assert scores == sorted(scores, reverse=True)


def test_keep_anchor_order_share_zero_or_no_anchor_changes_nothing() -> None:
    fused = weighted_rrf({"g": ["a", "b", "c"]}, {"g": 1.0})
    assert [f.id for f in keep_anchor_order(fused, ["c", "b"], 0.0)] == ["a", "b", "c"]
    assert [f.id for f in keep_anchor_order(fused, [], 0.5)] == ["a", "b", "c"]
    assert [f.id for f in keep_anchor_order(fused, ["c", "b"], 1.0)] == ["c", "b", "a"]


def test_graph_consensus_cannot_bury_the_vector_channels_best_hits() -> None:
    """Fifteen graph nominations that the vector channel found deep down all outrank its
    own second hit under RRF; the weight-share bound keeps that hit near the top."""
    vector = [(f"v{i}", 0.60 - 0.005 * i) for i in range(1, 31)]
    vector[0] = ("v1", 0.62)  # no confident top: no margin over v2
    graph = [(f"v{i}", 1.0 - 0.01 * i) for i in range(16, 31)]
    weights = {"vector": 0.4, "graph": 0.6}
    free = fuse({"vector": vector, "graph": graph}, weights, policy=FusionPolicy(anchor_share_factor=0.0))
    assert [f.id for f in free.items].index("v2") >= 10  # buried under the graph's nominations
    bound = fuse({"vector": vector, "graph": graph}, weights, policy=FusionPolicy(anchor_share_factor=1.0))
    order = [f.id for f in bound.items]
    assert order.index("v1") < 3 and order.index("v2") < 5  # share 0.4: ceil(1 / 0.4), ceil(2 / 0.4)
    assert set(order[:10]) & {f"v{i}" for i in range(16, 31)}  # the graph still brings its finds up


# -- no dilution ---------------------------------------------------------------------------


def _lookup_channels() -> dict[str, list[tuple[str, float]]]:
    """A single-hop lookup: vector is sure about 'right'; the graph channel seeded on one
    weakly matched entity returns the same mention evidence for many chunks."""
    vector = [("right", 0.71), ("near1", 0.55), ("near2", 0.52), ("x1", 0.40), ("x2", 0.38)]
    graph = [("x1", 1.0), ("x2", 1.0), ("near2", 1.0), ("right", 1.0), ("near1", 1.0)]
    return {"vector": vector, "graph": graph}


def test_plain_weighted_rrf_dilutes_a_confident_vector_hit() -> None:
    """The failure the rules exist for: positional graph ranks with graph weight 0.6."""
    ch = _lookup_channels()
    naive = weighted_rrf({c: [i for i, _ in h] for c, h in ch.items()}, {"vector": 0.4, "graph": 0.6})
    assert naive[0].id != "right"


def test_equal_graph_evidence_shares_a_rank_and_leaves_order_to_vector() -> None:
    ch = _lookup_channels()
    out = fuse(ch, {"vector": 0.4, "graph": 0.6}, policy=FusionPolicy(anchor_min_score=2.0))  # anchor off
    assert [f.id for f in out.items] == ["right", "near1", "near2", "x1", "x2"]
    assert out.anchored is None


def test_weakly_anchored_graph_is_scaled_down() -> None:
    vector = [("right", 0.60), ("other", 0.58)]
    graph = [("other", 2.0), ("right", 1.0)]  # graph genuinely prefers "other"
    strong = fuse({"vector": vector, "graph": graph}, {"vector": 0.4, "graph": 0.6}, quality={"graph": 1.0})
    weak = fuse({"vector": vector, "graph": graph}, {"vector": 0.4, "graph": 0.6}, quality={"graph": 0.3})
    assert strong.items[0].id == "other"  # well-anchored graph evidence may reorder
    assert weak.items[0].id == "right"  # 0.6 * 0.3 = 0.18 < 0.4: it may not
    assert weak.weights["graph"] == pytest.approx(0.18)


def test_confident_vector_top_is_protected() -> None:
    vector = [("right", 0.72), ("b", 0.55), ("c", 0.50)]
    graph = [("c", 2.0), ("b", 1.0)]
    out = fuse({"vector": vector, "graph": graph}, {"vector": 0.4, "graph": 0.6}, quality={"graph": 1.0})
    assert out.anchored == "right"
    assert out.items[0].id == "right"
    # below the anchor the graph may still reorder
    assert [f.id for f in out.items[1:]] == ["c", "b"]


def test_unsure_vector_top_is_not_protected() -> None:
    vector = [("a", 0.56), ("b", 0.55)]
    graph = [("b", 2.0), ("a", 1.0)]
    out = fuse({"vector": vector, "graph": graph}, {"vector": 0.4, "graph": 0.6})
    assert out.anchored is None
    assert out.items[0].id == "b"


def test_hybrid_first_hit_at_least_as_often_as_vector_alone() -> None:
    """Across constructed lookups, fused top-1 == vector top-1 whenever vector was right."""
    cases = []
    for i in range(20):
        right = f"r{i}"
        vector = [(right, 0.6 + 0.01 * (i % 5)), (f"n{i}a", 0.52), (f"n{i}b", 0.5), (f"n{i}c", 0.45)]
        # graph: entity mentioned in all candidates (ties) plus one decoy with double coverage
        graph = [(f"d{i}", 2.0), (f"n{i}a", 1.0), (right, 1.0), (f"n{i}b", 1.0)]
        cases.append((right, {"vector": vector, "graph": graph}))
    hybrid_hits = sum(
        fuse(ch, {"vector": 0.4, "graph": 0.6}, quality={"graph": 1.0}).items[0].id == right
        for right, ch in cases
    )
    vector_hits = sum(max(ch["vector"], key=lambda p: p[1])[0] == right for right, ch in cases)
    assert vector_hits == 20
    assert hybrid_hits >= vector_hits


def test_single_channel_is_never_anchored_or_reordered() -> None:
    vector = [("a", 0.9), ("b", 0.5), ("c", 0.4)]
    out = fuse({"vector": vector, "graph": []}, {"vector": 0.8, "graph": 0.2})
    assert [f.id for f in out.items] == ["a", "b", "c"]
    assert out.anchored is None
    assert "graph" not in out.weights


def test_normalized_policy_runs() -> None:
    out = fuse(
        {"vector": [("a", 0.9), ("b", 0.4)], "graph": [("b", 3.0), ("a", 1.0)]},
        {"vector": 0.6, "graph": 0.4},
        policy=FusionPolicy(normalized=True),
    )
    assert {f.id for f in out.items} == {"a", "b"}
    assert out.items[0].id == "a"  # confident vector top (0.9 vs 0.4)
