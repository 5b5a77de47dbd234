"""HyDE: search with the embedding of a hypothetical answer passage.

``QueryConfig.enable_hyde``: ``"always"``, ``"never"``, or ``"auto"`` (fires on COMPLEX or
temporal questions). It needs an LLM; without one it never fires. The passage's embedding
runs through the vector channel as an extra ``"hyde"`` ranking, fused at half the vector
weight: it widens recall for questions phrased unlike their answers without outvoting the
question's own embedding. Any LLM failure, and an answer that echoes the prompt, skips HyDE
(recorded in ``engine_info``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from khora_core.errors import ConfigError, LLMError
from khora_core.retrieval.router import QueryComplexity

if TYPE_CHECKING:
    from khora_core.llm.client import LLMClient

__all__ = ["HYDE_WEIGHT_FACTOR", "hypothetical_passage", "should_use_hyde"]

#: The "hyde" ranking's fusion weight, as a fraction of the vector weight.
HYDE_WEIGHT_FACTOR = 0.5

_PROMPT = """Write a short passage (3-5 sentences) that would answer the question below, as it might
appear in notes, emails or documents. Invent plausible specifics; do not say you are unsure.

Question: {query}

Passage:"""


def should_use_hyde(setting: str, *, complexity: QueryComplexity, is_temporal: bool, has_llm: bool) -> bool:
    """Whether HyDE runs for this question (see the module docstring)."""
    if not has_llm or setting == "never":
        return False
    if setting == "always":
        return True
    return complexity is QueryComplexity.COMPLEX or is_temporal


async def hypothetical_passage(query: str, llm: LLMClient, *, max_tokens: int = 200) -> str | None:
    """A hypothetical answer passage, or None when the LLM fails, answers nothing or echoes
    the prompt back."""
    try:
        text = await llm.complete_text(_PROMPT.format(query=query), max_tokens=max_tokens)
    except (LLMError, ConfigError):
        return None
    text = (text or "").strip()
    if not text or _echoes_prompt(text, query):
        return None
    return text


def _echoes_prompt(text: str, query: str) -> bool:
    """Whether the answer repeats the instructions (small base models often do): its
    embedding would be the prompt's, not a hypothetical answer's."""
    head = " ".join(text.split()).casefold()
    instructions = " ".join(_PROMPT.split("\n\n")[0].split()).casefold()
    return head.startswith(instructions[:60]) or f"question: {query}".casefold() in head
