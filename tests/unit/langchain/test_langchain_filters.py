"""PGVector dialect <-> RecallFilter translation: semantics, every rejection, the reverse."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from langchain_core.structured_query import Comparator, Comparison, Operation, Operator, StructuredQuery

from khora_core.errors import RecallFilterUnsupportedError, RecallFilterValidationError
from khora_core.filters import RecallFilter
from khora_integrations.langchain.filters import (
    KhoraTranslator,
    pgvector_to_recall_filter,
    recall_filter_to_pgvector,
)

D = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)

# (PGVector filter, RecallFilter dict): the simple cases translate one to one.
FORWARD = [
    ({"tier": "gold"}, {"metadata.tier": {"$eq": "gold"}}),
    ({"year": {"$lt": 2020}}, {"metadata.year": {"$lt": 2020}}),
    ({"year": {"$gte": 2020.5}}, {"metadata.year": {"$gte": 2020.5}}),
    ({"draft": True}, {"metadata.draft": True}),
    ({"draft": {"$exists": False}}, {"metadata.draft": {"$exists": False}}),
    (
        {"year": {"$between": [2020, 2024]}},
        {"$and": [{"metadata.year": {"$gte": 2020}}, {"metadata.year": {"$lte": 2024}}]},
    ),
    ({"created_at": {"$lt": "2020-01-01"}}, {"metadata.created_at": {"$lt": "2020-01-01"}}),
    ({"created_at": {"$lt": D}}, {"metadata.created_at": {"$lt": D.isoformat()}}),
    ({"a.b": 1}, {'metadata."a.b"': {"$eq": 1}}),
    ({"page label": "intro"}, {'metadata."page label"': {"$eq": "intro"}}),
    ({"metadata.team.name": "x"}, {'metadata."metadata.team.name"': {"$eq": "x"}}),
    (
        {"tier": {"$in": ["gold", "8"]}},
        {"$or": [{"metadata.tier": "gold"}, {"metadata.tier": "8"}, {"metadata.tier": 8}]},
    ),
]


@pytest.mark.parametrize(("pg", "khora"), FORWARD, ids=[str(i) for i in range(len(FORWARD))])
def test_pgvector_to_recall_filter(pg, khora):
    translated = pgvector_to_recall_filter(pg)
    assert translated == khora
    RecallFilter.parse(translated)


def test_no_filter_and_recall_filter_passthrough():
    assert pgvector_to_recall_filter(None) is None
    assert pgvector_to_recall_filter({}) is None
    f = RecallFilter.parse({"source_name": "linear"})
    assert pgvector_to_recall_filter(f) is f


# (PGVector filter, the documents' metadata it selects), as PGVector selects them (see
# tests/integration/langchain/test_pgvector_filter_parity.py for the live comparison).
RECORDS = {
    "five": {"n": 5, "tier": "gold"},
    "text8": {"n": "8", "tier": "8"},
    "eight": {"n": 8},
    "null": {"n": None, "tier": None},
    "missing": {},
    "true": {"flag": True, "tier": "true"},
}
SEMANTICS = [
    ({"n": {"$ne": 5}}, {"eight", "null"}),  # missing and another type: no
    ({"n": {"$in": ["8"]}}, {"text8", "eight"}),  # text comparison
    ({"n": {"$nin": [5]}}, {"text8", "eight"}),  # missing and null: unknown
    ({"$not": {"n": {"$in": [5]}}}, {"text8", "eight"}),  # NOT unknown is unknown
    ({"$not": {"n": 5}}, {"eight", "null", "missing", "true"}),  # missing: false, so NOT: true; "8": unknown
    ({"n": None}, {"null"}),  # null is not missing
    ({"tier": {"$in": ["true"]}}, {"true"}),
    ({"flag": {"$gt": False}}, {"true"}),
    ({"n": {"$lt": None}}, set()),
]


@pytest.mark.parametrize(("pg", "expected"), SEMANTICS, ids=[str(c[0]) for c in SEMANTICS])
def test_pgvector_semantics(pg, expected):
    f = RecallFilter.parse(pgvector_to_recall_filter(pg))
    assert {name for name, meta in RECORDS.items() if f.matches({"metadata": meta})} == expected


FORWARD_UNSUPPORTED = [
    {"title": {"$like": "Intro%"}},
    {"title": {"$ilike": "%intro%"}},
    {"$or": [{"a": 1}, {"b": {"$like": "x%"}}]},
]


@pytest.mark.parametrize("pg", FORWARD_UNSUPPORTED)
def test_pattern_operators_are_rejected_not_ignored(pg):
    with pytest.raises(RecallFilterUnsupportedError, match=r"\$i?like"):
        pgvector_to_recall_filter(pg)


FORWARD_INVALID = [
    ({"a": {"$regex": "x"}}, "a.$regex"),
    ({"a": {"$between": [1]}}, "a.$between"),
    ({"a": {"$in": [True]}}, "a.$in[0]"),
    ({"a": {"$eq": [1]}}, "a.$eq"),
    ({"a": {"$in": "x"}}, "a.$in"),
    ({"a": {"$nin": 3}}, "a.$nin"),
    ({"a": {"$exists": "yes"}}, "a.$exists"),
    ({"a": {"$eq": 1, "b": 2}}, "a.b"),
    ({"a": {}}, "a"),
    ({"$eq": 1}, "$eq"),
    ({"$and": {"a": 1}}, "$and"),
    ({"$or": []}, "$or"),
    ({"$not": 5}, "$not"),
    ({"$and": [{"a": 1}, 5]}, "$and[1]"),
    ({"$and": [{"a": 1}, {}]}, "$and[1]"),
    ({"": 1}, ""),
    ({3: 1}, ""),
]


@pytest.mark.parametrize(("pg", "path"), FORWARD_INVALID, ids=[str(p[0]) for p in FORWARD_INVALID])
def test_malformed_pgvector_filters_raise_with_a_path(pg, path):
    with pytest.raises(RecallFilterValidationError) as info:
        pgvector_to_recall_filter(pg)
    assert info.value.errors[0]["path"] == path


def test_non_dict_filter_raises():
    with pytest.raises(RecallFilterValidationError):
        pgvector_to_recall_filter(["a"])


# (RecallFilter dict, PGVector filter)
REVERSE = [
    ({"metadata.tier": "gold"}, {"tier": "gold"}),
    ({"metadata.tier": {"$eq": "gold"}}, {"tier": {"$eq": "gold"}}),
    ({"metadata.tier": {"$ne": "gold"}}, {"tier": {"$ne": "gold"}}),
    ({"metadata.n": {"$lt": 1}}, {"n": {"$lt": 1}}),
    ({"metadata.n": {"$lte": 1}}, {"n": {"$lte": 1}}),
    ({"metadata.n": {"$gt": 1}}, {"n": {"$gt": 1}}),
    ({"metadata.n": {"$gte": 1}}, {"n": {"$gte": 1}}),
    ({"metadata.n": {"$gte": 1, "$lte": 5}}, {"n": {"$between": [1, 5]}}),
    ({"metadata.n": {"$gt": 1, "$lt": 5}}, {"$and": [{"n": {"$gt": 1}}, {"n": {"$lt": 5}}]}),
    ({"metadata.tier": {"$in": ["a", 2, 2.5]}}, {"tier": {"$in": ["a", 2, 2.5]}}),
    ({"metadata.tier": {"$nin": ["a"]}}, {"tier": {"$nin": ["a"]}}),
    ({"metadata.tier": {"$exists": True}}, {"tier": {"$exists": True}}),
    ({"source_name": "linear", "metadata.tier": "gold"}, {"source_name": "linear", "tier": "gold"}),
    ({"occurred_at": {"$gte": D}}, {"occurred_at": {"$gte": D.isoformat()}}),
    ({"occurred_at": {"$lt": {"$date": "2026-01-01"}}}, {"occurred_at": {"$lt": "2026-01-01"}}),
    ({"$and": [{"source": "a"}, {"metadata.x": 1}]}, {"$and": [{"source": "a"}, {"x": 1}]}),
    ({"$or": [{"source": "a"}, {"metadata.x": 1}]}, {"$or": [{"source": "a"}, {"x": 1}]}),
    ({"$not": {"source": "a"}}, {"$not": {"source": "a"}}),
    ({"$nor": [{"source": "a"}, {"metadata.x": 1}]}, {"$not": [{"source": "a"}, {"x": 1}]}),
    ({"metadata.x": {"$not": {"$gt": 3}}}, {"$not": {"x": {"$gt": 3}}}),
    ({"source": {"$not": "a"}}, {"$not": {"source": "a"}}),
]


@pytest.mark.parametrize(("khora", "pg"), REVERSE, ids=[str(i) for i in range(len(REVERSE))])
def test_recall_filter_to_pgvector(khora, pg):
    assert recall_filter_to_pgvector(khora) == pg
    assert recall_filter_to_pgvector(RecallFilter.parse(khora)) is not None  # the object form works too


REVERSE_UNSUPPORTED = [
    {"metadata.team.name": "x"},
    {"metadata": {"a": 1}},
    {"metadata.tags": ["a", "b"]},
    {"metadata.obj": {"$eq": {"a": 1}}},
    {"metadata.x": None},
    {"source": None},
    {"metadata.x": {"$ne": None}},
    {"metadata.x": {"$in": ["a", None]}},
    {"metadata.x": {"$in": [True]}},
    {"$or": [{"source": "a"}, {"metadata.x": None}]},
]


@pytest.mark.parametrize("khora", REVERSE_UNSUPPORTED, ids=[str(k) for k in REVERSE_UNSUPPORTED])
def test_what_pgvector_cannot_express_raises(khora):
    with pytest.raises(RecallFilterUnsupportedError, match="PGVector"):
        recall_filter_to_pgvector(khora)


def test_reverse_validates_first():
    with pytest.raises(RecallFilterValidationError):
        recall_filter_to_pgvector({"tier": "gold"})  # not a RecallFilter key


def test_reverse_of_the_empty_filter_is_no_filter():
    assert recall_filter_to_pgvector({}) is None


# -- SelfQuery ----------------------------------------------------------------------------


def test_translator_builds_pgvector_dialect_filters():
    tree = Operation(
        operator=Operator.AND,
        arguments=[
            Comparison(comparator=Comparator.EQ, attribute="genre", value="scifi"),
            Comparison(comparator=Comparator.GTE, attribute="year", value=1990),
            Comparison(comparator=Comparator.IN, attribute="source_name", value=["a", "b"]),
            Comparison(
                comparator=Comparator.LT,
                attribute="occurred_at",
                value={"date": "2026-01-01", "type": "date"},
            ),
            Operation(
                operator=Operator.NOT,
                arguments=[Comparison(comparator=Comparator.NE, attribute="rating", value=2)],
            ),
            Operation(
                operator=Operator.NOT,
                arguments=[
                    Comparison(comparator=Comparator.EQ, attribute="a", value=1),
                    Comparison(comparator=Comparator.EQ, attribute="b", value=2),
                ],
            ),
        ],
    )
    query, kwargs = KhoraTranslator().visit_structured_query(StructuredQuery(query="space", filter=tree))
    assert query == "space"
    assert kwargs["filter"] == {
        "$and": [
            {"genre": {"$eq": "scifi"}},
            {"year": {"$gte": 1990}},
            {"source_name": {"$in": ["a", "b"]}},
            {"occurred_at": {"$lt": "2026-01-01"}},
            {"$not": {"rating": {"$ne": 2}}},
            {"$not": [{"a": {"$eq": 1}}, {"b": {"$eq": 2}}]},
        ]
    }
    RecallFilter.parse(pgvector_to_recall_filter(kwargs["filter"]))


def test_translator_without_filter_and_disallowed_comparators():
    assert KhoraTranslator().visit_structured_query(StructuredQuery(query="q", filter=None)) == ("q", {})
    for comparator in (Comparator.LIKE, Comparator.CONTAIN):
        with pytest.raises(ValueError, match="disallowed"):
            Comparison(comparator=comparator, attribute="a", value="x").accept(KhoraTranslator())
