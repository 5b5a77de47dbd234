"""Maximal Marginal Relevance: drop near-duplicates after fusion.

Each pick maximises ``λ · relevance(d) − (1 − λ) · max_{s ∈ picked} sim(d, s)``, with
relevance min-max normalised to [0, 1] so that it is on the similarity's scale. The first
pick is always the most relevant item, so MMR never changes the top hit. Vectorised with
numpy: one similarity matrix, one running max per candidate.

``sim`` is the cosine rescaled above a ``duplicate_floor``: ``(cos - floor) / (1 - floor)``,
0 at or below the floor. Classic MMR (floor 0) also demotes passages that are merely on the
same subject, which are often the second hop a question needs; with the read path's floor
of 0.8 only near-duplicates are demoted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["mmr_order"]


def mmr_order(
    relevance: Sequence[float],
    embeddings: Sequence[Sequence[float]] | np.ndarray,
    *,
    lambda_: float = 0.5,
    k: int | None = None,
    duplicate_floor: float = 0.0,
) -> list[int]:
    """Order items by MMR.

    Args:
        relevance: one relevance score per item (any scale).
        embeddings: one vector per item (normalised here; need not be unit length).
        lambda_: 1.0 is pure relevance, 0.0 pure diversity.
        k: how many items MMR picks; the rest follow in relevance order. None: all.
        duplicate_floor: cosine at or below which two items are not redundant at all
            (see the module docstring); 0.0 is classic MMR.

    Returns:
        Item indices in their new order (a permutation of ``range(len(relevance))``).

    Raises:
        ValueError: ``relevance`` and ``embeddings`` differ in length, or
            ``duplicate_floor`` is outside [0, 1).
    """
    if not 0.0 <= duplicate_floor < 1.0:
        raise ValueError(f"duplicate_floor must be in [0, 1), got {duplicate_floor}")
    n = len(relevance)
    if n == 0:
        return []
    vecs = np.asarray(embeddings, dtype=np.float64)
    if vecs.shape[0] != n:
        raise ValueError(f"{n} relevance scores but {vecs.shape[0]} embeddings")
    rel = np.asarray(relevance, dtype=np.float64)
    spread = rel.max() - rel.min()
    rel = (rel - rel.min()) / spread if spread > 1e-12 else np.ones(n)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs / np.where(norms > 0, norms, 1.0)
    sim = vecs @ vecs.T
    if duplicate_floor > 0.0:
        sim = np.clip((sim - duplicate_floor) / (1.0 - duplicate_floor), 0.0, 1.0)
    k = n if k is None else max(0, min(k, n))

    picked: list[int] = []
    available = np.ones(n, dtype=bool)
    max_sim = np.full(n, -np.inf)
    for _ in range(k):
        redundancy = np.where(np.isfinite(max_sim), max_sim, 0.0)
        score = lambda_ * rel - (1.0 - lambda_) * redundancy
        score[~available] = -np.inf
        best = int(np.argmax(score))
        picked.append(best)
        available[best] = False
        max_sim = np.maximum(max_sim, sim[best])
    rest = [int(i) for i in np.argsort(-rel, kind="stable") if available[i]]
    return picked + rest
