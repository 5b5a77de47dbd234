"""The walk over a question's passage-entity graph (``retrieval.ppr``)."""

from __future__ import annotations

import numpy as np
import pytest

from khora_core.retrieval.ppr import PassageGraph, normalised, personalized_pagerank


def test_pagerank_matches_a_dense_power_iteration() -> None:
    rng = np.random.default_rng(7)
    n = 6
    src, dst = np.nonzero(rng.random((n, n)) < 0.5)
    out = np.bincount(src, minlength=n)
    prob = 1.0 / out[src]
    reset = rng.random(n)
    got = personalized_pagerank(n, src, dst, prob, reset, damping=0.6, iterations=500, tolerance=0)
    matrix = np.zeros((n, n))
    matrix[dst, src] = prob
    r = reset / reset.sum()
    want = np.linalg.solve(np.eye(n) - 0.6 * matrix, 0.4 * r)
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_no_restart_mass_gives_no_mass() -> None:
    empty = np.zeros(0, dtype=np.int64)
    assert personalized_pagerank(3, empty, empty, np.zeros(0), np.zeros(3)).tolist() == [0.0, 0.0, 0.0]


def test_the_second_hop_is_reached_through_the_shared_entity() -> None:
    """q names entity A; passage p1 (near the question) names A and the bridge B; p2 names
    only B and is far from the question; p3 is near the question but shares nothing. The
    walk, restarting mostly at the question's entity (as HippoRAG 2 weights it), ranks p2
    above p3."""
    g = PassageGraph()
    g.entity_reset = {"A": 1.0}
    g.passage_reset = {"p1": 1.0, "p3": 0.6}
    for eid in ("A", "B", "C"):
        g.add_entity(eid, 2)
    g.add_mentions("p1", {"A": 1, "B": 1})
    g.add_mentions("p2", {"B": 1})
    g.add_mentions("p3", {"C": 1})
    mass = g.rank(damping=0.5, passage_share=0.05)
    assert mass["p1"] > mass["p2"] > mass["p3"] > 0


def test_a_popular_entity_passes_less_to_each_passage() -> None:
    """Two bridges from the same first passage: one entity named in 2 chunks of the
    namespace, one named in 200. The passage behind the rare one gets more."""
    g = PassageGraph()
    g.passage_reset = {"p1": 1.0}
    g.add_entity("rare", 2)
    g.add_entity("common", 200)
    g.add_mentions("p1", {"rare": 1, "common": 1})
    g.add_mentions("via-rare", {"rare": 1})
    g.add_mentions("via-common", {"common": 1})
    mass = g.rank(damping=0.5, passage_share=1.0)
    assert mass["via-rare"] > 10 * mass["via-common"]


def test_without_entities_the_passages_take_all_the_restart_mass() -> None:
    g = PassageGraph()
    g.passage_reset = {"p1": 1.0, "p2": 0.5}
    mass = g.rank(damping=0.5, passage_share=0.0)
    assert mass["p1"] == pytest.approx(2 * mass["p2"])
    assert mass["p1"] > 0


def test_normalised_is_min_max() -> None:
    assert normalised([("a", 0.2), ("b", 0.6), ("c", 0.4)]) == pytest.approx({"a": 0.0, "b": 1.0, "c": 0.5})
    assert normalised([("a", 0.3), ("b", 0.3)]) == {"a": 1.0, "b": 1.0}
    assert normalised([]) == {}
