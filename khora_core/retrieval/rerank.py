"""Optional reranking: a cross-encoder for precision, an LLM pass for temporal questions.

* **Cross-encoder** (``QueryConfig.enable_reranking``, model ``QueryConfig.reranker_model``):
  scores (question, passage) pairs. The model is loaded once per process and cached
  (module level), loaded from local files only (Khora never downloads at query time), and
  run with ``asyncio.to_thread`` so the event loop stays free. Under ``MIN_RERANK``
  candidates it is skipped: RRF order is already fine there.
* **LLM reranking** (``QueryConfig.enable_llm_reranking``): for temporal questions, one
  JSON call orders the candidates; any LLM failure keeps the fused order.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from khora_core.errors import ConfigError, LLMError, MissingExtraError

if TYPE_CHECKING:
    from khora_core.llm.client import LLMClient

__all__ = ["MIN_RERANK", "cross_encoder_scores", "llm_rerank", "load_cross_encoder"]

#: Fewer candidates than this are not reranked.
MIN_RERANK = 5

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def load_cross_encoder(model_name: str) -> Any:
    """Load (once per process) a sentence-transformers ``CrossEncoder`` from local files.

    Raises:
        MissingExtraError: sentence-transformers is not installed.
        ConfigError: the model is not available offline; names ``KHORA_QUERY_RERANKER_MODEL``.
    """
    with _LOCK:
        if model_name in _MODELS:
            return _MODELS[model_name]
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise MissingExtraError("Cross-encoder reranking", "local", "sentence-transformers") from exc
        try:
            model = CrossEncoder(model_name, local_files_only=True)
        except Exception as exc:  # OSError, ValueError, HF hub errors: all mean "not here"
            raise ConfigError(
                f"Cannot load the reranker model {model_name!r} from local files ({type(exc).__name__}: "
                f"{exc}). Set KHORA_QUERY_RERANKER_MODEL to a cross-encoder folder or a model in the local "
                "Hugging Face cache, or turn reranking off with KHORA_QUERY_ENABLE_RERANKING=false.",
                setting="KHORA_QUERY_RERANKER_MODEL",
            ) from exc
        _MODELS[model_name] = model
        return model


async def cross_encoder_scores(query: str, passages: Sequence[str], *, model_name: str) -> list[float] | None:
    """Cross-encoder scores for each passage, or None when skipped (fewer than ``MIN_RERANK``).

    Raises:
        ConfigError: the model cannot be loaded offline.
    """
    if len(passages) < MIN_RERANK:
        return None

    def run() -> list[float]:
        model = load_cross_encoder(model_name)
        scores = model.predict([(query, p) for p in passages], show_progress_bar=False)
        return [float(s) for s in scores]

    return await asyncio.to_thread(run)


_LLM_PROMPT = """Order the passages by how well they answer the question, paying attention to dates
and to which information is the most recent when the question asks for it.
Return JSON {{"ranking": [passage numbers, best first]}} listing every passage number once.

Question: {query}

{passages}"""


async def llm_rerank(query: str, passages: Sequence[str], llm: LLMClient) -> list[int] | None:
    """Ask the LLM to order ``passages``; returns indices best first, or None on failure.

    Indices the LLM omits keep their relative order after the ones it ranked.
    """
    if len(passages) < 2:
        return None
    listing = "\n\n".join(f"[{i + 1}] {p[:800]}" for i, p in enumerate(passages))
    # Every passage number once: servers that honour the schema (llama.cpp's grammar) cannot
    # stop early, count past the last passage or invent numbers (uniqueness stays the model's).
    numbers = list(range(1, len(passages) + 1))
    schema = {
        "type": "object",
        "properties": {
            "ranking": {
                "type": "array",
                "items": {"type": "integer", "enum": numbers},
                "minItems": len(numbers),
                "maxItems": len(numbers),
            }
        },
        "required": ["ranking"],
    }
    try:
        data = await llm.complete_json(_LLM_PROMPT.format(query=query, passages=listing), schema=schema)
        raw = data["ranking"]
        order = [int(i) - 1 for i in raw if 1 <= int(i) <= len(passages)]
    except (LLMError, ConfigError, KeyError, TypeError, ValueError):
        return None
    seen = list(dict.fromkeys(order))
    return seen + [i for i in range(len(passages)) if i not in set(seen)]
