"""``KhoraMemoryBlock``: Khora as a long-term block of LlamaIndex's ``Memory``."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.memory.memory import BaseMemoryBlock
from pydantic import Field, PrivateAttr

from khora_core import Khora
from khora_core.errors import InvalidInputError
from khora_core.models import SearchMode
from khora_integrations._bridge import ABSTAIN_POLICIES, KhoraRef, apply_abstention_policy

__all__ = ["DEFAULT_MEMORY_NAMESPACE", "KhoraMemoryBlock", "message_text"]

#: The namespace a ``KhoraMemoryBlock`` built without one remembers in (created on first use).
DEFAULT_MEMORY_NAMESPACE = "llama_index_memory"


def message_text(messages: list[ChatMessage]) -> str:
    """The text of ``messages``, one ``role: text`` line each (non-text blocks skipped)."""
    lines = []
    for message in messages:
        text = " ".join(b.text for b in message.blocks if isinstance(b, TextBlock) and b.text.strip())
        if text:
            lines.append(f"{message.role.value}: {text}")
    return "\n".join(lines)


class KhoraMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory for ``llama_index.core.memory.Memory``, kept and recalled by Khora.

    The turns ``Memory`` flushes from its short-term queue are remembered as one document
    per flush (``role: text`` lines, with ``session_id`` in the metadata), so Khora chunks,
    embeds and links them into its graph. Before each LLM call the block recalls (``mode``,
    hybrid by default) what is relevant to the last ``retrieval_context_window`` messages
    and returns it as text for the memory prompt; when recall says memory does not cover
    them, ``abstain="empty"`` (the default) returns nothing, ``"flag"`` returns the chunks
    anyway and ``"raise"`` raises ``KhoraAbstention``. By default every session's turns are
    recalled (memory across conversations); ``session_scoped=True`` recalls only the
    current session's.

    Attributes:
        kb: a ``Khora`` or ``KhoraSync``; when omitted one is built on the embedded default
            (or ``config``) and opened on first use.
        config: the ``KhoraConfig`` for a Khora the block owns.
        preset: the read-path preset of a Khora the block owns (``"memory"``, the default here).
        namespace: the namespace id; ``"llama_index_memory"`` by default. Created on first use.
        similarity_top_k: how many chunks to recall.
        retrieval_context_window: how many of the latest messages make the recall query.
        mode: the ``SearchMode``.
        abstain: ``"empty"``, ``"flag"`` or ``"raise"``.
        session_scoped: recall only the turns of the ``Memory``'s own session.
    """

    name: str = Field(default="KhoraMemory", description="The name of the memory block.")
    kb: Any = Field(default=None, exclude=True)
    config: Any = Field(default=None, exclude=True)
    preset: str | None = Field(default="memory", exclude=True)
    namespace: str = DEFAULT_MEMORY_NAMESPACE
    similarity_top_k: int = Field(default=3, ge=1)
    retrieval_context_window: int = Field(default=5, ge=1)
    mode: SearchMode = SearchMode.HYBRID
    abstain: str = "empty"
    session_scoped: bool = False

    _ref: KhoraRef = PrivateAttr()
    _namespace_ready: bool = PrivateAttr(default=False)

    def __init__(self, **data: Any) -> None:
        # Checked before pydantic, so a bad value is Khora's typed error, not a ValidationError.
        abstain = data.get("abstain", "empty")
        if abstain not in ABSTAIN_POLICIES:
            raise InvalidInputError(f"abstain must be one of {list(ABSTAIN_POLICIES)}, got {abstain!r}")
        namespace = data.get("namespace", DEFAULT_MEMORY_NAMESPACE)
        if not isinstance(namespace, str) or not namespace:
            raise InvalidInputError(f"namespace must be a non-empty string, got {namespace!r}")
        super().__init__(**data)

    def model_post_init(self, context: Any, /) -> None:
        owned = self.kb is None and self.config is None
        self._ref = KhoraRef(self.kb, config=self.config, preset=self.preset if owned else None)

    def close(self) -> None:
        """Close the Khora this block opened; a Khora you passed in stays open."""
        self._ref.close()

    async def _ready(self, kb: Khora) -> None:
        if not self._namespace_ready:
            await kb.create_namespace(self.namespace, namespace=self.namespace)  # idempotent
            self._namespace_ready = True

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Remember the flushed ``messages`` as one document."""
        text = message_text(messages)
        if not text:
            return
        sessions = sorted({str(m.additional_kwargs.get("session_id")) for m in messages} - {"None"})
        metadata: dict[str, Any] = {"kind": "chat_turns", "roles": [m.role.value for m in messages]}
        if sessions:
            metadata["session_id"] = sessions[0]

        async def remember(kb: Khora) -> None:
            await self._ready(kb)
            await kb.remember(text, namespace=self.namespace, metadata=metadata)

        await self._ref.acall(remember)

    async def _aget(
        self, messages: list[ChatMessage] | None = None, session_id: str | None = None, **block_kwargs: Any
    ) -> str:
        """What memory holds about the latest messages, as text ("" when nothing)."""
        query = message_text(list(messages or [])[-self.retrieval_context_window :])
        if not query:
            return ""
        flt = {"metadata.session_id": session_id} if self.session_scoped and session_id else None

        async def recall(kb: Khora) -> Any:
            await self._ready(kb)
            return await kb.recall(
                query, namespace=self.namespace, limit=self.similarity_top_k, mode=self.mode, filter=flt
            )

        result = await self._ref.acall(recall)
        keep, _ = apply_abstention_policy(result, self.abstain)
        if not keep:
            return ""
        return "\n\n".join(chunk.content for chunk in result.chunks[: self.similarity_top_k])
