"""Forward batches of the local embedder: long texts in smaller batches (no model needed)."""

from __future__ import annotations

from typing import Any

import numpy as np

from khora_core.embedding import local


def test_forward_batches_keep_padded_tokens_under_the_budget() -> None:
    lengths = [256, 8, 120, 256, 30, 5, 64, 200, 9, 7]
    runs = local._forward_batches(lengths, 4, 512)
    assert sorted(i for idx, _ in runs for i in idx) == list(range(len(lengths)))
    order = [i for idx, _ in runs for i in idx]
    assert [lengths[i] for i in order] == sorted(lengths, reverse=True)  # longest first
    for idx, size in runs:
        assert size & (size - 1) == 0 and 1 <= size <= local._MOST_TEXTS_PER_PASS
        for lo in range(0, len(idx), size):
            batch = idx[lo : lo + size]
            assert len(batch) * max(lengths[i] for i in batch) <= 512 or len(batch) == 1
    # 120 to 256 tokens two at a time; from 64 tokens down, 8 at a time (more than batch_size:
    # 8 x 64 tokens fit the budget).
    assert [size for _, size in runs] == [2, 8]
    assert local._forward_batches([10, 10, 10], 64, 2048) == [([0, 1, 2], 128)]
    assert local._forward_batches([3] * 5, 64, 2048) == [(list(range(5)), local._MOST_TEXTS_PER_PASS)]
    assert local._forward_batches([100, 100], 64, 2048) == [([0, 1], 16)]
    assert local._forward_batches([5000], 64, 2048) == [([0], 1)]  # never below one text
    assert local._forward_batches([], 64, 2048) == []


class FakeModel:
    """Enough of a SentenceTransformer: a whitespace tokenizer and a deterministic encode."""

    max_seq_length = 6

    def __init__(self, *, tokenizer: bool = True) -> None:
        self.calls: list[tuple[list[str], int]] = []
        if tokenizer:
            self.tokenizer = self._tokenize

    def _tokenize(self, texts: list[str], **kwargs: Any) -> dict[str, list[list[int]]]:
        limit = kwargs.get("max_length") or 10**9
        return {"input_ids": [[0] * min(limit, len(t.split()) + 2) for t in texts]}

    def encode(self, texts: list[str], *, batch_size: int, **kwargs: Any) -> np.ndarray:
        assert kwargs["normalize_embeddings"] and kwargs["convert_to_numpy"]
        self.calls.append((list(texts), batch_size))
        return np.asarray([[len(t), t.count("x"), 1.0] for t in texts], dtype=np.float32)


def test_encode_in_passes_returns_rows_in_input_order(monkeypatch: Any) -> None:
    monkeypatch.setattr(local, "_TOKENS_PER_PASS", 12)
    texts = ["x", "x x x x x x x x", "x x", "x x x x", "y"]
    model = FakeModel()
    out = local._encode_in_passes(model, texts, 4)
    assert out.tolist() == [[len(t), t.count("x"), 1.0] for t in texts]
    # Tokens (2 special, at most 6): 3, 6, 4, 6, 3. Up to 4 tokens go two at a time
    # (the largest power of two with 2 x 6 <= 12 and 2 x 4 <= 12), the 3-token ones by 4.
    assert model.calls == [([texts[1], texts[3], texts[2], texts[0]], 2), ([texts[4]], 4)]


def test_encode_in_passes_without_a_tokenizer_is_one_plain_call() -> None:
    model = FakeModel(tokenizer=False)
    texts = ["a b", "c"]
    out = local._encode_in_passes(model, texts, 64)
    assert model.calls == [(texts, 64)] and out.shape == (2, 3)
    local._release_free_memory()  # harmless anywhere (a no-op off glibc)
