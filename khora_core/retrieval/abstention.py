"""Abstention signals: should the caller decline to answer from this result?

Flags (``engine_info["abstention_signals"]``):

* ``chunks_empty``: no chunk came back;
* ``entities_empty``: no entity came back;
* ``chunks_below_min``: fewer chunks than ``QueryConfig.abstain_min_chunks``;
* ``top_score_low``: the raw, pre-rerank top vector cosine (``max_raw_vector_score``) is
  below ``QueryConfig.abstain_min_top_score``; true when the vector channel did not run
  (a graph-only recall matched nothing by text);
* ``combined_score``: a 0-1 blend, below;
* ``should_abstain``: ``combined_score >= QueryConfig.abstain_threshold``.

**combined_score** is a noisy-OR of three pieces of evidence that the corpus does not
cover the question::

    t = clip(0.5 + (min_top - max_raw) / 0.2, 0, 1)       # text match is weak
    combined = 1 - (1 - t) * (1 - 0.3 * entities_empty) * (1 - 0.3 * chunks_below_min)
    combined = 1.0 when chunks_empty

``t`` is 0.5 exactly at the threshold ``min_top``, 1 when the top cosine is 0.1 below it,
0 when it is 0.1 above, so with the default threshold 0.5 (and 0.3 on the cosine) the
verdict follows ``top_score_low`` unless the other flags push it over. With all-MiniLM-L6-v2
an off-topic question's top cosine is typically < 0.25 (``t`` >= 0.75: abstain) and an
on-topic one > 0.4 (``t`` = 0). Without a vector score (GRAPH or KEYWORD mode) ``t`` is
``1 - 0.6 * other_evidence`` where ``other_evidence`` in [0, 1] is the best exact entity
link or keyword coverage: an exact entity match keeps a graph-only recall answerable.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AbstentionSignals", "abstention_signals"]


@dataclass(frozen=True)
class AbstentionSignals:
    chunks_empty: bool
    entities_empty: bool
    chunks_below_min: bool
    top_score_low: bool
    combined_score: float
    should_abstain: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "chunks_empty": self.chunks_empty,
            "entities_empty": self.entities_empty,
            "chunks_below_min": self.chunks_below_min,
            "top_score_low": self.top_score_low,
            "combined_score": self.combined_score,
            "should_abstain": self.should_abstain,
        }


def abstention_signals(
    *,
    n_chunks: int,
    n_entities: int,
    max_raw_vector_score: float | None,
    min_chunks: int = 1,
    min_top_score: float = 0.3,
    threshold: float = 0.5,
    other_evidence: float = 0.0,
) -> AbstentionSignals:
    """Compute the flags and the verdict (formula in the module docstring).

    Args:
        n_chunks: chunks in the result.
        n_entities: entities in the result.
        max_raw_vector_score: raw pre-rerank top cosine, None when no vector channel ran.
        min_chunks: ``QueryConfig.abstain_min_chunks``.
        min_top_score: ``QueryConfig.abstain_min_top_score``.
        threshold: ``QueryConfig.abstain_threshold``.
        other_evidence: in [0, 1], the non-vector evidence used when there is no cosine.
    """
    chunks_empty = n_chunks == 0
    entities_empty = n_entities == 0
    below_min = n_chunks < min_chunks
    if max_raw_vector_score is None:
        top_low = True
        t = 1.0 - 0.6 * min(1.0, max(0.0, other_evidence))
    else:
        top_low = max_raw_vector_score < min_top_score
        t = min(1.0, max(0.0, 0.5 + (min_top_score - max_raw_vector_score) / 0.2))
    if chunks_empty:
        combined = 1.0
    else:
        combined = 1.0 - (1.0 - t) * (1.0 - 0.3 * entities_empty) * (1.0 - 0.3 * below_min)
    combined = round(combined, 4)
    return AbstentionSignals(
        chunks_empty=chunks_empty,
        entities_empty=entities_empty,
        chunks_below_min=below_min,
        top_score_low=top_low,
        combined_score=combined,
        should_abstain=combined >= threshold,
    )
