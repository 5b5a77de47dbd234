"""Which models the traced encoder takes (no model needed; the packaged one is in test_local)."""

from __future__ import annotations

from typing import Any

from khora_core.embedding._traced import trace_encoder


class Pooling:
    def __init__(self, mode: str) -> None:
        self.pooling_mode = mode


class Normalize:
    pass


class Transformer:
    auto_model = object()


class Stack(list[Any]):
    tokenizer = staticmethod(lambda texts, **kw: {})
    device = "cpu"


def test_only_a_plain_mean_pooling_stack_is_traced() -> None:
    # Not of the traced kind: CLS pooling, an extra Dense layer, no tokenizer, a GPU, not a stack.
    assert trace_encoder(Stack([Transformer(), Pooling("cls"), Normalize()])) is None
    assert trace_encoder(Stack([Transformer(), Pooling("mean"), Normalize(), object()])) is None
    no_tokenizer = Stack([Transformer(), Pooling("mean")])
    no_tokenizer.tokenizer = None  # type: ignore[assignment]
    assert trace_encoder(no_tokenizer) is None
    on_gpu = Stack([Transformer(), Pooling("mean")])
    on_gpu.device = "cuda:0"
    assert trace_encoder(on_gpu) is None
    assert trace_encoder(object()) is None
    # Of the traced kind but a fake: the trace fails, and the caller keeps encode().
    assert trace_encoder(Stack([Transformer(), Pooling("mean"), Normalize()])) is None


class _WordTokenizer:
    """One token per word; pads every batch to its longest text."""

    def __call__(self, texts: list[str], **kw: Any) -> dict[str, Any]:
        import torch

        rows = [len(t.split()) for t in texts]
        width = max(rows)
        mask = torch.tensor([[1] * n + [0] * (width - n) for n in rows])
        return {"input_ids": mask.clone(), "attention_mask": mask}


class _RecordingModule:
    """Returns each text's token count as its vector, and records every batch's shape."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, int]] = []

    def __call__(self, input_ids: Any, attention_mask: Any) -> Any:
        self.shapes.append(tuple(input_ids.shape))
        return attention_mask.sum(1, keepdim=True).float()


def test_batches_are_cut_by_token_counts_when_the_caller_has_them() -> None:
    from khora_core.embedding._traced import TracedEncoder

    # Character length and token count disagree: long single words, short five-word texts.
    texts = ["x" * 40, "a b c d e", "y" * 8, "f g h i j", "z" * 12, "k l m n o"]
    tokens = [len(t.split()) for t in texts]
    module = _RecordingModule()
    encoder = TracedEncoder(module, _WordTokenizer(), None, 1)

    by_chars = encoder.encode(texts, 3)
    assert module.shapes == [(3, 5), (3, 5)]  # a one-word text padded to five in each batch
    padded_by_chars = sum(b * w for b, w in module.shapes)

    module.shapes.clear()
    by_tokens = encoder.encode(texts, 3, [[1] * n for n in tokens])
    assert module.shapes == [(3, 5), (3, 1)]  # the five-word texts together, no padding
    assert sum(b * w for b, w in module.shapes) == sum(tokens) < padded_by_chars
    # Rows come back in input order either way.
    assert by_tokens[:, 0].tolist() == tokens == by_chars[:, 0].tolist()


class _PaddingWordTokenizer(_WordTokenizer):
    """Word ids from 1 up, padded with id 0 on the right, like a Hugging Face tokenizer."""

    pad_token_id = 0
    padding_side = "right"

    def __call__(self, texts: list[str], **kw: Any) -> dict[str, Any]:
        import torch

        rows = self.ids(texts)
        width = max(map(len, rows))
        return {
            "input_ids": torch.tensor([r + [0] * (width - len(r)) for r in rows]),
            "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]),
        }

    @staticmethod
    def ids(texts: list[str]) -> list[list[int]]:
        return [[len(w) for w in t.split()] for t in texts]


class _InputsModule:
    """Records every batch's inputs; returns the sum of each row's ids as its vector."""

    def __init__(self) -> None:
        self.inputs: list[tuple[list[list[int]], list[list[int]]]] = []

    def __call__(self, input_ids: Any, attention_mask: Any) -> Any:
        self.inputs.append((input_ids.tolist(), attention_mask.tolist()))
        return (input_ids * attention_mask).sum(1, keepdim=True).float()


def test_batches_built_from_the_callers_ids_are_what_the_tokenizer_gives() -> None:
    from khora_core.embedding._traced import TracedEncoder

    texts = ["alpha beta", "a", "gamma delta epsilon zeta", "bb ccc", "one two three"]
    tokenizer, unpadded = _PaddingWordTokenizer(), _PaddingWordTokenizer()
    unpadded.pad_token_id = None  # type: ignore[assignment]  # unknown pad id: every batch is tokenized
    tokenized, from_ids = _InputsModule(), _InputsModule()
    expected = TracedEncoder(tokenized, unpadded, None, 1).encode(texts, 2, tokenizer.ids(texts))
    # A tokenizer that would fail: the batches must come from the ids alone.
    encoder = TracedEncoder(from_ids, tokenizer, None, 1)
    encoder._tokenizer = type("NoCalls", (), {"pad_token_id": 0, "padding_side": "right"})()
    got = encoder.encode(texts, 2, tokenizer.ids(texts))
    assert from_ids.inputs == tokenized.inputs and len(from_ids.inputs) == 3
    assert got.tolist() == expected.tolist() == [[float(sum(r))] for r in tokenizer.ids(texts)]
