"""The bridged question of the graph channel's relevance (``channels.bridged_query``)."""

from __future__ import annotations

import numpy as np
import pytest

from khora_core.retrieval.fusion import nominations
from khora_core.retrieval.graph_channel import bridged_query


def test_bridged_query_is_unit_length_and_halfway_between() -> None:
    q, p = [3.0, 0.0, 0.0], [0.0, 0.5, 0.0]  # norms differ: each is normalised first
    b = np.asarray(bridged_query(q, p))
    assert np.linalg.norm(b) == pytest.approx(1.0)
    assert b @ np.array([1.0, 0.0, 0.0]) == pytest.approx(b @ np.array([0.0, 1.0, 0.0]))
    assert b @ np.array([1.0, 0.0, 0.0]) == pytest.approx(np.sqrt(0.5))


def test_bridged_query_of_the_same_direction_is_that_direction() -> None:
    assert bridged_query([1.0, 1.0], [2.0, 2.0]) == pytest.approx([np.sqrt(0.5), np.sqrt(0.5)])


@pytest.mark.parametrize(
    ("q", "p"),
    [([0.0, 0.0], [1.0, 0.0]), ([1.0, 0.0], [0.0, 0.0]), ([1.0, 0.0], [-1.0, 0.0]), ([1.0, 0.0], [1.0])],
)
def test_bridged_query_without_a_direction_is_none(q: list[float], p: list[float]) -> None:
    assert bridged_query(q, p) is None


def test_nominations_scale_with_the_graph_evidence() -> None:
    assert nominations(10, 15, 1.0) == 10  # an exact link to a specific entity: all of them
    assert nominations(10, 15, 0.5) == 5
    assert nominations(10, 15, 0.07) == 1  # only a chat's speaker: one
    assert nominations(10, 15, 0.0) == 1  # passage seeds alone still nominate their best
    assert nominations(20, 15, 1.0) == 15  # never more than the limit
