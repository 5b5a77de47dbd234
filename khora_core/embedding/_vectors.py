"""Small vector helpers shared by the embedders."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["normalise_rows"]


def normalise_rows(vectors: Iterable[Sequence[float]] | np.ndarray) -> list[list[float]]:
    """L2-normalise each vector; a zero vector stays zero.

    Args:
        vectors: one vector per row.

    Returns:
        Plain Python float lists (what the storage layer and pydantic models carry).
    """
    arr = np.asarray(vectors if isinstance(vectors, np.ndarray) else list(vectors), dtype=np.float32)
    if arr.size == 0:
        return []
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (arr / norms).tolist()
