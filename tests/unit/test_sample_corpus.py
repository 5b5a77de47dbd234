"""The sample corpus is well formed and its demo questions are answerable as labelled."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

import pytest

from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS
from khora_core.sample import (
    load_sample_corpus,
    load_sample_questions,
    parse_iso_datetime,
    to_remember_items,
)

DOCS = load_sample_corpus()
BY_ID = {d["external_id"]: d for d in DOCS}
QUESTIONS = load_sample_questions()
REQUIRED = {
    "content": str,
    "title": str,
    "occurred_at": str,
    "source_type": str,
    "source_name": str,
    "external_id": str,
    "content_type": str,
    "metadata": dict,
    "tags": list,
}


def _text(doc: dict[str, Any]) -> str:
    return f"{doc['title']}\n{doc['content']}".casefold()


def _has(doc: dict[str, Any], term: str) -> bool:
    return term.casefold() in _text(doc)


def _has_word(doc: dict[str, Any], term: str) -> bool:
    # Whole words: "Mars" must not match "Elena Marsh".
    return re.search(rf"\b{re.escape(term.casefold())}\b", _text(doc)) is not None


def _record(doc: dict[str, Any]) -> dict[str, Any]:
    """The shape ``Chunk.filter_record()`` gives the filter evaluator."""
    record: dict[str, Any] = {key: doc.get(key) for key in SYSTEM_STRING_KEYS}
    record.update({key: None for key in SYSTEM_DATE_KEYS})
    record["occurred_at"] = parse_iso_datetime(doc["occurred_at"])
    record["created_at"] = datetime(2025, 12, 1, tzinfo=timezone.utc)
    record["metadata"] = doc["metadata"]
    return record


def test_corpus_size_and_schema():
    assert 30 <= len(DOCS) <= 45
    for doc in DOCS:
        assert set(doc) == set(REQUIRED), doc.get("external_id")
        for key, typ in REQUIRED.items():
            assert isinstance(doc[key], typ), (doc["external_id"], key)
        assert doc["content_type"] in ("text/plain", "text/markdown")
        assert all(isinstance(t, str) and t for t in doc["tags"])
        meta = doc["metadata"]
        assert isinstance(meta["team"]["name"], str) and meta["team"]["name"]
        assert meta["tier"] in ("gold", "silver", "bronze")
        assert isinstance(meta["confidential"], bool)
        assert isinstance(meta["score"], float) and 0.0 <= meta["score"] <= 1.0


def test_documents_are_short_and_original_length():
    for doc in DOCS:
        words = len(doc["content"].split())
        assert 80 <= words <= 250, (doc["external_id"], words)


def test_external_ids_and_titles_unique():
    ids = [d["external_id"] for d in DOCS]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"sample-\d{3}", i) for i in ids)
    assert len({d["title"] for d in DOCS}) == len(DOCS)


def test_dates_parse_and_span_2022_to_2025():
    years = set()
    for doc in DOCS:
        assert doc["occurred_at"].endswith("Z")
        when = parse_iso_datetime(doc["occurred_at"])
        assert when.tzinfo is not None and when.utcoffset().total_seconds() == 0
        years.add(when.year)
    assert years == {2022, 2023, 2024, 2025}


def test_variety_of_sources_and_markdown():
    assert len({d["source_type"] for d in DOCS}) >= 4
    assert len({d["source_name"] for d in DOCS}) >= 4
    markdown = [d for d in DOCS if d["content_type"] == "text/markdown"]
    assert len(markdown) >= 3
    assert all(re.search(r"^#{1,3} ", d["content"], re.M) for d in markdown)
    assert {d["metadata"]["tier"] for d in DOCS} == {"gold", "silver", "bronze"}


def test_loader_returns_fresh_copies():
    first = load_sample_corpus()
    first[0]["metadata"]["tier"] = "changed"
    assert load_sample_corpus()[0]["metadata"]["tier"] != "changed"


def test_to_remember_items_parses_dates_only():
    items = to_remember_items(DOCS[:2])
    assert isinstance(items[0]["occurred_at"], datetime)
    assert items[0]["occurred_at"] == parse_iso_datetime(DOCS[0]["occurred_at"])
    assert items[0]["content"] == DOCS[0]["content"]
    assert isinstance(DOCS[0]["occurred_at"], str)  # the input is untouched


def test_every_kind_of_question_is_present():
    kinds = {q["kind"] for q in QUESTIONS}
    assert kinds == {"lookup", "multi-hop", "filtered", "off-topic"}
    for q in QUESTIONS:
        assert q["question"].endswith("?")
        assert all(i in BY_ID for i in q["expected_external_ids"]), q["question"]
        assert q["key_terms"], q["question"]
        assert (q["filter"] is not None) == (q["kind"] == "filtered")


@pytest.mark.parametrize(
    "q", [q for q in QUESTIONS if q["kind"] in ("lookup", "filtered")], ids=lambda q: q["question"]
)
def test_lookup_and_filtered_documents_contain_the_names(q):
    expected = [BY_ID[i] for i in q["expected_external_ids"]]
    assert expected
    for doc in expected:
        for term in q["key_terms"]:
            assert _has(doc, term), (doc["external_id"], term)
    assert any(_has(doc, q["answer"]) for doc in expected)


@pytest.mark.parametrize("q", [q for q in QUESTIONS if q["kind"] == "multi-hop"], ids=lambda q: q["question"])
def test_multi_hop_needs_two_documents_joined_by_the_bridge(q):
    expected = [BY_ID[i] for i in q["expected_external_ids"]]
    assert len(expected) >= 2
    assert all(term.casefold() in q["question"].casefold() for term in q["key_terms"])
    assert all(_has(doc, q["bridge"]) for doc in expected)
    assert any(_has(doc, t) for doc in expected for t in q["key_terms"])
    assert any(_has(doc, q["answer"]) for doc in expected)
    # No single expected document answers it alone: the hop is real.
    for doc in expected:
        assert not (_has(doc, q["answer"]) and any(_has(doc, t) for t in q["key_terms"])), doc["external_id"]
    assert q["answer"].casefold() not in q["question"].casefold()
    assert q["bridge"].casefold() not in q["question"].casefold()


@pytest.mark.parametrize("q", [q for q in QUESTIONS if q["kind"] == "off-topic"], ids=lambda q: q["question"])
def test_off_topic_questions_are_not_covered(q):
    assert q["expected_external_ids"] == []
    assert "answer" not in q
    for doc in DOCS:
        for term in q["key_terms"]:
            assert not _has_word(doc, term), (doc["external_id"], term)


@pytest.mark.parametrize("q", [q for q in QUESTIONS if q["kind"] == "filtered"], ids=lambda q: q["question"])
def test_filtered_questions_select_exactly_the_expected_documents(q):
    from khora_core.filters import RecallFilter

    flt = RecallFilter.parse(q["filter"])
    expected = set(q["expected_external_ids"])
    # Every expected document passes the filter ...
    for ext_id in expected:
        assert flt.matches(_record(BY_ID[ext_id])), ext_id
    # ... every passing document that mentions the key terms is expected ...
    relevant = {d["external_id"] for d in DOCS if all(_has(d, t) for t in q["key_terms"])}
    passing = {d["external_id"] for d in DOCS if flt.matches(_record(d))}
    assert relevant & passing == expected
    # ... and the filter matters: some relevant documents fail it.
    assert relevant - passing
