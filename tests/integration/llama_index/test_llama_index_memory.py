"""``KhoraMemoryBlock`` inside LlamaIndex's ``Memory`` and ``KhoraChatStore`` beside
``SimpleChatStore``, driven by a ``MockLLM`` chat engine, on every stack."""

from __future__ import annotations

import uuid

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.memory import ChatMemoryBuffer, Memory
from llama_index.core.storage.chat_store import SimpleChatStore

from khora_core import KhoraSync
from khora_core.errors import InvalidInputError, KhoraAbstention
from khora_integrations.llama_index import KhoraChatStore, KhoraMemoryBlock

FACTS = [
    ("user", "My name is Ada and I am vegetarian; I love lentil soup."),
    ("assistant", "Noted, Ada: vegetarian, lentil soup."),
    ("user", "I work as a mathematician on the Analytical Engine."),
    ("assistant", "Got it, you work on the Analytical Engine."),
    ("user", "My cat is called Puff and she is grey."),
    ("assistant", "Puff the grey cat, noted."),
]


def _memory(block: KhoraMemoryBlock, session: str) -> Memory:
    # A tiny short-term budget, so the turns are flushed to the block as they go.
    return Memory.from_defaults(
        session_id=session,
        token_limit=60,
        chat_history_token_ratio=0.5,
        token_flush_size=20,
        memory_blocks=[block],
    )


@pytest.fixture
def block(li_kb: KhoraSync, li_namespace: str) -> KhoraMemoryBlock:
    return KhoraMemoryBlock(kb=li_kb, namespace=li_namespace, similarity_top_k=2)


async def test_flushed_turns_are_recalled_in_another_session(
    block: KhoraMemoryBlock, li_kb: KhoraSync
) -> None:
    first = _memory(block, "session-1")
    for role, text in FACTS:
        await first.aput(ChatMessage(role=role, content=text))
    assert li_kb.stats(block.namespace).documents >= 1, "the flushed turns were remembered"

    later = _memory(block, "session-2")
    messages = await later.aget(input="What food does Ada like to eat?")
    system = [m for m in messages if m.role == MessageRole.SYSTEM]
    assert system and "lentil soup" in system[0].content
    # the memory text reaches the LLM: MockLLM echoes its prompt
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=_memory(block, "session-3"))
    reply = await engine.achat("What do I work on?")
    assert "Analytical Engine" in str(reply)


async def test_session_scoped_recall_and_abstention(block: KhoraMemoryBlock, li_kb: KhoraSync) -> None:
    await block.aput(
        [ChatMessage(role="user", content="My cat is called Puff and she is grey.")], session_id="s1"
    )
    question = [ChatMessage(role="user", content="What is my cat called?")]
    assert "Puff" in await block.aget(question, session_id="s2")
    scoped = KhoraMemoryBlock(kb=li_kb, namespace=block.namespace, session_scoped=True)
    assert "Puff" in await scoped.aget(question, session_id="s1")
    assert await scoped.aget(question, session_id="s2") == ""
    off_topic = [
        ChatMessage(role="user", content="What is a good recipe for sourdough bread with a crispy crust?")
    ]
    assert await block.aget(off_topic) == ""  # abstain="empty": nothing irrelevant reaches the prompt
    strict = KhoraMemoryBlock(kb=li_kb, namespace=block.namespace, abstain="raise")
    with pytest.raises(KhoraAbstention):
        await strict.aget(off_topic)
    assert await block.aget([]) == ""


async def test_memory_namespaces_are_isolated(block: KhoraMemoryBlock, li_kb: KhoraSync) -> None:
    await block.aput([ChatMessage(role="user", content="My cat is called Puff and she is grey.")])
    other_ns = f"li-{uuid.uuid4().hex[:12]}"
    other = KhoraMemoryBlock(kb=li_kb, namespace=other_ns)
    try:
        assert await other.aget([ChatMessage(role="user", content="What is my cat called?")]) == ""
    finally:
        li_kb.delete_namespace(other_ns)


def test_memory_block_bad_input(li_kb: KhoraSync) -> None:
    with pytest.raises(InvalidInputError):
        KhoraMemoryBlock(kb=li_kb, abstain="sometimes")
    with pytest.raises(InvalidInputError):
        KhoraMemoryBlock(kb=li_kb, namespace="")


def _history(n: int, tag: str) -> list[ChatMessage]:
    roles = [MessageRole.USER, MessageRole.ASSISTANT]
    return [ChatMessage(role=roles[i % 2], content=f"{tag} message {i}") for i in range(n)]


def test_chat_store_matches_simple_chat_store(li_kb: KhoraSync, li_namespace: str) -> None:
    ours = KhoraChatStore(li_kb, namespace=li_namespace)
    theirs = SimpleChatStore()
    for store in (ours, theirs):
        store.set_messages("alice", _history(3, "alice"))
        store.add_message("alice", ChatMessage(role="user", content="one more"))
        store.set_messages("bob", _history(2, "bob"))
        store.add_message(
            "carol", ChatMessage(role="user", content="alice message 0")
        )  # same text as alice's
    for key in ("alice", "bob", "carol", "nobody"):
        assert ours.get_messages(key) == theirs.get_messages(key), key
    assert ours.get_keys() == sorted(theirs.get_keys()) == ["alice", "bob", "carol"]
    assert ours.delete_message("alice", 1) == theirs.delete_message("alice", 1)
    assert ours.delete_message("alice", 99) is theirs.delete_message("alice", 99) is None
    assert ours.delete_last_message("alice") == theirs.delete_last_message("alice")
    assert ours.get_messages("alice") == theirs.get_messages("alice")
    assert ours.delete_messages("bob") == theirs.delete_messages("bob")
    assert ours.delete_messages("bob") is theirs.delete_messages("bob") is None
    assert ours.get_keys() == ["alice", "carol"]


async def test_chat_store_async_twins_and_a_chat_engine(li_kb: KhoraSync, li_namespace: str) -> None:
    store = KhoraChatStore(li_kb, namespace=li_namespace)
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="user-1", token_limit=2000)
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    await engine.achat("Hello, I am Ada.")
    await engine.achat("I like lentil soup.")
    history = await store.aget_messages("user-1")
    assert [m.role for m in history] == [MessageRole.USER, MessageRole.ASSISTANT] * 2
    assert history[2].content == "I like lentil soup."
    # a new buffer on the same store resumes the conversation
    resumed = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="user-1")
    assert [m.content for m in resumed.get_all()] == [m.content for m in history]
    # the transcript is searchable memory too
    found = li_kb.recall("Who likes lentil soup?", namespace=li_namespace, limit=3)
    assert any("lentil soup" in c.content for c in found.chunks)
    await store.async_add_message("user-2", ChatMessage(role="user", content="hi"))
    assert await store.aget_keys() == ["user-1", "user-2"]
    assert (await store.adelete_last_message("user-2")).content == "hi"  # type: ignore[union-attr]
    assert await store.aget_keys() == ["user-1"]


def test_chat_store_bad_input_loses_nothing(li_kb: KhoraSync, li_namespace: str) -> None:
    store = KhoraChatStore(li_kb, namespace=li_namespace)
    store.set_messages("alice", _history(2, "alice"))
    with pytest.raises(InvalidInputError):
        store.set_messages("alice", ["not a message"])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        store.get_messages("")
    with pytest.raises(InvalidInputError):
        KhoraChatStore(li_kb, namespace="")
    assert store.get_messages("alice") == _history(2, "alice")
