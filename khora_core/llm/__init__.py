"""The LLM client: litellm with structured output, one retry predicate and Khora errors."""

from __future__ import annotations

from khora_core.llm.client import LLMClient
from khora_core.llm.retry import is_retryable, map_llm_error, retry_async
from khora_core.llm.structured import MalformedOutputError, parse_json_object, strip_code_fences

__all__ = [
    "LLMClient",
    "MalformedOutputError",
    "is_retryable",
    "map_llm_error",
    "parse_json_object",
    "retry_async",
    "strip_code_fences",
]
