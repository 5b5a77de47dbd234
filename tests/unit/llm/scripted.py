"""A scripted stand-in for ``litellm.acompletion`` (the client accepts one by design)."""

from __future__ import annotations

from typing import Any


class Script:
    """Answers each call with the next scripted item (an exception is raised)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        content, finish = answer if isinstance(answer, tuple) else (answer, "stop")
        return {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": finish}]}


class HTTPStatusError(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
