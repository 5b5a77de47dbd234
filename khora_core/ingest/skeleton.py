"""KET-RAG skeleton selection: which chunks get full (LLM) extraction.

Chunks form a graph: an edge joins each chunk to its nearest neighbours whose cosine
similarity reaches a threshold (kNN over normalised embeddings), and consecutive chunks
of one document are always joined (text read in order is related). Weighted PageRank over that graph
scores how central each chunk is; the top ``ceil(core_ratio * n)`` become the *core*
that is sent to full extraction. The rest get cheap keyword links only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from khora_core.errors import InvalidInputError

__all__ = ["pagerank_scores", "select_core_chunks"]

#: Weight of the edge joining consecutive chunks.
_ADJACENCY_WEIGHT = 0.5
_BLOCK_ROWS = 1024


def _edges(
    emb: np.ndarray, *, k: int, threshold: float, segments: Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected weighted edges (src, dst, weight), both directions listed."""
    n = emb.shape[0]
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    wts: list[np.ndarray] = []
    kk = min(k, n - 1)
    if kk > 0:
        # Row blocks keep memory at O(block * n) for long documents.
        for lo in range(0, n, _BLOCK_ROWS):
            hi = min(n, lo + _BLOCK_ROWS)
            sims = emb[lo:hi] @ emb.T
            rows = np.arange(hi - lo)
            sims[rows, rows + lo] = -np.inf  # no self loops
            nbrs = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
            vals = np.take_along_axis(sims, nbrs, axis=1)
            keep = vals >= threshold
            r = np.repeat(np.arange(lo, hi), kk).reshape(hi - lo, kk)
            src.append(r[keep])
            dst.append(nbrs[keep])
            wts.append(vals[keep])
    if n > 1:
        seq = np.arange(n - 1)
        if segments is not None:  # no adjacency edge from one document's last chunk to the next's first
            ends = np.cumsum(np.asarray(segments, dtype=np.int64))[:-1] - 1
            seq = seq[~np.isin(seq, ends)]
        src.append(seq)
        dst.append(seq + 1)
        wts.append(np.full(len(seq), _ADJACENCY_WEIGHT, dtype=np.float64))
    if not src:
        return np.zeros(0, int), np.zeros(0, int), np.zeros(0)
    s = np.concatenate(src)
    d = np.concatenate(dst)
    w = np.concatenate(wts).astype(np.float64)
    # Symmetrise; a pair found in both directions (or also adjacent) keeps its largest weight.
    a = np.concatenate([s, d])
    b = np.concatenate([d, s])
    w2 = np.concatenate([w, w])
    key = a.astype(np.int64) * n + b
    order = np.lexsort((-w2, key))
    key, a, b, w2 = key[order], a[order], b[order], w2[order]
    first = np.ones(len(key), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    return a[first], b[first], w2[first]


def pagerank_scores(
    embeddings: Sequence[Sequence[float]] | np.ndarray,
    *,
    similarity_threshold: float = 0.5,
    k: int = 10,
    damping: float = 0.85,
    iterations: int = 100,
    tol: float = 1e-9,
    segments: Sequence[int] | None = None,
) -> np.ndarray:
    """Weighted PageRank of each chunk in the similarity + adjacency graph.

    Args:
        embeddings: one vector per chunk, in document order (normalised here).
        similarity_threshold: minimum cosine for a similarity edge.
        k: similarity neighbours considered per chunk.
        damping: PageRank damping factor.
        iterations: maximum power iterations.
        tol: L1 convergence tolerance.
        segments: chunk counts of consecutive documents when ``embeddings`` spans several
            (adjacency edges stay inside a document); None: one document.

    Returns:
        Scores summing to 1 (empty for no chunks).
    """
    emb = np.asarray(embeddings, dtype=np.float32)
    n = emb.shape[0] if emb.ndim == 2 else len(emb)
    if n == 0:
        return np.zeros(0)
    if emb.ndim != 2:
        emb = emb.reshape(n, -1)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    emb = emb / norms
    if segments is not None and sum(segments) != n:
        raise InvalidInputError(f"segments add up to {sum(segments)} chunks, not {n}")
    src, dst, w = _edges(emb, k=k, threshold=similarity_threshold, segments=segments)
    out_weight = np.bincount(src, weights=w, minlength=n)
    dangling = out_weight == 0
    scores = np.full(n, 1.0 / n)
    share = np.zeros_like(w)
    nz = out_weight[src] > 0
    share[nz] = w[nz] / out_weight[src][nz]
    for _ in range(iterations):
        flow = np.bincount(dst, weights=scores[src] * share, minlength=n)
        new = (1 - damping) / n + damping * (flow + scores[dangling].sum() / n)
        if np.abs(new - scores).sum() < tol:
            scores = new
            break
        scores = new
    return scores / scores.sum()


def select_core_chunks(
    embeddings: Sequence[Sequence[float]] | np.ndarray,
    *,
    core_ratio: float,
    similarity_threshold: float = 0.5,
    k: int = 10,
    segments: Sequence[int] | None = None,
) -> list[int]:
    """Indices of the skeleton core: the ``ceil(core_ratio * n)`` most central chunks.

    Args:
        embeddings: one vector per chunk, in document order.
        core_ratio: fraction of chunks to select (``VectorCypherConfig.skeleton_core_ratio``);
            1.0 selects every chunk, 0 none.
        similarity_threshold: minimum cosine for a similarity edge
            (``VectorCypherConfig.skeleton_similarity_threshold``).
        k: similarity neighbours per chunk.
        segments: see :func:`pagerank_scores` (for a core chosen across documents).

    Returns:
        Selected chunk indices in ascending (document) order. Ties in score go to the
        earlier chunk.
    """
    n = len(embeddings)
    if n == 0 or core_ratio <= 0:
        return []
    if core_ratio >= 1 or n == 1:
        return list(range(n))
    count = min(n, math.ceil(core_ratio * n - 1e-9))
    scores = pagerank_scores(embeddings, similarity_threshold=similarity_threshold, k=k, segments=segments)
    order = sorted(range(n), key=lambda i: (-round(float(scores[i]), 12), i))
    return sorted(order[:count])
