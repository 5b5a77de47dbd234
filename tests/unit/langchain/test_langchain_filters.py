"""PGVector dialect <-> RecallFilter translation: every operator, every rejection, round trips."""

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

# (PGVector filter, RecallFilter dict)
FORWARD = [
    ({"tier": "gold"}, {"metadata.tier": "gold"}),
    ({"tier": {"$eq": "gold"}}, {"metadata.tier": {"$eq": "gold"}}),
    ({"tier": {"$ne": "gold"}}, {"metadata.tier": {"$ne": "gold"}}),
    ({"year": {"$lt": 2020}}, {"metadata.year": {"$lt": 2020}}),
    ({"year": {"$lte": 2020}}, {"metadata.year": {"$lte": 2020}}),
    ({"year": {"$gt": 2020}}, {"metadata.year": {"$gt": 2020}}),
    ({"year": {"$gte": 2020.5}}, {"metadata.year": {"$gte": 2020.5}}),
    ({"tier": {"$in": ["gold", "silver"]}}, {"metadata.tier": {"$in": ["gold", "silver"]}}),
    ({"tier": {"$nin": ["bronze"]}}, {"metadata.tier": {"$nin": ["bronze"]}}),
    ({"year": {"$between": [2020, 2024]}}, {"metadata.year": {"$gte": 2020, "$lte": 2024}}),
    ({"draft": {"$exists": False}}, {"metadata.draft": {"$exists": False}}),
    ({"draft": True}, {"metadata.draft": True}),
    # system keys keep their names; ISO strings on date keys become $date literals
    ({"source": "linear"}, {"source": "linear"}),
    ({"title": {"$in": ["a", "b"]}}, {"title": {"$in": ["a", "b"]}}),
    ({"occurred_at": {"$gte": "2026-01-01"}}, {"occurred_at": {"$gte": {"$date": "2026-01-01"}}}),
    ({"created_at": {"$lt": D}}, {"created_at": {"$lt": D}}),
    (
        {"occurred_at": {"$between": ["2026-01-01", "2026-02-01T00:00:00Z"]}},
        {"occurred_at": {"$gte": {"$date": "2026-01-01"}, "$lte": {"$date": "2026-02-01T00:00:00Z"}}},
    ),
    # several fields: one object (implicit $and)
    ({"tier": "gold", "source_name": "linear"}, {"metadata.tier": "gold", "source_name": "linear"}),
    # logical operators
    (
        {"$and": [{"tier": "gold"}, {"year": {"$gt": 1}}]},
        {"$and": [{"metadata.tier": "gold"}, {"metadata.year": {"$gt": 1}}]},
    ),
    ({"$or": [{"tier": "gold"}, {"source": "x"}]}, {"$or": [{"metadata.tier": "gold"}, {"source": "x"}]}),
    ({"$not": {"tier": "gold"}}, {"$not": {"metadata.tier": "gold"}}),
    ({"$not": [{"tier": "gold"}, {"year": 1}]}, {"$nor": [{"metadata.tier": "gold"}, {"metadata.year": 1}]}),
    # Khora's own forms pass through unchanged
    ({"metadata.team.name": "ingest"}, {"metadata.team.name": "ingest"}),
    ({"$nor": [{"source": "x"}]}, {"$nor": [{"source": "x"}]}),
    ({"metadata.x": {"$not": {"$gt": 3}}}, {"metadata.x": {"$not": {"$gt": 3}}}),
    ({"metadata.x": {"$not": 3}}, {"metadata.x": {"$not": 3}}),
    ({"metadata": {"a": 1}}, {"metadata": {"a": 1}}),
    (
        {"metadata.when": {"$gte": {"$date": "2026-01-01"}}},
        {"metadata.when": {"$gte": {"$date": "2026-01-01"}}},
    ),
    # a field twice (plain and qualified) cannot share one object
    ({"tier": "a", "metadata.tier": "b"}, {"$and": [{"metadata.tier": "a"}, {"metadata.tier": "b"}]}),
]


@pytest.mark.parametrize(("pg", "khora"), FORWARD, ids=[str(i) for i in range(len(FORWARD))])
def test_pgvector_to_recall_filter(pg, khora):
    translated = pgvector_to_recall_filter(pg)
    assert translated == khora
    RecallFilter.parse(translated)  # the output is always a valid RecallFilter


def test_no_filter_and_recall_filter_passthrough():
    assert pgvector_to_recall_filter(None) is None
    assert pgvector_to_recall_filter({}) is None
    f = RecallFilter.parse({"source": "x"})
    assert pgvector_to_recall_filter(f) is f


def test_khora_dicts_translate_to_themselves():
    for _, khora in FORWARD:
        assert pgvector_to_recall_filter(khora) == khora


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
    ({"a": {"$between": [1, 2], "$gte": 0}}, "a.$between"),
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
    ({"metadata.team.name": "x"}, {"team.name": "x"}),
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


CANONICAL_PG = [pg for pg, _ in FORWARD[:22] if "$not" not in pg or isinstance(pg["$not"], dict)] + [
    {"$not": [{"tier": "gold"}, {"year": 1}]},
]


@pytest.mark.parametrize("pg", CANONICAL_PG, ids=[str(i) for i in range(len(CANONICAL_PG))])
def test_round_trip_pgvector_khora_pgvector(pg):
    back = recall_filter_to_pgvector(pgvector_to_recall_filter(pg))
    expected = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in pg.items()}
    if pg == {"created_at": {"$lt": D}}:
        expected = {"created_at": {"$lt": D.isoformat()}}
    assert back == expected


@pytest.mark.parametrize(("khora", "_pg"), REVERSE, ids=[str(i) for i in range(len(REVERSE))])
def test_round_trip_khora_pgvector_khora_is_equivalent(khora, _pg):
    back = pgvector_to_recall_filter(recall_filter_to_pgvector(khora))
    records = [
        {"source": s, "source_name": "linear", "occurred_at": D, "metadata": m}
        for s in ("a", "b", None)
        for m in ({}, {"x": 1, "n": 3, "tier": "gold"}, {"x": 5, "n": 0, "tier": "a", "team": {"name": "x"}})
    ]
    original, translated = RecallFilter.parse(khora), RecallFilter.parse(back)
    for record in records:
        assert original.matches(record) == translated.matches(record), record


# -- SelfQuery ----------------------------------------------------------------------------


def test_translator_builds_khora_filters():
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
            {"metadata.genre": {"$eq": "scifi"}},
            {"metadata.year": {"$gte": 1990}},
            {"source_name": {"$in": ["a", "b"]}},
            {"occurred_at": {"$lt": {"$date": "2026-01-01"}}},
            {"$not": {"metadata.rating": {"$ne": 2}}},
            {"$nor": [{"metadata.a": {"$eq": 1}}, {"metadata.b": {"$eq": 2}}]},
        ]
    }
    RecallFilter.parse(kwargs["filter"])


def test_translator_without_filter_and_disallowed_comparators():
    assert KhoraTranslator().visit_structured_query(StructuredQuery(query="q", filter=None)) == ("q", {})
    for comparator in (Comparator.LIKE, Comparator.CONTAIN):
        with pytest.raises(ValueError, match="disallowed"):
            Comparison(comparator=comparator, attribute="a", value="x").accept(KhoraTranslator())
