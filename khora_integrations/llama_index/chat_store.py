"""``KhoraChatStore``: LlamaIndex chat histories kept in a Khora namespace."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store.base import BaseChatStore
from pydantic import PrivateAttr

from khora_core import Khora
from khora_core.errors import InvalidInputError
from khora_core.ingest.dedup import content_hash
from khora_core.models import Document
from khora_integrations._bridge import KhoraRef
from khora_integrations.llama_index.memory import message_text

__all__ = ["DEFAULT_CHAT_NAMESPACE", "KhoraChatStore"]

#: The namespace a ``KhoraChatStore`` built without one keeps chats in (created on first use).
DEFAULT_CHAT_NAMESPACE = "llama_index_chats"
_PAGE = 500


class KhoraChatStore(BaseChatStore):
    """A ``BaseChatStore`` whose histories live in Khora (for ``ChatMemoryBuffer`` & co).

    Each chat key is one Khora document (``external_id`` = the key): the messages are kept
    whole in its metadata, and its content is the transcript (``role: text`` lines), so a
    conversation is also searchable with ``Khora.recall`` in the same namespace. Writing a
    history replaces the document; an empty history removes the key. The async methods are
    the implementation; the sync ones run them through ``khora_core.sync.run_sync``.

    Args:
        kb: a ``Khora`` or ``KhoraSync``; when omitted one is built on the embedded default
            (or ``config``) and opened on first use.
        namespace: the namespace id; ``"llama_index_chats"`` by default, created on first use.
        config: the ``KhoraConfig`` for a Khora the store owns.
    """

    namespace: str = DEFAULT_CHAT_NAMESPACE
    _ref: KhoraRef = PrivateAttr()

    def __init__(
        self, kb: Any = None, *, namespace: str = DEFAULT_CHAT_NAMESPACE, config: Any = None, **kwargs: Any
    ) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise InvalidInputError(f"namespace must be a non-empty string, got {namespace!r}")
        # ``namespace`` is this subclass's pydantic field; mypy checks against the base's fields only.
        super().__init__(namespace=namespace, **kwargs)  # type: ignore[call-arg]
        self._ref = KhoraRef(kb, config=config)

    @classmethod
    def class_name(cls) -> str:
        return "KhoraChatStore"

    def close(self) -> None:
        """Close the Khora this store opened; a Khora you passed in stays open."""
        self._ref.close()

    # -- one implementation ------------------------------------------------------------------
    async def _doc(self, kb: Khora, key: str) -> Document | None:
        await kb.create_namespace(self.namespace, namespace=self.namespace)  # idempotent
        found = await kb.engine.stack.documents.find_documents_by_external_id(self.namespace, _key(key))
        return found[0] if found else None

    async def _read(self, kb: Khora, key: str) -> list[ChatMessage]:
        doc = await self._doc(kb, key)
        if doc is None:
            return []
        return [ChatMessage.model_validate(m) for m in doc.metadata.get("messages", [])]

    async def _write(self, kb: Khora, key: str, messages: list[ChatMessage]) -> None:
        for m in messages:
            if not isinstance(m, ChatMessage):
                raise InvalidInputError(f"Chat messages must be ChatMessage objects, got {type(m).__name__}")
        current = await self._doc(kb, key)
        if not messages:
            if current is not None:
                await kb.forget(current.id, namespace=self.namespace)
            return
        dumped = [m.model_dump(mode="json") for m in messages]
        text = message_text(messages) or f"(chat {key}: {len(messages)} messages without text)"
        docs = kb.engine.stack.documents
        # Khora keeps identical text once per namespace: another key's identical transcript
        # is told apart by this key; this key's own identical copy is replaced.
        for candidate in (text, f"{text}\n\n[{key}]"):
            same = await docs.find_document_by_hash(self.namespace, content_hash(candidate))
            if same is None or same.external_id == key:
                if same is not None:
                    await kb.forget(same.id, namespace=self.namespace)
                await kb.remember(
                    candidate, namespace=self.namespace, external_id=key, metadata={"messages": dumped}
                )
                return
        raise InvalidInputError(f"The transcript of chat {key!r} is already stored under other keys")

    async def _append(self, kb: Khora, key: str, message: ChatMessage) -> None:
        await self._write(kb, key, [*await self._read(kb, key), message])

    async def _pop(self, kb: Khora, key: str, idx: int | None) -> ChatMessage | None:
        messages = await self._read(kb, key)
        if not messages:
            return None
        if idx is None:
            idx = len(messages) - 1
        if not isinstance(idx, int) or not 0 <= idx < len(messages):
            return None
        removed = messages.pop(idx)
        await self._write(kb, key, messages)
        return removed

    async def _delete_all(self, kb: Khora, key: str) -> list[ChatMessage] | None:
        messages = await self._read(kb, key)
        if not messages:
            return None
        await self._write(kb, key, [])
        return messages

    async def _keys(self, kb: Khora) -> list[str]:
        await kb.create_namespace(self.namespace, namespace=self.namespace)
        keys: list[str] = []
        offset = 0
        while True:
            page = await kb.engine.stack.documents.list_documents(self.namespace, offset=offset, limit=_PAGE)
            keys.extend(d.external_id for d in page if d.external_id)
            offset += len(page)
            if len(page) < _PAGE:
                return sorted(keys)

    # -- BaseChatStore: async ------------------------------------------------------------------
    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Replace the history of ``key`` (an empty list removes the key)."""
        await self._ref.acall(lambda kb: self._write(kb, _key(key), list(messages)))

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        """The history of ``key`` (``[]`` when unknown)."""
        return await self._ref.acall(lambda kb: self._read(kb, _key(key)))

    async def async_add_message(self, key: str, message: ChatMessage) -> None:
        """Append ``message`` to the history of ``key``."""
        await self._ref.acall(lambda kb: self._append(kb, _key(key), message))

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        """Remove ``key``; returns its history, or None when it had none."""
        return await self._ref.acall(lambda kb: self._delete_all(kb, _key(key)))

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Remove message ``idx`` of ``key``; returns it, or None when there is none."""
        return await self._ref.acall(lambda kb: self._pop(kb, _key(key), idx))

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        """Remove the last message of ``key``; returns it, or None when there is none."""
        return await self._ref.acall(lambda kb: self._pop(kb, _key(key), None))

    async def aget_keys(self) -> list[str]:
        """Every key with a history, sorted."""
        return await self._ref.acall(self._keys)

    # -- BaseChatStore: sync (see the async twins) ----------------------------------------------
    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """See ``aset_messages``."""
        self._ref.call(lambda kb: self._write(kb, _key(key), list(messages)))

    def get_messages(self, key: str) -> list[ChatMessage]:
        """See ``aget_messages``."""
        return self._ref.call(lambda kb: self._read(kb, _key(key)))

    def add_message(self, key: str, message: ChatMessage) -> None:
        """See ``async_add_message``."""
        self._ref.call(lambda kb: self._append(kb, _key(key), message))

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """See ``adelete_messages``."""
        return self._ref.call(lambda kb: self._delete_all(kb, _key(key)))

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """See ``adelete_message``."""
        return self._ref.call(lambda kb: self._pop(kb, _key(key), idx))

    def delete_last_message(self, key: str) -> ChatMessage | None:
        """See ``adelete_last_message``."""
        return self._ref.call(lambda kb: self._pop(kb, _key(key), None))

    def get_keys(self) -> list[str]:
        """See ``aget_keys``."""
        return self._ref.call(self._keys)


def _key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"A chat key must be a non-empty string, got {key!r}")
    return key
