"""``LLMClient``: a thin async wrapper over ``litellm.acompletion``.

What it adds to litellm:

* instructions travel in the *user* turn (no system message): some chat templates, such
  as the llama-2 format a local llama.cpp server falls back to, drop system messages;
* structured output via ``response_format`` plus robust JSON parsing
  (:mod:`khora_core.llm.structured`);
* litellm is called with ``max_retries=0`` and retried here with the single retry
  predicate of :mod:`khora_core.llm.retry`;
* provider errors become Khora errors (``LLMError`` / ``RetryableError`` / ``RateLimitError``).

litellm is imported lazily, on the first call, after setting
``LITELLM_LOCAL_MODEL_COST_MAP=True`` so it never fetches its cost map from the internet.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from khora_core.config import LLMConfig
from khora_core.errors import ConfigError, LLMError
from khora_core.llm.retry import retry_async
from khora_core.llm.structured import MalformedOutputError, parse_json_object

__all__ = ["LLMClient", "import_litellm"]

StructuredMode = Literal["auto", "json_object_schema", "json_schema", "json_object"]


def import_litellm() -> Any:
    """Import litellm with its remote cost-map fetch disabled.

    litellm downloads ``model_prices_and_context_window.json`` at import unless told
    otherwise; offline that blocks on a timeout and retries in a background thread.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:  # litellm is a core dependency; this means a broken install
        raise ConfigError("The LLM client needs the 'litellm' package: pip install litellm") from exc
    return litellm


class LLMClient:
    """Calls one chat model through litellm.

    Args:
        config: the ``LLMConfig`` (model, api_base, api_key, temperature, max_tokens,
            timeout_s, max_retries, concurrency).
        structured_mode: how ``complete_json`` asks for JSON. ``"auto"`` (default) uses
            ``{"type": "json_object", "schema": ...}`` when ``api_base`` is set (the form
            OpenAI-compatible local servers such as llama.cpp honour), OpenAI's
            ``json_schema`` form when litellm says the model supports it, and plain
            ``json_object`` otherwise.
        acompletion: the completion coroutine to call instead of ``litellm.acompletion``
            (for tests and custom routing); it receives litellm's keyword arguments.
        backoff_base_s: first retry delay; doubled per retry.

    Raises:
        ConfigError: on the first call when ``config.model`` is not set.
    """

    def __init__(
        self,
        config: LLMConfig,
        *,
        structured_mode: StructuredMode = "auto",
        acompletion: Callable[..., Awaitable[Any]] | None = None,
        backoff_base_s: float = 0.5,
    ) -> None:
        self.config = config
        self.structured_mode = structured_mode
        self._acompletion = acompletion
        self.backoff_base_s = backoff_base_s

    @property
    def model(self) -> str:
        """The configured model name (``KHORA_LLM_MODEL``)."""
        if not self.config.model:
            raise ConfigError(
                "No LLM is configured. Set KHORA_LLM_MODEL (for example 'openai/gpt-4o-mini') "
                "or KhoraConfig(llm={'model': ...}).",
                setting="KHORA_LLM_MODEL",
            )
        return self.config.model

    @property
    def max_retries(self) -> int:
        """Retries after the first attempt (``LLMConfig.max_retries``)."""
        return max(0, int(self.config.max_retries))

    async def complete_text(self, prompt: str, *, max_tokens: int | None = None) -> str:
        """Send ``prompt`` as the user turn and return the answer's text.

        Args:
            prompt: the whole instruction and input.
            max_tokens: answer budget; ``LLMConfig.max_tokens`` when None.

        Returns:
            The answer text (may be empty).

        Raises:
            ConfigError: no model configured.
            RateLimitError: still rate-limited after the retries.
            RetryableError: still failing transiently after the retries.
            LLMError: any other provider failure.
        """
        content, _ = await self._complete(prompt, max_tokens=max_tokens, response_format=None)
        return content

    async def complete_json(
        self, prompt: str, *, schema: dict[str, Any] | None = None, max_tokens: int | None = None
    ) -> dict[str, Any]:
        """Ask for a JSON object and return it parsed.

        Args:
            prompt: the whole instruction and input (include a short example for small models).
            schema: a JSON schema for the object, passed to the provider per ``structured_mode``.
            max_tokens: answer budget; ``LLMConfig.max_tokens`` when None.

        Returns:
            The parsed object. A truncated answer is repaired to its complete items.

        Raises:
            MalformedOutputError: the answer held no recoverable JSON object (an ``LLMError``).
            ConfigError, RateLimitError, RetryableError, LLMError: as for ``complete_text``.
        """
        content, finish = await self._complete(
            prompt, max_tokens=max_tokens, response_format=self._response_format(schema)
        )
        try:
            return parse_json_object(content)
        except MalformedOutputError as exc:
            if finish == "length":
                raise MalformedOutputError(
                    f"{exc} (the answer was cut at max_tokens; raise KHORA_LLM_MAX_TOKENS)", raw=content
                ) from None
            raise

    def _response_format(self, schema: dict[str, Any] | None) -> dict[str, Any]:
        mode = self.structured_mode
        if mode == "auto":
            if schema is None:
                mode = "json_object"
            elif self.config.api_base:
                mode = "json_object_schema"
            else:
                mode = "json_schema" if self._supports_schema() else "json_object"
        if mode == "json_object_schema" and schema is not None:
            return {"type": "json_object", "schema": schema}
        if mode == "json_schema" and schema is not None:
            return {"type": "json_schema", "json_schema": {"name": "khora_output", "schema": schema}}
        return {"type": "json_object"}

    def _supports_schema(self) -> bool:
        try:
            return bool(import_litellm().supports_response_schema(model=self.model))
        except Exception:  # unknown model in litellm's map: fall back to plain JSON mode
            return False

    async def _complete(
        self, prompt: str, *, max_tokens: int | None, response_format: dict[str, Any] | None
    ) -> tuple[str, str | None]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            # Instructions in the user turn: local chat templates may drop system messages.
            "messages": [{"role": "user", "content": prompt}],
            "temperature": self.config.temperature,
            "max_tokens": max_tokens or self.config.max_tokens,
            "timeout": self.config.timeout_s,
            # We retry ourselves (retry.py) so one failing call is one request.
            "max_retries": 0,
            # A provider without response_format support gets the prompt alone; the JSON
            # parser copes with free-form answers.
            "drop_params": True,
        }
        if response_format is not None:
            kwargs["response_format"] = response_format
        if self.config.api_base:
            kwargs["api_base"] = self.config.api_base
        if self.config.api_key:
            kwargs["api_key"] = self.config.api_key
        call = self._acompletion or import_litellm().acompletion

        async def attempt() -> Any:
            return await call(**kwargs)

        response = await retry_async(
            attempt,
            attempts=1 + self.max_retries,
            base_delay=self.backoff_base_s,
            what=f"LLM call to {self.model}",
        )
        return _content_of(response)


def _content_of(response: Any) -> tuple[str, str | None]:
    """Text and finish reason of a litellm ``ModelResponse`` (or an equivalent dict)."""
    try:
        choices = response["choices"] if isinstance(response, dict) else response.choices
        choice = choices[0]
        message = choice["message"] if isinstance(choice, dict) else choice.message
        content = message["content"] if isinstance(message, dict) else message.content
        finish = (
            choice.get("finish_reason")
            if isinstance(choice, dict)
            else getattr(choice, "finish_reason", None)
        )
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        raise LLMError(f"The LLM response had no message content: {str(response)[:200]}") from exc
    return (content or ""), finish
