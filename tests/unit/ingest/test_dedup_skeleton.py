from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from khora_core.ingest.dedup import content_hash, normalise_content
from khora_core.ingest.skeleton import pagerank_scores, select_core_chunks


def test_hash_ignores_whitespace_layout_and_unicode_composition() -> None:
    base = content_hash("Café meeting notes\nwith  Alice")
    assert content_hash("  Café meeting notes with Alice \n") == base
    assert content_hash(unicodedata.normalize("NFD", "Café meeting notes with Alice")) == base
    assert content_hash("Café\tmeeting\r\nnotes with Alice") == base
    assert normalise_content(" a \n\n b ") == "a b"


def test_hash_keeps_case_and_punctuation() -> None:
    base = content_hash("Alice met Bob.")
    assert content_hash("alice met bob.") != base
    assert content_hash("Alice met Bob!") != base
    assert len(base) == 64 and int(base, 16) >= 0


def _orthogonal(n: int, dim: int = 16) -> np.ndarray:
    return np.eye(dim)[:n]


@pytest.mark.parametrize(
    ("ratio", "n", "expected"), [(0.0, 5, 0), (1.0, 5, 5), (0.5, 5, 3), (0.2, 5, 1), (0.01, 7, 1)]
)
def test_core_size_is_ceil_of_ratio(ratio: float, n: int, expected: int) -> None:
    picked = select_core_chunks(_orthogonal(n), core_ratio=ratio)
    assert len(picked) == expected
    assert picked == sorted(picked) and len(set(picked)) == len(picked)


def test_edge_cases() -> None:
    assert select_core_chunks([], core_ratio=0.5) == []
    assert select_core_chunks([[1.0, 0.0]], core_ratio=0.3) == [0]
    assert select_core_chunks([[1.0, 0.0]], core_ratio=0.0) == []


def test_pagerank_picks_the_hub_chunk() -> None:
    # Chunk 0 is similar (cos 0.5) to chunks 2..5, which are unrelated to each other; the
    # hub sits at the edge of the sequence so adjacency edges cannot explain its rank.
    dim = 16
    leaves = np.eye(dim)[2:6]
    hub = leaves.sum(axis=0) / 2.0
    filler = np.eye(dim)[10]
    emb = np.vstack([hub, filler, leaves, np.eye(dim)[11], np.eye(dim)[12]])
    scores = pagerank_scores(emb, similarity_threshold=0.4)
    assert scores.argmax() == 0
    assert abs(scores.sum() - 1.0) < 1e-9
    assert select_core_chunks(emb, core_ratio=0.1, similarity_threshold=0.4) == [0]
    # Without similarity edges only the sequence remains; the hub loses its advantage.
    plain = pagerank_scores(emb, similarity_threshold=0.99)
    assert plain.argmax() != 0


def test_similar_chunks_outrank_isolated_ones() -> None:
    rng = np.random.default_rng(7)
    topic = rng.normal(size=32)
    cluster = [topic + 0.3 * rng.normal(size=32) for _ in range(6)]
    noise = [rng.normal(size=32) for _ in range(6)]
    emb = np.vstack([v for pair in zip(cluster, noise, strict=True) for v in pair])  # interleaved
    core = select_core_chunks(emb, core_ratio=0.5, similarity_threshold=0.5)
    assert core == [0, 2, 4, 6, 8, 10]


def test_segments_keep_adjacency_inside_each_document() -> None:
    # Three mutually orthogonal chunks: only adjacency edges join them.
    emb = np.eye(3)
    chained = pagerank_scores(emb)  # one document: 0-1-2, the middle chunk is central
    assert chained[1] > chained[0] == pytest.approx(chained[2])
    split = pagerank_scores(emb, segments=[2, 1])  # documents [0, 1] and [2]: no 1-2 edge
    assert split[0] == pytest.approx(split[1]) and split[1] < chained[1]
    assert select_core_chunks(emb, core_ratio=0.3, segments=[2, 1]) == [0]


def test_segments_must_cover_the_chunks() -> None:
    from khora_core.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="segments add up to 2 chunks, not 3"):
        pagerank_scores(np.eye(3), segments=[1, 1])
