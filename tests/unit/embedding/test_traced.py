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
