from __future__ import annotations

import asyncio

import pytest

from khora_core.errors import LLMError, RateLimitError, RetryableError
from khora_core.llm.client import import_litellm
from khora_core.llm.retry import is_retryable, map_llm_error, retry_async


class _HTTPError(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (TimeoutError(), True),
        (asyncio.TimeoutError(), True),
        (ConnectionResetError(), True),
        (_HTTPError(429), True),
        (_HTTPError(503), True),
        (_HTTPError(500), True),
        (_HTTPError(408), True),
        (_HTTPError(400), False),
        (_HTTPError(401), False),
        (ValueError("bad"), False),
        (RetryableError("x"), True),
        (LLMError("x"), False),
    ],
)
def test_is_retryable(exc: BaseException, expected: bool) -> None:
    assert is_retryable(exc) is expected


def test_litellm_exceptions_map_to_khora_errors() -> None:
    litellm = import_litellm()
    rate = litellm.RateLimitError("slow down", llm_provider="openai", model="m")
    assert isinstance(map_llm_error(rate), RateLimitError)
    timeout = litellm.Timeout("too slow", model="m", llm_provider="openai")
    assert type(map_llm_error(timeout)) is RetryableError
    conn = litellm.APIConnectionError("refused", llm_provider="openai", model="m")
    assert type(map_llm_error(conn)) is RetryableError
    auth = litellm.AuthenticationError("bad key", llm_provider="openai", model="m")
    mapped = map_llm_error(auth)
    assert type(mapped) is LLMError and "KHORA_LLM_API_KEY" in str(mapped)
    bad = litellm.BadRequestError("bad", model="m", llm_provider="openai")
    assert type(map_llm_error(bad)) is LLMError


async def test_retry_async_retries_transient_then_succeeds() -> None:
    calls = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise _HTTPError(503)
        return "ok"

    assert await retry_async(flaky, attempts=3, base_delay=0) == "ok"
    assert len(calls) == 3


async def test_retry_async_gives_up_and_maps() -> None:
    calls = []

    async def always_429() -> str:
        calls.append(1)
        raise _HTTPError(429)

    with pytest.raises(RateLimitError) as info:
        await retry_async(always_429, attempts=2, base_delay=0)
    assert len(calls) == 2 and isinstance(info.value.__cause__, _HTTPError)


async def test_retry_async_does_not_retry_permanent_errors() -> None:
    calls = []

    async def bad_request() -> str:
        calls.append(1)
        raise _HTTPError(400)

    with pytest.raises(LLMError):
        await retry_async(bad_request, attempts=5, base_delay=0)
    assert len(calls) == 1
