"""Khora-specific behaviour of the LangChain integration: abstention policies, metadata,
filters, the vector store beyond the standard suite, the memory tools and LCEL use."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate

from khora_core import Khora, KhoraConfig, KhoraSync
from khora_core.errors import (
    InvalidInputError,
    KhoraAbstention,
    NamespaceNotFoundError,
    RecallFilterUnsupportedError,
)
from khora_core.filters import RecallFilter
from khora_integrations.langchain import (
    ABSTENTION_EVENT,
    KhoraRetriever,
    KhoraVectorStore,
    khora_memory_tools,
)

OFF_TOPIC = "What is a good recipe for sourdough bread with a crispy crust?"
ON_TOPIC = "What did Ada Lovelace write for the Analytical Engine?"


class EventRecorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.events.append((name, data))


# -- abstention -----------------------------------------------------------------------------


def test_flag_policy_keeps_documents_and_marks_them(lc_corpus):
    kb, ns = lc_corpus
    recorder = EventRecorder()
    docs = KhoraRetriever(kb=kb, namespace=ns, k=3).invoke(OFF_TOPIC, config={"callbacks": [recorder]})
    assert docs, "flag keeps what recall found"
    assert all(d.metadata["should_abstain"] is True for d in docs)
    assert all(d.metadata["abstention_signals"]["should_abstain"] is True for d in docs)
    assert [name for name, _ in recorder.events] == [ABSTENTION_EVENT]
    payload = recorder.events[0][1]
    assert payload["policy"] == "flag" and payload["namespace"] == ns
    assert payload["signals"]["should_abstain"] is True


async def test_flag_policy_dispatches_the_event_from_async_code(lc_corpus):
    kb, ns = lc_corpus
    recorder = EventRecorder()
    docs = await KhoraRetriever(kb=kb, namespace=ns, k=3).ainvoke(OFF_TOPIC, config={"callbacks": [recorder]})
    assert docs and all(d.metadata["should_abstain"] for d in docs)
    assert [name for name, _ in recorder.events] == [ABSTENTION_EVENT]


def test_empty_policy_returns_nothing_off_topic_and_documents_on_topic(lc_corpus):
    kb, ns = lc_corpus
    retriever = KhoraRetriever(kb=kb, namespace=ns, k=3, abstain="empty")
    assert retriever.invoke(OFF_TOPIC) == []
    on_topic = retriever.invoke(ON_TOPIC)
    assert on_topic and all(d.metadata["should_abstain"] is False for d in on_topic)


def test_raise_policy_raises_with_the_signals(lc_corpus):
    kb, ns = lc_corpus
    retriever = KhoraRetriever(kb=kb, namespace=ns, k=3, abstain="raise")
    with pytest.raises(KhoraAbstention) as info:
        retriever.invoke(OFF_TOPIC)
    assert info.value.query == OFF_TOPIC
    assert info.value.signals["should_abstain"] is True
    assert retriever.invoke(ON_TOPIC)  # on topic it answers


# -- retriever documents, filters, LCEL ----------------------------------------------------


def test_retriever_documents_carry_chunk_ids_and_provenance(lc_corpus):
    kb, ns = lc_corpus
    docs = KhoraRetriever(kb=kb, namespace=ns, k=2, mode="vector").invoke(ON_TOPIC)
    assert len(docs) == 2
    top = docs[0]
    assert top.metadata["chunk_id"] == top.id
    assert top.metadata["external_id"] == top.metadata["key"] == top.metadata["title"]
    assert top.metadata["source"] == "history"
    assert top.metadata["channels"] == ["vector"]
    assert 0.0 < top.metadata["vector_similarity"] <= 1.0
    assert top.metadata["score"] >= docs[1].metadata["score"]
    assert "Ada" in top.page_content


@pytest.mark.parametrize(
    "flt",
    [
        {"key": {"$in": ["cards", "difference"]}},  # PGVector dialect
        RecallFilter.parse({"metadata.key": {"$in": ["cards", "difference"]}}),  # Khora grammar
    ],
)
def test_retriever_filters(lc_corpus, flt):
    kb, ns = lc_corpus
    docs = KhoraRetriever(kb=kb, namespace=ns, k=5, filter=flt).invoke(ON_TOPIC)
    assert docs and {d.metadata["key"] for d in docs} <= {"cards", "difference"}
    per_call = KhoraRetriever(kb=kb, namespace=ns, k=5).invoke(ON_TOPIC, filter={"key": "music"})
    assert per_call and {d.metadata["key"] for d in per_call} == {"music"}


def test_retriever_in_an_lcel_chain(lc_corpus):
    kb, ns = lc_corpus
    retriever = KhoraRetriever(kb=kb, namespace=ns, k=2)
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    seen: list[str] = []

    def format_docs(docs: list[Document]) -> str:
        text = "\n".join(d.page_content for d in docs)
        seen.append(text)
        return text

    chain = (
        {"context": retriever | format_docs, "question": lambda q: q}
        | prompt
        | FakeListChatModel(responses=["Notes on the Engine."])
        | StrOutputParser()
    )
    assert chain.invoke(ON_TOPIC) == "Notes on the Engine."
    assert "Analytical Engine" in seen[0]


# -- vector store beyond the standard suite ------------------------------------------------

LONG_TEXT = "\n\n".join(
    f"Section {i}. The Jacquard loom wove patterned silk from a chain of punched cards, "
    f"and card number {i} encoded one row of the pattern for the weaver's draw loom." * 3
    for i in range(12)
)


def test_vector_store_search_scores_filters_mmr(lc_kb, fresh_namespace):
    store = KhoraVectorStore(lc_kb, namespace=fresh_namespace)
    ids = store.add_texts(
        [
            "Babbage designed the Analytical Engine.",
            "The Analytical Engine used punched cards.",
            "Sourdough bread needs a mature starter.",
            LONG_TEXT,
        ],
        metadatas=[
            {"topic": "computing", "year": 1837, "source": "book"},
            {"topic": "computing", "year": 1843},
            {"topic": "baking", "year": 2020},
            {"topic": "weaving", "year": 1804},
        ],
        ids=["engine", "cards", "bread", "loom"],
    )
    assert ids == ["engine", "cards", "bread", "loom"]

    # a long document comes back once, whole
    (loom,) = store.get_by_ids(["loom"])
    assert loom.page_content == LONG_TEXT and loom.metadata == {"topic": "weaving", "year": 1804}
    hits = store.similarity_search("Jacquard loom punched cards silk", k=4)
    assert [d.id for d in hits].count("loom") == 1 and hits[0].id == "loom"

    scored = store.similarity_search_with_score("Who designed the Analytical Engine?", k=4)
    scores = [s for _, s in scored]
    assert scored[0][0].id == "engine"
    assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    relevance = store.similarity_search_with_relevance_scores("Who designed the Analytical Engine?", k=1)
    assert relevance[0][1] == pytest.approx(scores[0])

    computing = store.similarity_search("bread", k=4, filter={"topic": "computing", "year": {"$gte": 1840}})
    assert [d.id for d in computing] == ["cards"]
    assert [d.id for d in store.similarity_search("anything", k=4, filter={"source": "book"})] == ["engine"]
    with pytest.raises(RecallFilterUnsupportedError, match=r"\$like"):
        store.similarity_search("x", filter={"topic": {"$like": "comp%"}})

    vector = store.embeddings.embed_query("Sourdough starter")
    assert store.similarity_search_by_vector(vector, k=1)[0].id == "bread"
    # A query vector gives the same documents and scores as the text it embeds.
    by_text = store.similarity_search_with_score("Who designed the Analytical Engine?", k=4)
    by_vector = store.similarity_search_with_score_by_vector(
        store.embeddings.embed_query("Who designed the Analytical Engine?"), k=4
    )
    assert [d.id for d, _ in by_vector] == [d.id for d, _ in by_text]
    assert [s for _, s in by_vector] == pytest.approx([s for _, s in by_text])
    filtered = store.similarity_search_with_score_by_vector(vector, k=4, filter={"topic": "computing"})
    assert {d.id for d, _ in filtered} == {"engine", "cards"}
    engine_vector = store.embeddings.embed_query("Analytical Engine")
    picked = store.max_marginal_relevance_search_with_score_by_vector(
        engine_vector, k=2, fetch_k=4, lambda_mult=0.2
    )
    assert [d.id for d, _ in picked] == [
        d.id
        for d in store.max_marginal_relevance_search_by_vector(engine_vector, k=2, fetch_k=4, lambda_mult=0.2)
    ]
    similarity = {d.id: s for d, s in store.similarity_search_with_score_by_vector(engine_vector, k=4)}
    assert all(
        s == pytest.approx(similarity[d.id]) for d, s in picked
    )  # a similarity to the query, not a distance

    mmr = store.max_marginal_relevance_search("Analytical Engine", k=2, fetch_k=4, lambda_mult=0.2)
    assert len(mmr) == 2 and len({d.id for d in mmr}) == 2
    assert len(store.as_retriever(search_type="mmr", search_kwargs={"k": 2}).invoke("Engine")) == 2
    assert [d.id for d in store.as_retriever(search_kwargs={"k": 1}).invoke("Sourdough")] == ["bread"]


async def test_vector_store_async_twins_and_from_texts(lc_kb, fresh_namespace):
    store = await KhoraVectorStore.afrom_texts(
        ["Ada translated Menabrea's paper.", "Babbage built the Difference Engine."],
        metadatas=[{"who": "ada"}, {"who": "babbage"}],
        ids=["a", "b"],
        kb=lc_kb,
        namespace=fresh_namespace,
    )
    assert [d.id for d in await store.asimilarity_search("Menabrea translation", k=1)] == ["a"]
    assert [d.id for d in await store.asimilarity_search("x", k=2, filter={"who": "babbage"})] == ["b"]
    vector = await store.embeddings.aembed_query("Difference Engine")
    assert [d.id for d in await store.asimilarity_search_by_vector(vector, k=1)] == ["b"]
    (best,) = await store.asimilarity_search_with_score_by_vector(vector, k=1)
    assert best[0].id == "b" and 0.0 < best[1] <= 1.0
    picked = await store.amax_marginal_relevance_search_with_score_by_vector(vector, k=2, fetch_k=2)
    assert {d.id for d, _ in picked} == {"a", "b"} and picked[0][1] == pytest.approx(best[1])
    assert len(await store.amax_marginal_relevance_search("Engine", k=2, fetch_k=2)) == 2
    await store.adelete(["a"])
    assert await store.aget_by_ids(["a", "b"]) == [
        Document(id="b", page_content="Babbage built the Difference Engine.", metadata={"who": "babbage"})
    ]


async def test_an_async_khora_on_the_callers_loop(kb: Khora, namespace: str):
    """An async ``Khora`` (opened on the test's loop) serves the async entry points."""
    store = KhoraVectorStore(kb, namespace=namespace)
    await store.aadd_texts(["Grace Hopper wrote the first compiler."], ids=["hopper"])
    assert [d.id for d in await store.asimilarity_search("compiler", k=1)] == ["hopper"]
    docs = await KhoraRetriever(kb=kb, namespace=namespace, k=1).ainvoke("Who wrote the first compiler?")
    assert docs[0].metadata["external_id"] == "hopper"


def test_one_entry_per_id_like_pgvector(lc_kb, fresh_namespace):
    """Identical texts under different ids are separate entries; an id added again replaces."""
    store = KhoraVectorStore(lc_kb, namespace=fresh_namespace)
    ids = store.add_texts(["Seals eat fish."] * 2, metadatas=[{"src": "a"}, {"src": "b"}])
    assert len(set(ids)) == 2
    assert [d.metadata for d in store.get_by_ids(ids)] == [{"src": "a"}, {"src": "b"}]
    # a text splitter's repeated boilerplate: the fourth text equals the second
    docs = [
        Document(id=f"p{i}", page_content=text, metadata={"i": i})
        for i, text in enumerate(["Intro.", "Boilerplate footer.", "Body.", "Boilerplate footer."])
    ]
    assert store.add_documents(docs) == ["p0", "p1", "p2", "p3"]
    assert store.get_by_ids(["p0", "p1", "p2", "p3"]) == docs
    found = store.similarity_search("Boilerplate footer.", k=2)
    assert sorted(d.id for d in found) == ["p1", "p3"]
    # the same id with new metadata replaces it; the same input again changes nothing
    store.add_texts(["Boilerplate footer."], [{"i": 9}], ids=["p1"])
    store.add_texts(["Intro."], [{"i": 0}], ids=["p0"])
    assert [d.metadata for d in store.get_by_ids(["p0", "p1", "p3"])] == [{"i": 0}, {"i": 9}, {"i": 3}]
    assert lc_kb.stats(fresh_namespace).documents == 6


def test_a_bad_item_stores_nothing_of_the_batch(lc_kb, fresh_namespace):
    store = KhoraVectorStore(lc_kb, namespace=fresh_namespace)
    with pytest.raises(InvalidInputError, match=r"item 2 \(id 'c'\).*nothing was stored"):
        store.add_texts(["One.", "Two.", "Three."], [{}, {}, {"x": float("nan")}], ids=["a", "b", "c"])
    assert store.get_by_ids(["a", "b", "c"]) == []
    with pytest.raises(InvalidInputError, match="2 texts but 1 ids"):
        store.add_texts(["One.", "Two."], ids=["a"])


def test_a_store_and_a_retriever_that_open_their_own_khora(tmp_path):
    """Built from a config (embedded store here), they open and close their own Khora."""
    embedding = DeterministicFakeEmbedding(size=16)
    store = KhoraVectorStore.from_texts(
        ["alpha", "beta"], embedding, ids=["a", "b"], data_dir=str(tmp_path / "own"), namespace="own"
    )
    try:
        assert store.embeddings is embedding
        assert [d.id for d in store.similarity_search("beta", k=1)] == ["b"]
    finally:
        store.close()
    config = KhoraConfig(storage={"data_dir": str(tmp_path / "own2"), "database_url": None})
    with KhoraSync(config=config) as kb:
        ns = kb.create_namespace(namespace="r").namespace_id
        kb.remember("Marie Curie discovered polonium and radium.", namespace=ns)
    retriever = KhoraRetriever(config=config, namespace="r", k=1)
    try:
        assert "polonium" in retriever.invoke("What did Marie Curie discover?")[0].page_content
    finally:
        retriever.close()


def test_khora_embeddings_view(lc_kb):
    view = KhoraVectorStore(lc_kb, namespace="unused").embeddings
    vectors = view.embed_documents(["a cat", "a kitten"])
    assert len(vectors) == 2 and len(vectors[0]) == len(view.embed_query("a dog")) == 384
    assert abs(sum(x * x for x in vectors[0]) - 1.0) < 1e-4


# -- agent memory tools --------------------------------------------------------------------


def test_memory_tools_remember_then_recall_with_citations(lc_kb: KhoraSync, fresh_namespace):
    remember, recall = khora_memory_tools(lc_kb, fresh_namespace)
    receipt = remember.invoke(
        {
            "content": "The team chose PostgreSQL for the billing service.",
            "title": "Billing DB decision",
            "occurred_at": "2026-02-03",
        }
    )
    assert receipt.startswith("Remembered as document")
    again = remember.invoke({"content": "The team chose PostgreSQL for the billing service."})
    assert again.startswith("Already in memory")
    answer = recall.invoke({"query": "Which database does billing use?", "k": 3})
    assert "[1]" in answer and "PostgreSQL" in answer


async def test_memory_tools_async(lc_kb: KhoraSync, fresh_namespace):
    remember, recall = khora_memory_tools(lc_kb, fresh_namespace)
    assert "Memory is empty" in await recall.ainvoke({"query": "anything"})
    await remember.ainvoke({"content": "Standup moved to 9:30 on Mondays."})
    assert "9:30" in await recall.ainvoke({"query": "When is standup?"})


def test_a_namespace_name_is_answered_with_its_id(lc_kb):
    """A name is not an id; where one is given, the error shows the id to pass."""
    name = f"team-{uuid.uuid4().hex[:8]}"
    ns = lc_kb.create_namespace(name).namespace_id
    try:
        assert ns != name
        store = KhoraVectorStore(lc_kb, namespace=name)
        for call in (
            lambda: KhoraRetriever(kb=lc_kb, namespace=name).invoke("anything"),
            lambda: store.similarity_search("anything"),
            lambda: store.add_texts(["A note for the team."]),
        ):
            with pytest.raises(NamespaceNotFoundError, match=f"pass namespace='{ns}'"):
                call()
        assert [n.namespace_id for n in lc_kb.list_namespaces() if n.name == name] == [ns]
        # by its id, it works
        KhoraVectorStore(lc_kb, namespace=ns).add_texts(["A note for the team."], ids=["n1"])
        assert [d.id for d in KhoraVectorStore(lc_kb, namespace=ns).similarity_search("note")] == ["n1"]
    finally:
        lc_kb.delete_namespace(ns)
