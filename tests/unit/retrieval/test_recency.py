"""Recency is measured from the newest date in the result set."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from khora_core.retrieval.dates import parse_temporal
from khora_core.retrieval.recency import apply_recency, apply_window_boost, event_time, recency_scores

BASE = datetime(2019, 3, 1, tzinfo=timezone.utc)


def test_reference_is_newest_in_set_not_now() -> None:
    dates = [BASE, BASE - timedelta(days=30), BASE - timedelta(days=60), None]
    scores = recency_scores(dates, decay_days=30, decay_type="exponential")
    assert scores[0] == pytest.approx(1.0)  # the newest result, though 2019 is long past
    assert scores[1] == pytest.approx(0.5)
    assert scores[2] == pytest.approx(0.25)
    assert scores[3] is None


def test_same_gap_same_score_in_any_year() -> None:
    old = recency_scores([BASE, BASE - timedelta(days=2)], decay_days=30)
    new = recency_scores(
        [BASE.replace(year=2026), BASE.replace(year=2026) - timedelta(days=2)], decay_days=30
    )
    assert old == pytest.approx(new)


def test_linear_decay() -> None:
    dates = [BASE, BASE - timedelta(days=30), BASE - timedelta(days=90)]
    assert recency_scores(dates, decay_days=30, decay_type="linear") == pytest.approx([1.0, 0.5, 0.0])


def test_unknown_decay_type() -> None:
    with pytest.raises(ValueError, match="decay_type"):
        recency_scores([BASE], decay_days=30, decay_type="cubic")


def test_all_undated() -> None:
    assert recency_scores([None, None], decay_days=30) == [None, None]
    assert apply_recency([1.0, 0.5], [None, None], weight=0.35) == [1.0, 0.5]


def test_apply_recency_blend_and_neutral_undated() -> None:
    out = apply_recency([1.0, 1.0, 1.0], [1.0, 0.0, None], weight=0.35)
    assert out == pytest.approx([1.0, 0.65, 0.825])  # undated gets the mean recency (0.5)
    assert apply_recency([0.9, 0.3], [0.0, 1.0], weight=0.0) == [0.9, 0.3]


def test_recency_can_reorder_close_scores_but_not_far_ones() -> None:
    close = apply_recency([1.0, 0.9], [0.0, 1.0], weight=0.35)
    assert close[1] > close[0]
    far = apply_recency([1.0, 0.5], [0.0, 1.0], weight=0.35)
    assert far[0] > far[1]


def test_window_boost() -> None:
    refs = parse_temporal("in Q1 2024", now=datetime(2024, 6, 1, tzinfo=timezone.utc))
    dates = [datetime(2024, 2, 1, tzinfo=timezone.utc), datetime(2024, 5, 1, tzinfo=timezone.utc), None]
    out, n = apply_window_boost([0.9, 1.0, 1.0], dates, refs, boost=0.2)
    assert out == pytest.approx([1.08, 1.0, 1.0]) and n == 1
    same, n0 = apply_window_boost([0.9], dates[:1], refs, boost=0.0)
    assert same == [0.9] and n0 == 0
    recency_only = parse_temporal("latest", now=datetime(2024, 6, 1, tzinfo=timezone.utc))
    assert apply_window_boost([0.5], dates[:1], recency_only, boost=0.2) == ([0.5], 0)


def test_event_time_prefers_occurred_at() -> None:
    a = datetime(2024, 1, 1, tzinfo=timezone.utc)
    b = datetime(2023, 1, 1)
    assert event_time(a, b) == a
    assert event_time(None, b) == b.replace(tzinfo=timezone.utc)
    assert event_time(None, None) is None
