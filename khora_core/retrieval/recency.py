"""Recency scoring and the soft date-window boost.

**Recency** is measured from the newest ``occurred_at`` in the *result set*, not from the
wall clock, so historical or benchmark data still gets meaningful discrimination: a chunk
"2 days before the newest result" scores the same whether the data is from 2024 or 2026.

* ``exponential``: ``r = 0.5 ** (age_days / decay_days)`` (``decay_days`` is a half-life);
* ``linear``: ``r = max(0, 1 - age_days / (2 * decay_days))`` (also 0.5 at ``decay_days``).

The boost multiplies a relevance score by ``(1 - weight) + weight * r``: the newest chunk
keeps its score, and a chunk far older loses at most ``weight`` of it. Undated chunks get
the mean ``r`` of the dated ones, so being undated neither helps nor hurts. ``weight = 0``
turns recency off (evergreen corpora).

**Date windows** from the question ("in Q1 2024") multiply the score of chunks dated inside
any window by ``1 + temporal_window_boost``. This is a soft preference, never a gate.

Dates are the chunk's ``occurred_at``, falling back to ``source_timestamp`` (never the
ingest time, which says nothing about when the event happened).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone

from khora_core.retrieval.dates import TemporalReference

__all__ = [
    "apply_recency",
    "apply_window_boost",
    "event_time",
    "recency_scores",
]


def event_time(occurred_at: datetime | None, source_timestamp: datetime | None = None) -> datetime | None:
    """The time a chunk is about: ``occurred_at``, else ``source_timestamp`` (UTC)."""
    when = occurred_at or source_timestamp
    if when is None:
        return None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when


def recency_scores(
    dates: Sequence[datetime | None], *, decay_days: float, decay_type: str = "exponential"
) -> list[float | None]:
    """Recency in [0, 1] for each date, relative to the newest date in ``dates``.

    Args:
        dates: one date per item (None: undated).
        decay_days: the half-life (exponential) or half-way point (linear), in days.
        decay_type: ``"exponential"`` or ``"linear"``.

    Returns:
        One score per item, None for undated items.

    Raises:
        ValueError: an unknown ``decay_type``.
    """
    if decay_type not in ("exponential", "linear"):
        raise ValueError(f"decay_type must be 'exponential' or 'linear', got {decay_type!r}")
    dated = [d for d in dates if d is not None]
    if not dated:
        return [None] * len(dates)
    newest = max(dated)
    decay = max(float(decay_days), 1e-9)
    out: list[float | None] = []
    for d in dates:
        if d is None:
            out.append(None)
            continue
        age = max(0.0, (newest - d).total_seconds() / 86400.0)
        if decay_type == "exponential":
            out.append(math.pow(0.5, age / decay))
        else:
            out.append(max(0.0, 1.0 - age / (2.0 * decay)))
    return out


def apply_recency(scores: Sequence[float], recency: Sequence[float | None], *, weight: float) -> list[float]:
    """Blend relevance with recency: ``score * ((1 - weight) + weight * r)``.

    Undated items use the mean recency of the dated ones. ``weight`` is clamped to [0, 1].
    """
    weight = min(1.0, max(0.0, weight))
    known = [r for r in recency if r is not None]
    if weight == 0.0 or not known:
        return list(scores)
    neutral = sum(known) / len(known)
    return [
        s * ((1.0 - weight) + weight * (neutral if r is None else r))
        for s, r in zip(scores, recency, strict=True)
    ]


def apply_window_boost(
    scores: Sequence[float],
    dates: Sequence[datetime | None],
    windows: Sequence[TemporalReference],
    *,
    boost: float,
) -> tuple[list[float], int]:
    """Multiply the scores of items dated inside any window by ``1 + boost``.

    Returns:
        The new scores and how many items were boosted.
    """
    usable = [w for w in windows if w.kind != "recency" and (w.start is not None or w.end is not None)]
    if boost <= 0 or not usable:
        return list(scores), 0
    out: list[float] = []
    boosted = 0
    for s, d in zip(scores, dates, strict=True):
        if d is not None and any(w.contains(d) for w in usable):
            out.append(s * (1.0 + boost))
            boosted += 1
        else:
            out.append(s)
    return out, boosted
