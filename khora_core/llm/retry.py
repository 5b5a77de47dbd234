"""The one retry predicate for LLM and embedding calls, and the backoff loop around it.

Everything that talks to a model provider (``LLMClient``, ``LiteLLMEmbedder``) calls the
provider with ``max_retries=0`` and retries here, so there is exactly one place that
decides what is transient (:func:`is_retryable`) and one mapping from provider errors to
Khora's (:func:`map_llm_error`).

litellm is never imported by this module: provider exceptions are recognised by their
HTTP ``status_code`` and, when litellm / httpx are already loaded, by their classes.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from khora_core.errors import KhoraError, LLMError, RateLimitError, RetryableError

__all__ = ["is_retryable", "map_llm_error", "retry_async"]

T = TypeVar("T")


def _status_code(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    if code is None:
        response = getattr(exc, "response", None)
        code = getattr(response, "status_code", None)
    try:
        return int(code) if code is not None else None
    except (TypeError, ValueError):
        return None


def _loaded_classes(module: str, names: tuple[str, ...]) -> tuple[type[BaseException], ...]:
    """Exception classes from ``module`` if (and only if) it is already imported."""
    mod = sys.modules.get(module)
    if mod is None:
        return ()
    return tuple(c for c in (getattr(mod, n, None) for n in names) if isinstance(c, type))


def is_retryable(exc: BaseException) -> bool:
    """Whether a failed provider call is transient, so the same request may succeed later.

    Args:
        exc: the exception the call raised (a provider error or an already-mapped Khora error).

    Returns:
        True for timeouts, connection failures, HTTP 408/429 and 5xx; False otherwise.
    """
    # Already classified by map_llm_error: trust the classification.
    if isinstance(exc, RetryableError):
        return True
    if isinstance(exc, KhoraError):
        return False
    # Timeouts: the server did not answer in time (overloaded, cold start, long queue);
    # the request itself was fine, so the next attempt often lands.
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return True
    if isinstance(exc, _loaded_classes("litellm", ("Timeout",))):
        return True
    if isinstance(exc, _loaded_classes("httpx", ("TimeoutException",))):
        return True
    # Connection errors: refused / reset / DNS hiccup while the server restarts or a
    # proxy recycles a connection; nothing about the request is wrong.
    if isinstance(exc, ConnectionError):
        return True
    if isinstance(exc, _loaded_classes("litellm", ("APIConnectionError",))):
        return True
    if isinstance(exc, _loaded_classes("httpx", ("TransportError",))):
        return True
    status = _status_code(exc)
    if status is None:
        return False
    # 429: rate limited (RateLimitError); the provider asks us to come back later.
    # 408: the server timed the request out on its side; same reasoning as a timeout.
    if status in (408, 429):
        return True
    # 5xx: the server failed (500 internal, 502/504 gateway, 503 overloaded); the same
    # request is valid and usually succeeds once the server recovers.
    return 500 <= status < 600


def map_llm_error(exc: BaseException, *, what: str = "LLM call") -> KhoraError:
    """Translate a provider exception into Khora's error tree.

    Args:
        exc: the exception raised by litellm (or any provider client).
        what: a short description of the call for the message (``"LLM call to openai/gpt-4o"``).

    Returns:
        ``RateLimitError`` for 429, ``RetryableError`` for other transient failures, otherwise
        ``LLMError`` with a hint (authentication, unknown model, bad request). Khora errors are
        returned unchanged.
    """
    if isinstance(exc, KhoraError):
        return exc
    status = _status_code(exc)
    detail = f"{type(exc).__name__}: {exc}"
    if status == 429 or isinstance(exc, _loaded_classes("litellm", ("RateLimitError",))):
        return RateLimitError(f"{what} was rate-limited by the provider ({detail}). Retry later.")
    if is_retryable(exc):
        return RetryableError(f"{what} failed transiently ({detail}). It is safe to retry.")
    if status in (401, 403):
        return LLMError(f"{what} was refused ({detail}). Check KHORA_LLM_API_KEY / the provider key.")
    if status == 404:
        return LLMError(
            f"{what} failed: model or endpoint not found ({detail}). Check KHORA_LLM_MODEL and KHORA_LLM_API_BASE."
        )
    return LLMError(f"{what} failed ({detail}).")


async def retry_async(
    fn: Callable[[], Awaitable[T]],
    *,
    attempts: int,
    base_delay: float = 0.5,
    max_delay: float = 8.0,
    what: str = "LLM call",
) -> T:
    """Await ``fn()`` up to ``attempts`` times, backing off exponentially on transient errors.

    Args:
        fn: a zero-argument coroutine factory (called afresh on every attempt).
        attempts: total tries, at least 1.
        base_delay: seconds before the second try; doubled each time, with +-25% jitter.
        max_delay: upper bound on one wait.
        what: description used in error messages.

    Returns:
        What ``fn()`` returned.

    Raises:
        RateLimitError: still rate-limited after the last attempt.
        RetryableError: still failing transiently after the last attempt.
        LLMError: a non-transient failure (raised at once, not retried).
    """
    attempts = max(1, attempts)
    for attempt in range(attempts):
        try:
            return await fn()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            mapped = map_llm_error(exc, what=what)
            if attempt + 1 >= attempts or not is_retryable(mapped):
                if mapped is exc:
                    raise
                raise mapped from exc
            delay = min(max_delay, base_delay * (2**attempt))
            await asyncio.sleep(delay * random.uniform(0.75, 1.25))
    raise AssertionError("unreachable")  # pragma: no cover
