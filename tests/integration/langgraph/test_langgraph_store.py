"""``KhoraStore`` beside LangGraph's ``InMemoryStore``: the same operations, the same answers.

Every test runs on the embedded store and on PostgreSQL + Neo4j (see ``conftest.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError
from langgraph.store.memory import InMemoryStore

from khora_core import KhoraSync
from khora_core.errors import ConfigError, InvalidInputError, KhoraAbstention, KhoraError
from khora_integrations.langchain import KhoraEmbeddings
from khora_integrations.langgraph import KhoraSearchItem, KhoraStore, StoreNamespaceError

ADA = ("users", "ada")
BOB = ("users", "bob")

#: (namespace, key, value): user facts an agent would keep.
FACTS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (ADA, "diet", {"text": "Ada is vegetarian and loves lentil soup.", "kind": "food", "rank": 2}),
    (
        ADA,
        "job",
        {"text": "Ada works as a mathematician on the Analytical Engine.", "kind": "work", "rank": 1},
    ),
    (ADA, "pet", {"text": "Ada has a grey cat called Puff.", "kind": "home", "rank": 3}),
    (BOB, "diet", {"text": "Bob eats steak and chips every Friday.", "kind": "food", "rank": 2}),
    (BOB, "city", {"text": "Bob lives in Manchester near the canal.", "kind": "home", "rank": 5}),
    (
        ("users", "ada", "notes"),
        "n1",
        {"text": "Ada prefers meetings in the morning.", "kind": "work", "rank": 4},
    ),
    (("docs",), "readme", {"text": "How to install the analytics package.", "tags": ["guide", "install"]}),
]


def _load(store: BaseStore) -> None:
    for namespace, key, value in FACTS:
        store.put(namespace, key, value)


def _view(item: Any) -> tuple[tuple[str, ...], str, dict[str, Any]] | None:
    return None if item is None else (tuple(item.namespace), item.key, item.value)


def test_get_put_update_delete_match_in_memory_store(store: KhoraStore, reference: InMemoryStore) -> None:
    for s in (store, reference):
        _load(s)
        s.put(ADA, "diet", {"text": "Ada became vegan last spring.", "kind": "food", "rank": 2})
        s.delete(BOB, "city")
        s.delete(BOB, "never-stored")
    for namespace, key, _ in [*FACTS, (ADA, "missing", {}), (("nobody",), "diet", {})]:
        assert _view(store.get(namespace, key)) == _view(reference.get(namespace, key)), (namespace, key)
    diet = store.get(ADA, "diet")
    assert diet is not None and diet.value["text"] == "Ada became vegan last spring."
    assert diet.created_at <= diet.updated_at


def test_list_namespaces_matches_in_memory_store(store: KhoraStore, reference: InMemoryStore) -> None:
    for s in (store, reference):
        _load(s)
    cases: list[dict[str, Any]] = [
        {},
        {"prefix": ("users",)},
        {"prefix": ("users", "*")},
        {"suffix": ("notes",)},
        {"prefix": ("users",), "suffix": ("bob",)},
        {"max_depth": 1},
        {"max_depth": 2, "prefix": ("users",)},
        {"limit": 2, "offset": 1},
        {"prefix": ("nobody",)},
    ]
    for case in cases:
        assert store.list_namespaces(**case) == reference.list_namespaces(**case), case


def test_search_by_meaning_puts_the_relevant_item_first(store: KhoraStore, reference: InMemoryStore) -> None:
    for s in (store, reference):
        _load(s)
    questions = {
        (ADA, "What does Ada like to eat?"): "diet",
        (ADA, "What is Ada's profession?"): "job",
        (ADA, "Does Ada have any animals at home?"): "pet",
        (("users",), "Where does Bob live?"): "city",
        ((), "installing the package"): "readme",
    }
    for (prefix, question), expected in questions.items():
        ours = store.search(prefix, query=question, limit=3)
        theirs = reference.search(prefix, query=question, limit=3)
        assert theirs[0].key == expected, "the reference agrees on the relevant item"
        assert ours and ours[0].key == expected, (question, [i.key for i in ours])
        assert all(isinstance(i, KhoraSearchItem) for i in ours) and ours[0].score is not None
        assert all(tuple(i.namespace)[: len(prefix)] == prefix for i in ours)


def test_search_filters_match_in_memory_store(store: KhoraStore, reference: InMemoryStore) -> None:
    for s in (store, reference):
        _load(s)
    every = [(), ("users",)]
    cases: list[tuple[tuple[str, ...], dict[str, Any]]] = [
        *((p, {"kind": "food"}) for p in every),
        *((p, {"kind": {"$ne": "food"}}) for p in every),
        *((p, {"tags": ["guide", "install"]}) for p in every),
        *((p, {"kind": "food", "rank": 2}) for p in every),
        *((p, {"kind": "nothing"}) for p in every),
        # InMemoryStore cannot range-compare a missing field: only where every item has it
        (("users",), {"rank": {"$gte": 2, "$lt": 5}}),
        (("users",), {"rank": {"$gt": 1, "$lte": 3}}),
    ]
    selective = 0
    for prefix, flt in cases:
        ours = {(tuple(i.namespace), i.key) for i in store.search(prefix, filter=flt, limit=50)}
        theirs = {(tuple(i.namespace), i.key) for i in reference.search(prefix, filter=flt, limit=50)}
        assert ours == theirs, (prefix, flt)
        selective += bool(theirs)
    assert selective == len(cases) - 3  # "nothing" twice, and no user item has tags
    # with a query the filter is a hard gate
    hits = store.search(("users",), query="What does Ada like to eat?", filter={"kind": "home"})
    assert hits and {i.key for i in hits} <= {"pet", "city"}


def test_search_pages_with_limit_and_offset(store: KhoraStore, reference: InMemoryStore) -> None:
    for s in (store, reference):
        _load(s)
    everything = store.search(("users",), limit=50)
    assert len(everything) == len(reference.search(("users",), limit=50)) == 6
    pages = [store.search(("users",), limit=2, offset=o) for o in (0, 2, 4, 6)]
    assert [len(p) for p in pages] == [2, 2, 2, 0]
    assert [i.key for p in pages for i in p] == [i.key for i in everything]
    assert store.search(("users",), limit=0) == []
    # newest update first without a query
    store.put(BOB, "diet", {"text": "Bob now eats fish on Fridays.", "kind": "food"})
    assert store.search(("users",), limit=1)[0].key == "diet"
    assert tuple(store.search(("users",), limit=1)[0].namespace) == BOB


def test_items_without_indexed_text_come_after_scored_ones(
    store: KhoraStore, reference: InMemoryStore
) -> None:
    for s in (store, reference):
        s.put(ADA, "diet", {"text": "Ada is vegetarian."})
        s.put(ADA, "secret", {"text": "Ada's locker code is 4411."}, index=False)
        s.put(ADA, "blob", {"other": "no text field here"})
    ours = store.search(ADA, query="What does Ada eat?", limit=5)
    theirs = reference.search(ADA, query="What does Ada eat?", limit=5)
    assert ours[0].key == theirs[0].key == "diet"
    assert {i.key for i in ours} == {i.key for i in theirs} == {"diet", "secret", "blob"}
    assert [i.score is None for i in ours] == [False, True, True]
    assert store.get(ADA, "secret").value == {"text": "Ada's locker code is 4411."}  # type: ignore[union-attr]


def test_two_keys_with_the_same_text_are_two_items(store: KhoraStore) -> None:
    store.put(ADA, "a", {"text": "Ada likes tea."})
    store.put(ADA, "b", {"text": "Ada likes tea."})
    store.put(ADA, "a", {"text": "Ada likes tea."})  # re-put of the same text
    assert store.get(ADA, "a").value == store.get(ADA, "b").value == {"text": "Ada likes tea."}  # type: ignore[union-attr]
    assert {i.key for i in store.search(ADA, query="What does Ada drink?")} == {"a", "b"}
    store.delete(ADA, "a")
    assert store.get(ADA, "a") is None and store.get(ADA, "b") is not None


async def test_async_twins_answer_like_the_sync_methods(store: KhoraStore) -> None:
    await store.aput(ADA, "diet", {"text": "Ada is vegetarian and loves lentil soup."})
    await store.aput(BOB, "diet", {"text": "Bob eats steak and chips every Friday."})
    assert _view(await store.aget(ADA, "diet")) == _view(await asyncio.to_thread(store.get, ADA, "diet"))
    hits = await store.asearch(("users",), query="Who eats meat?")
    assert hits[0].key == "diet" and tuple(hits[0].namespace) == BOB
    assert await store.alist_namespaces(prefix=("users",)) == [ADA, BOB]
    results = await store.abatch([])
    assert results == []
    await store.adelete(BOB, "diet")
    assert await store.aget(BOB, "diet") is None


def test_namespaces_are_isolated(lg_kb: KhoraSync, store: KhoraStore) -> None:
    store.put(ADA, "diet", {"text": "Ada is vegetarian and loves lentil soup."})
    store.put(BOB, "diet", {"text": "Bob eats steak and chips every Friday."})
    # the exact text of Bob's fact, searched in Ada's namespace, finds only Ada's
    assert [i.key for i in store.search(ADA, query="Bob eats steak and chips every Friday.")] == ["diet"]
    assert (
        store.search(ADA, query="Bob eats steak and chips every Friday.")[0].value["text"].startswith("Ada")
    )
    assert store.get(("users", "carol"), "diet") is None
    # another prefix is another store
    other = KhoraStore(lg_kb, index={"fields": ["text"]}, prefix=store.prefix + "-other")
    assert other.get(ADA, "diet") is None
    assert other.search(("users",), query="What does Ada eat?") == []
    assert other.list_namespaces() == []
    # each LangGraph namespace is its own Khora namespace
    ids = {ns.namespace_id for ns in lg_kb.list_namespaces()}
    assert {f"{store.prefix}/users/ada", f"{store.prefix}/users/bob"} <= ids


def test_labels_with_slashes_and_unicode_round_trip(store: KhoraStore) -> None:
    odd = ("team/α", "100% sure", "x y")
    store.put(odd, "k", {"text": "An oddly named namespace."})
    assert store.list_namespaces() == [odd]
    assert _view(store.get(odd, "k")) == (odd, "k", {"text": "An oddly named namespace."})
    assert store.get(("team", "α"), "k") is None


def test_bad_input_raises_typed_errors_and_loses_nothing(lg_kb: KhoraSync, store: KhoraStore) -> None:
    store.put(ADA, "diet", {"text": "Ada is vegetarian."})
    bad_calls = [
        lambda: store.put(ADA, "diet", "not a dict"),  # type: ignore[arg-type]
        lambda: store.put(ADA, "", {"text": "x"}),
        lambda: store.put(ADA, "diet", {"text": "x"}, index="text"),  # type: ignore[arg-type]
        lambda: store.search(ADA, filter={"text": {"$regex": "x"}}),
        lambda: store.search(ADA, filter={"a.b": 1}),
        lambda: store.search(ADA, filter=["text"]),  # type: ignore[arg-type]
        lambda: store.search(ADA, limit=-1),
        lambda: store.search(ADA, query=42),  # type: ignore[arg-type]
        lambda: store.list_namespaces(max_depth=0),
        lambda: store.list_namespaces(offset=-1),
    ]
    for call in bad_calls:
        with pytest.raises(InvalidInputError):
            call()
    for bad_ns in [(), ("users", ""), ("users", 3), "users"]:
        with pytest.raises(StoreNamespaceError) as info:
            store.batch([GetOp(bad_ns, "diet")])  # type: ignore[arg-type]
        assert isinstance(info.value, KhoraError) and isinstance(info.value, InvalidNamespaceError)
    assert store.get(ADA, "diet").value == {"text": "Ada is vegetarian."}  # type: ignore[union-attr]
    with pytest.raises(ConfigError):
        KhoraStore(lg_kb, index={"embed": KhoraEmbeddings(lg_kb)})
    with pytest.raises(ConfigError):
        KhoraStore(lg_kb, prefix="a/b")
    with pytest.raises(ConfigError):
        KhoraStore(lg_kb, index={"fields": [""]})
    with pytest.raises(InvalidInputError):
        KhoraStore(lg_kb, abstain="sometimes")
    with pytest.raises(NotImplementedError):
        store.put(ADA, "ttl", {"text": "x"}, ttl=5)


def test_abstention_policies_on_an_off_topic_query(lg_kb: KhoraSync, store: KhoraStore) -> None:
    _load(store)
    off_topic = "What is a good recipe for sourdough bread with a crispy crust?"
    flagged = store.search(ADA, query=off_topic)
    assert flagged and all(i.should_abstain for i in flagged)
    assert all(i.abstention_signals["should_abstain"] for i in flagged)
    on_topic = store.search(ADA, query="What does Ada like to eat?")
    assert on_topic and not any(i.should_abstain for i in on_topic)
    empty = KhoraStore(lg_kb, index={"fields": ["text"]}, prefix=store.prefix, abstain="empty")
    assert empty.search(ADA, query=off_topic) == []
    strict = KhoraStore(lg_kb, index={"fields": ["text"]}, prefix=store.prefix, abstain="raise")
    with pytest.raises(KhoraAbstention):
        strict.search(ADA, query=off_topic)
