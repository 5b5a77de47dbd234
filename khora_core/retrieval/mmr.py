"""Maximal Marginal Relevance: drop near-duplicates after fusion.

Each pick maximises ``λ · relevance(d) − (1 − λ) · max_{s ∈ picked} cos(d, s)``, with
relevance min-max normalised to [0, 1] so that it is on the cosine's scale. The first pick
is always the most relevant item, so MMR never changes the top hit. Vectorised with numpy:
one similarity matrix, one running max per candidate.
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
) -> list[int]:
    """Order items by MMR.

    Args:
        relevance: one relevance score per item (any scale).
        embeddings: one vector per item (normalised here; need not be unit length).
        lambda_: 1.0 is pure relevance, 0.0 pure diversity.
        k: how many items MMR picks; the rest follow in relevance order. None: all.

    Returns:
        Item indices in their new order (a permutation of ``range(len(relevance))``).

    Raises:
        ValueError: ``relevance`` and ``embeddings`` differ in length.
    """
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
