"""A TorchScript trace of a mean-pooling sentence-transformers model (all-MiniLM-L6-v2 and
its kind): the same vectors as ``SentenceTransformer.encode``, one call into C++ per batch.

Why: ``encode`` makes about 120 Python module calls per forward pass, and each gives the
GIL back and takes it again around the tensor work. While the event loop runs Python on
another thread (as it does during ``recall()``: the store lookups run beside the question's
embedding), every one of those hand-overs can wait for the loop's switch interval; the
traced forward pass does not (figures in ``docs/benchmarks.md``).

:func:`trace_encoder` builds the trace once per loaded model and keeps it only
when the model is a plain Transformer -> mean Pooling (-> Normalize) stack and the trace
reproduces ``encode(normalize_embeddings=True)`` (what the embedder always asks) on probe
texts from one word to past the model's length limit, batched (tokenized per batch and
padded from token ids) and alone (largest difference at most ``1e-5``); otherwise the
caller keeps using ``encode``.
"""

from __future__ import annotations

import copy
import logging
import threading
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["TracedEncoder", "trace_encoder"]

logger = logging.getLogger("khora.embedding")

_PROBES = [
    "Khora",
    "Maya Chen joined Northwind Labs in March 2021.",
    "What did the team ship in the second quarter, and who led the work on the new storage engine?",
    "A passage longer than the model's limit, so truncation is checked too. " * 40,
]
_TOLERANCE = 1e-5
#: A bfloat16 trace must give every probe at least this cosine with ``encode``'s vector.
_BF16_MIN_COSINE = 0.999


