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
    by_tokens = encoder.encode(texts, 3, tokens)
    assert module.shapes == [(3, 5), (3, 1)]  # the five-word texts together, no padding
    assert sum(b * w for b, w in module.shapes) == sum(tokens) < padded_by_chars
    # Rows come back in input order either way.
    assert by_tokens[:, 0].tolist() == tokens == by_chars[:, 0].tolist()
