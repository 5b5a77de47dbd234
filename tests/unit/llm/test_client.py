"""LLMClient against a scripted completion function (no network; real traffic is in cassettes)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from khora_core.config import LLMConfig
from khora_core.errors import ConfigError, LLMError, RetryableError
from khora_core.llm.client import LLMClient
from khora_core.llm.structured import MalformedOutputError
from tests.unit.llm.scripted import HTTPStatusError as _HTTPError
from tests.unit.llm.scripted import Script


def _client(script: Script, **config: Any) -> LLMClient:
    cfg = LLMConfig(model="openai/local", **config)
    return LLMClient(cfg, acompletion=script, backoff_base_s=0)


async def test_complete_json_request_shape_and_parsing() -> None:
    script = Script('```json\n{"ok": true}\n```')
    client = _client(script, api_base="http://127.0.0.1:9/v1", api_key="sk-local", max_tokens=77)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    assert await client.complete_json("Say ok.", schema=schema) == {"ok": True}
    [call] = script.calls
    assert call["messages"] == [{"role": "user", "content": "Say ok."}]  # no system message
    assert call["response_format"] == {"type": "json_object", "schema": schema}
    assert call["max_retries"] == 0 and call["max_tokens"] == 77
    assert call["api_base"] == "http://127.0.0.1:9/v1" and call["api_key"] == "sk-local"


async def test_structured_modes() -> None:
    schema = {"type": "object"}
    script = Script("{}")
    client = LLMClient(LLMConfig(model="openai/x"), structured_mode="json_schema", acompletion=script)
    await client.complete_json("p", schema=schema)
    assert script.calls[0]["response_format"]["type"] == "json_schema"
    assert script.calls[0]["response_format"]["json_schema"]["schema"] == schema
    script = Script("{}")
    await _client(script).complete_json("p")
    assert script.calls[0]["response_format"] == {"type": "json_object"}


async def test_transient_errors_are_retried_with_one_request_each() -> None:
    script = Script(_HTTPError(503), TimeoutError(), "plain text")
    client = _client(script, max_retries=2)
    assert await client.complete_text("hi", max_tokens=5) == "plain text"
    assert len(script.calls) == 3 and "response_format" not in script.calls[0]


async def test_errors_after_retries_and_permanent_errors() -> None:
    client = _client(Script(_HTTPError(502), _HTTPError(502)), max_retries=1)
    with pytest.raises(RetryableError):
        await client.complete_text("hi")
    script = Script(_HTTPError(401), "never")
    with pytest.raises(LLMError) as info:
        await _client(script, max_retries=3).complete_text("hi")
    assert not isinstance(info.value, RetryableError) and len(script.calls) == 1


async def test_malformed_json_mentions_truncation() -> None:
    with pytest.raises(MalformedOutputError, match="max_tokens"):
        await _client(Script(("{", "length"))).complete_json("p")
    with pytest.raises(MalformedOutputError):
        await _client(Script("I cannot do that.")).complete_json("p")


async def test_no_model_configured() -> None:
    client = LLMClient(LLMConfig(), acompletion=Script())
    with pytest.raises(ConfigError, match="KHORA_LLM_MODEL"):
        await client.complete_text("hi")


def test_litellm_is_not_imported_at_module_import() -> None:
    import subprocess
    import sys

    code = "import sys, khora_core.llm, khora_core.embedding, khora_core.ingest; print(json.dumps(['litellm' in sys.modules, 'torch' in sys.modules]))"
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == [False, False]
