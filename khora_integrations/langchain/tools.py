"""Long-term memory tools for LangChain agents: remember and recall through Khora."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field, PrivateAttr

from khora_core import Khora, KhoraSync
from khora_core.config import KhoraConfig
from khora_core.errors import InvalidInputError, NamespaceNotFoundError
from khora_core.models import RecallResult
from khora_core.retrieval.context import context_text
from khora_integrations._bridge import KhoraRef

__all__ = [
    "KhoraRecallTool",
    "KhoraRememberTool",
    "RecallInput",
    "RememberInput",
    "format_recall",
    "khora_memory_tools",
]


class RememberInput(BaseModel):
    """Arguments of ``KhoraRememberTool``."""

    content: str = Field(
        description="The fact, note or conversation excerpt to keep, written to stand alone."
    )
    title: str | None = Field(default=None, description="A short title for it.")
    occurred_at: str | None = Field(
        default=None, description="When it happened, as an ISO-8601 date or datetime (e.g. 2026-03-01)."
    )
    tags: list[str] | None = Field(default=None, description="Optional labels.")


class RecallInput(BaseModel):
    """Arguments of ``KhoraRecallTool``."""

    query: str = Field(description="What to look up in long-term memory, as a question or keywords.")
    k: int = Field(default=5, ge=1, le=50, description="How many passages to return.")


class _KhoraTool(BaseTool):
    kb: Khora | KhoraSync | None = None
    config: KhoraConfig | None = None
    namespace: str

    _ref: KhoraRef = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._ref = KhoraRef(self.kb, config=self.config)


def _occurred_at(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInputError(f"occurred_at must be an ISO-8601 date, got {value!r}") from exc
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed


class KhoraRememberTool(_KhoraTool):
    """Store text in a Khora namespace (created on first use); returns a one-line receipt."""

    name: str = "khora_remember"
    description: str = (
        "Save a fact, decision or note to long-term memory so it can be recalled in later "
        "conversations. Write the content so it makes sense on its own."
    )
    args_schema: type[BaseModel] = RememberInput

    async def _remember(
        self, kb: Khora, content: str, title: str | None, occurred_at: str | None, tags: list[str] | None
    ) -> str:
        await kb.create_namespace(self.namespace, namespace=self.namespace)
        kwargs: dict[str, Any] = {"source": "langchain-agent"}
        if title:
            kwargs["title"] = title
        if tags:
            kwargs["tags"] = list(tags)
        when = _occurred_at(occurred_at)
        if when is not None:
            kwargs["occurred_at"] = when
        result = await kb.remember(content, namespace=self.namespace, **kwargs)
        if result.duplicate:
            return f"Already in memory (document {result.document_id})."
        return (
            f"Remembered as document {result.document_id} ({len(result.chunk_ids)} chunk(s), "
            f"{result.entity_count} entit{'y' if result.entity_count == 1 else 'ies'})."
        )

    def _run(
        self,
        content: str,
        title: str | None = None,
        occurred_at: str | None = None,
        tags: list[str] | None = None,
        run_manager: CallbackManagerForToolRun | None = None,
    ) -> str:
        return self._ref.call(lambda kb: self._remember(kb, content, title, occurred_at, tags))

    async def _arun(
        self,
        content: str,
        title: str | None = None,
        occurred_at: str | None = None,
        tags: list[str] | None = None,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
    ) -> str:
        return await self._ref.acall(lambda kb: self._remember(kb, content, title, occurred_at, tags))


def format_recall(result: RecallResult, *, max_chunks: int) -> str:
    """Compact, cited text for an agent: ``khora_core.retrieval.context.context_text``
    (numbered ``[n] title (date) doc:<id>`` blocks), with a warning line when recall says
    memory does not cover the question."""
    if not result.chunks:
        return "Nothing in memory matches that."
    body = context_text(result, max_chunks=max_chunks)
    if result.should_abstain:
        body = "Memory has little on this; treat these passages as weak evidence.\n\n" + body
    return body


class KhoraRecallTool(_KhoraTool):
    """Recall from a Khora namespace; returns numbered passages an agent can cite."""

    name: str = "khora_recall"
    description: str = (
        "Look up long-term memory for facts, notes and past conversations relevant to a "
        "question. Returns numbered passages with their titles and dates; cite them as [n]."
    )
    args_schema: type[BaseModel] = RecallInput

    async def _recall(self, kb: Khora, query: str, k: int) -> str:
        try:
            result = await kb.recall(query, namespace=self.namespace, limit=k)
        except NamespaceNotFoundError:
            return "Memory is empty: nothing has been remembered yet."
        return format_recall(result, max_chunks=k)

    def _run(self, query: str, k: int = 5, run_manager: CallbackManagerForToolRun | None = None) -> str:
        return self._ref.call(lambda kb: self._recall(kb, query, k))

    async def _arun(
        self, query: str, k: int = 5, run_manager: AsyncCallbackManagerForToolRun | None = None
    ) -> str:
        return await self._ref.acall(lambda kb: self._recall(kb, query, k))


def khora_memory_tools(kb: Khora | KhoraSync, namespace: str) -> list[BaseTool]:
    """The remember and recall tools over one namespace, ready for an agent's tool list.

    Args:
        kb: a ``Khora`` or ``KhoraSync`` (see ``KhoraRetriever`` on which to pick).
        namespace: the namespace id the agent's memory lives in (created on first write).
    """
    return [KhoraRememberTool(kb=kb, namespace=namespace), KhoraRecallTool(kb=kb, namespace=namespace)]