class TracedEncoder:
    """Encodes texts with a traced forward pass (see the module docstring)."""

    def __init__(
        self,
        module: Any,
        tokenizer: Any,
        max_length: int | None,
        dimension: int,
        tokenizer_lock: threading.RLock | None = None,
    ) -> None:
        self._module = module
        self._tokenizer = tokenizer
        # A Hugging Face fast tokenizer must not run in two threads at once; the traced
        # forward pass may.
        self._tokenizer_lock = tokenizer_lock or threading.RLock()
        self._limits: dict[str, Any] = {"truncation": True}
        if max_length is not None:
            self._limits["max_length"] = max_length
        self.dimension = dimension

    def encode(
        self, texts: list[str], batch_size: int, ids: Sequence[Sequence[int]] | None = None
    ) -> np.ndarray:
        """Unit-length float32 rows in input order; ``batch_size`` texts per forward pass,
        longest first.

        ``ids``: the texts' token ids (as the model's tokenizer gives them, truncated),
        when the caller has them. Batches are then cut by tokens, so a batch pads to little
        more than its own texts; by characters (as ``SentenceTransformer.encode`` sorts)
        7,194 entity names padded to 45,224 tokens instead of 36,558; 3,500 of them took
        6.7-8.6 s instead of 6.0-7.0 s (interleaved runs, 2 cores). The batches are padded
        from those ids instead of tokenizing the texts a second time (HotpotQA's 7,208
        entity names, under a profiler: 0.35 s of tokenizing in two passes, 0.27 s in one).
        """
        import torch

        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        rows = ids if ids is not None and len(ids) == len(texts) else None
        size_of = [len(row) for row in rows] if rows is not None else [len(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: -size_of[i])
        size = max(1, batch_size)
        pad_id = getattr(self._tokenizer, "pad_token_id", None)
        right = getattr(self._tokenizer, "padding_side", "right") == "right"
        # The rows padded from the caller's ids (when the tokenizer pads with an int, on the right).
        pad_rows = rows if right and isinstance(pad_id, int) else None
        with torch.inference_mode():
            for lo in range(0, len(order), size):
                idx = order[lo : lo + size]
                if pad_rows is not None and isinstance(pad_id, int):
                    input_ids, attention_mask = _padded([pad_rows[i] for i in idx], pad_id)
                else:
                    with self._tokenizer_lock:
                        batch = self._tokenizer(
                            [texts[i] for i in idx], padding=True, return_tensors="pt", **self._limits
                        )
                    input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
                out[idx] = self._module(input_ids, attention_mask).numpy()
        return out


def _padded(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any]:
    """``input_ids`` and ``attention_mask`` for ``rows`` padded on the right to the longest,
    as the tokenizer's ``padding=True`` gives them."""
    import torch

    width = max(len(row) for row in rows)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return torch.from_numpy(input_ids), torch.from_numpy(mask)


def _mean_pooled_model(model: Any) -> Any | None:
    """The Hugging Face model inside ``model`` when ``model`` is Transformer -> mean Pooling
    (-> Normalize) on the CPU, else None."""
    try:
        modules = list(model)
    except TypeError:
        return None
    if len(modules) not in (2, 3):
        return None
    transformer, pooling = modules[0], modules[1]
    hf = getattr(transformer, "auto_model", None)
    mode = getattr(pooling, "pooling_mode", None)
    if mode is None and getattr(pooling, "pooling_mode_mean_tokens", False):
        mode = "mean"
    if hf is None or type(pooling).__name__ != "Pooling" or mode != "mean":
        return None
    if len(modules) == 3 and type(modules[2]).__name__ != "Normalize":
        return None
    if not str(getattr(model, "device", "cpu")).startswith("cpu"):
        return None
    return hf


def trace_encoder(
    model: Any, *, bfloat16: bool = False, tokenizer_lock: threading.RLock | None = None
) -> TracedEncoder | None:
    """A :class:`TracedEncoder` for a loaded ``SentenceTransformer``, or None when the model
    is not of the traced kind or the trace does not reproduce ``encode``.

    ``bfloat16``: trace a bfloat16 copy of the weights (pooling and the output stay float32);
    kept when every probe's vector is within cosine :data:`_BF16_MIN_COSINE` of ``encode``'s.
    ``tokenizer_lock``: held around every use of the model's tokenizer (shared with the
    model's other users).
    """
    hf = _mean_pooled_model(model)
    tokenizer = getattr(model, "tokenizer", None)
    if hf is None or not callable(tokenizer):
        return None
    try:
        import torch

        if bfloat16:
            hf = copy.deepcopy(hf).to(torch.bfloat16)

        class MeanPooled(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner: Any = hf  # not None (checked above)

            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                tokens = self.inner(input_ids=input_ids, attention_mask=attention_mask)[0].float()
                mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
                pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(pooled, dim=1)

        max_length = getattr(model, "max_seq_length", None)
        max_length = max_length if isinstance(max_length, int) else None
        example = tokenizer(_PROBES[1:2], return_tensors="pt", truncation=True)
        # Tracing reads every attribute of the model, and transformers logs a warning about
        # the (unused) training loss when its ``loss_function`` is read.
        quiet = logging.getLogger("transformers.modeling_utils")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = torch.jit.trace(
                    MeanPooled().eval(),
                    (example["input_ids"], example["attention_mask"]),
                    strict=False,
                    check_trace=False,
                )
        finally:
            quiet.setLevel(level)
        expected = model.encode(
            _PROBES, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        traced = TracedEncoder(module, tokenizer, max_length, int(expected.shape[1]), tokenizer_lock)
        limits = {"truncation": True, **({"max_length": max_length} if max_length is not None else {})}
        probe_ids = tokenizer(list(_PROBES), **limits)["input_ids"]
        # Batched (tokenized per batch, and padded from the caller's ids) and alone.
        checks = [
            traced.encode(list(_PROBES), len(_PROBES)),
            traced.encode(list(_PROBES), len(_PROBES), probe_ids),
            np.vstack([traced.encode([t], 1) for t in _PROBES]),
        ]
        if bfloat16:
            cosine = min(float((got * expected).sum(1).min()) for got in checks)
            if cosine < _BF16_MIN_COSINE:
                logger.info("bfloat16 encoder reaches only cosine %.5f of encode(); not used", cosine)
                return None
            return traced
        worst = max(float(np.abs(got - expected).max()) for got in checks)
        if worst > _TOLERANCE:
            logger.info("Traced encoder differs from encode() by %.2g; using encode()", worst)
            return None
        return traced
    except Exception as exc:  # the trace is an optimisation only
        logger.info("Could not trace the embedding model (%s: %s); using encode()", type(exc).__name__, exc)
        return None
