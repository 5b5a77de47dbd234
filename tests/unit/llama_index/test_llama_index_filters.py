"""MetadataFilters <-> RecallFilter translation: every operator, every condition, every
rejection, and round trips."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from khora_core.errors import RecallFilterUnsupportedError, RecallFilterValidationError
from khora_core.filters import RecallFilter
from khora_integrations.llama_index.filters import (
    metadata_filters_to_recall_filter,
    recall_filter_to_metadata_filters,
    to_recall_filter,
)

O = FilterOperator  # noqa: E741 - short names keep the tables readable
C = FilterCondition
D = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def F(key: str, value: object, op: FilterOperator = O.EQ) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=op)


def FS(*filters: object, condition: FilterCondition | None = C.AND) -> MetadataFilters:
    return MetadataFilters(filters=list(filters), condition=condition)


# (MetadataFilters, RecallFilter dict)
FORWARD = [
    # every comparison operator, on a metadata key
    (FS(F("tier", "gold")), {"metadata.tier": {"$eq": "gold"}}),
    (FS(F("tier", "gold", O.NE)), {"metadata.tier": {"$ne": "gold"}}),
    (FS(F("year", 2020, O.GT)), {"metadata.year": {"$gt": 2020}}),
    (FS(F("year", 2020.5, O.GTE)), {"metadata.year": {"$gte": 2020.5}}),
    # Python orders a stored boolean as 0 or 1, so a number range also names the booleans
    (
        FS(F("year", 2020, O.LT)),
        {"$or": [{"metadata.year": {"$lt": 2020}}, {"metadata.year": {"$in": [False, True]}}]},
    ),
    (FS(F("name", "m", O.LTE)), {"metadata.name": {"$lte": "m"}}),
    (FS(F("tier", ["gold", "silver"], O.IN)), {"metadata.tier": {"$in": ["gold", "silver"]}}),
    (FS(F("year", [1, 2], O.NIN)), {"metadata.year": {"$nin": [1, 2, True]}}),  # True == 1
    (FS(F("tags", ["a", "b"])), {"metadata.tags": {"$eq": ["a", "b"]}}),  # list equality, as Python's ==
    (
        FS(F("note", None, O.IS_EMPTY)),
        {"$or": [{"metadata.note": None}, {"metadata.note": ""}, {"metadata.note": []}]},
    ),
    # system keys keep their names; strings on date keys are $date literals
    (FS(F("source", "linear")), {"source": {"$eq": "linear"}}),
    (FS(F("title", ["a", "b"], O.IN)), {"title": {"$in": ["a", "b"]}}),
    (FS(F("title", None, O.IS_EMPTY)), {"$or": [{"title": None}, {"title": ""}]}),
    (FS(F("occurred_at", "2026-01-01", O.GTE)), {"occurred_at": {"$gte": {"$date": "2026-01-01"}}}),
    (
        FS(F("created_at", ["2026-01-01", "2026-01-02"], O.NIN)),
        {"created_at": {"$nin": [{"$date": "2026-01-01"}, {"$date": "2026-01-02"}]}},
    ),
    (FS(F("occurred_at", None, O.IS_EMPTY)), {"occurred_at": None}),
    # Khora's own key forms pass through; dotted keys are nested metadata paths
    (FS(F("metadata.team.name", "ingest")), {"metadata.team.name": {"$eq": "ingest"}}),
    (FS(F("team.name", "ingest")), {"metadata.team.name": {"$eq": "ingest"}}),
    # conditions
    (
        FS(F("tier", "gold"), F("year", 1, O.GT)),
        {"$and": [{"metadata.tier": {"$eq": "gold"}}, {"metadata.year": {"$gt": 1}}]},
    ),
    (
        FS(F("tier", "gold"), F("source", "x"), condition=C.OR),
        {"$or": [{"metadata.tier": {"$eq": "gold"}}, {"source": {"$eq": "x"}}]},
    ),
    (FS(F("tier", "gold"), condition=C.NOT), {"$not": {"metadata.tier": {"$eq": "gold"}}}),
    (
        FS(F("tier", "gold"), F("year", 1), condition=C.NOT),
        {"$nor": [{"metadata.tier": {"$eq": "gold"}}, {"metadata.year": {"$in": [1, True]}}]},
    ),
    (FS(F("tier", "gold"), condition=None), {"metadata.tier": {"$eq": "gold"}}),  # None means AND
    # nesting
    (
        FS(F("a", 1), FS(F("b", 2), F("c", 3, O.LT), condition=C.OR)),
        {
            "$and": [
                {"metadata.a": {"$in": [1, True]}},
                {
                    "$or": [
                        {"metadata.b": {"$eq": 2}},
                        {"$or": [{"metadata.c": {"$lt": 3}}, {"metadata.c": {"$in": [False, True]}}]},
                    ]
                },
            ]
        },
    ),
    (
        FS(FS(F("a", 1), condition=C.NOT), condition=C.NOT),
        {"$not": {"$not": {"metadata.a": {"$in": [1, True]}}}},
    ),
    # empty groups: OR of nothing matches nothing (as LlamaIndex's any([]))
    (FS(F("a", 5), FS(condition=C.OR)), {"$and": [{"metadata.a": {"$eq": 5}}, {"$nor": [{}]}]}),
]


@pytest.mark.parametrize(("filters", "expected"), FORWARD)
def test_metadata_filters_translate_to_recall_filters(filters, expected):
    assert metadata_filters_to_recall_filter(filters) == expected
    RecallFilter.parse(expected)  # and it is a valid filter


def test_a_single_metadata_filter_and_none():
    assert metadata_filters_to_recall_filter(F("tier", "gold")) == {"metadata.tier": {"$eq": "gold"}}
    assert metadata_filters_to_recall_filter(None) is None
    assert metadata_filters_to_recall_filter(FS()) is None  # empty AND: no constraint
    assert metadata_filters_to_recall_filter(FS(condition=C.NOT)) is None


def test_no_filters_select_everything_and_a_nested_empty_or_nothing():
    # LlamaIndex's evaluator: an empty filter list selects every node, whatever the condition
    assert to_recall_filter(FS(condition=C.OR)) is None
    nested = to_recall_filter(FS(FS(condition=C.OR)))
    assert nested is not None and not nested.matches({"metadata": {}})  # any([]) is False


@pytest.mark.parametrize("op", [O.TEXT_MATCH, O.TEXT_MATCH_INSENSITIVE, O.CONTAINS, O.ANY, O.ALL])
def test_operators_recall_filter_cannot_express_raise_naming_the_operator(op):
    value = ["a", "b"] if op in (O.ANY, O.ALL) else "a"
    with pytest.raises(RecallFilterUnsupportedError) as info:
        metadata_filters_to_recall_filter(FS(F("x", 1), FS(F("body", value, op), condition=C.OR)))
    assert repr(op.value) in str(info.value) and "'body'" in str(info.value)
    assert info.value.key == "metadata.body"


@pytest.mark.parametrize(
    ("filters", "code"),
    [
        (FS(F("tier", None)), "bad_operand"),  # == None matches nothing in LlamaIndex
        (FS(F("tier", None, O.GT)), "bad_operand"),
        (FS(F("tier", "gold", O.IN)), "bad_operand"),  # in takes a list
        (FS(F("$or", 1)), "bad_operator"),
        (FS(F("", 1)), "unknown_key"),
        (FS(F("has space", 1)), "bad_path"),  # checked by RecallFilter.parse
        (FS(F("title", "a", O.GT)), "operator_not_allowed"),  # no ranges on system strings
        (FS(F("occurred_at", 5, O.GT)), "bad_operand"),  # dates compare with dates
        (FS(F("occurred_at", "yesterday", O.GT)), "bad_date"),
    ],
)
def test_malformed_filters_raise_validation_errors(filters, code):
    with pytest.raises(RecallFilterValidationError) as info:
        metadata_filters_to_recall_filter(filters)
    assert info.value.errors[0]["code"] == code


def test_to_recall_filter_accepts_every_form():
    as_dict = {"source": "linear"}
    assert to_recall_filter(FS(F("source", "linear"))) == RecallFilter.parse({"source": {"$eq": "linear"}})
    assert to_recall_filter(as_dict) == RecallFilter.parse(as_dict)
    parsed = RecallFilter.parse(as_dict)
    assert to_recall_filter(parsed) is parsed
    assert to_recall_filter(None) is None and to_recall_filter({}) is None
    with pytest.raises(RecallFilterValidationError):
        to_recall_filter({"nope": 1})


# -- RecallFilter -> MetadataFilters -------------------------------------------------------

REVERSE = [
    ({"metadata.tier": "gold"}, FS(F("tier", "gold"))),
    ({"metadata.tier": {"$ne": "gold"}}, FS(F("tier", "gold", O.NE))),
    ({"metadata.n": {"$gt": 1, "$lte": 5.5}}, FS(F("n", 1, O.GT), F("n", 5.5, O.LTE))),
    ({"metadata.n": {"$lt": 1}}, FS(F("n", 1, O.LT))),
    ({"metadata.n": {"$gte": 1}}, FS(F("n", 1, O.GTE))),
    ({"metadata.tier": {"$in": ["a", "b"]}}, FS(F("tier", ["a", "b"], O.IN))),
    ({"metadata.n": {"$nin": [1, 2.5]}}, FS(F("n", [1, 2.5], O.NIN))),
    ({"metadata.team.name": "x"}, FS(F("team.name", "x"))),
    ({"source_name": "linear"}, FS(F("source_name", "linear"))),
    ({"occurred_at": {"$gte": D}}, FS(F("occurred_at", "2026-01-02T03:04:05Z", O.GTE))),
    (
        {"created_at": {"$in": [{"$date": "2026-01-01"}]}},
        FS(F("created_at", ["2026-01-01T00:00:00Z"], O.IN)),
    ),
    ({"$or": [{"source": "a"}, {"metadata.n": 1}]}, FS(F("source", "a"), F("n", 1), condition=C.OR)),
    ({"$and": [{"source": "a"}, {"metadata.n": 1}]}, FS(F("source", "a"), F("n", 1))),
    ({"$not": {"source": "a"}}, FS(F("source", "a"), condition=C.NOT)),
    ({"metadata.n": {"$not": {"$gt": 3}}}, FS(F("n", 3, O.GT), condition=C.NOT)),
    ({"$nor": [{"source": "a"}]}, FS(F("source", "a"), condition=C.NOT)),
    (
        {"$nor": [{"source": "a"}, {"metadata.n": 1}]},
        FS(FS(F("source", "a"), F("n", 1), condition=C.OR), condition=C.NOT),
    ),
]


@pytest.mark.parametrize(("recall", "expected"), REVERSE)
def test_recall_filters_translate_to_metadata_filters(recall, expected):
    assert recall_filter_to_metadata_filters(recall) == expected
    assert recall_filter_to_metadata_filters(RecallFilter.parse(recall)) == expected


def test_empty_recall_filters_translate_to_none():
    assert recall_filter_to_metadata_filters(None) is None
    assert recall_filter_to_metadata_filters({}) is None


@pytest.mark.parametrize(
    ("recall", "what"),
    [
        ({"metadata": {"a": 1}}, "whole-metadata"),
        ({"metadata.tags": ["a", "b"]}, "list"),
        ({"metadata.obj": {"$eq": {"a": 1}}}, "object"),
        ({"metadata.note": None}, "null"),
        ({"title": {"$ne": None}}, "null"),
        ({"metadata.flag": True}, "boolean"),
        ({"metadata.n": {"$in": [1, True]}}, "boolean"),
        ({"metadata.n": {"$in": [1, None]}}, "null"),
        ({"metadata.n": {"$in": [1, "a"]}}, "mixing strings and numbers"),
        ({"metadata.note": {"$exists": True}}, "$exists"),
        ({"metadata.when": {"$gte": {"$date": "2026-01-01"}}}, "$date"),
        ({"$or": [{"source": "a"}, {"metadata.x": {"$exists": False}}]}, "$exists"),
    ],
)
def test_what_metadata_filters_cannot_express_raises(recall, what):
    with pytest.raises(RecallFilterUnsupportedError) as info:
        recall_filter_to_metadata_filters(recall)
    assert what in str(info.value)
    assert info.value.backend == "llama_index"


def test_reverse_validates_first():
    with pytest.raises(RecallFilterValidationError):
        recall_filter_to_metadata_filters({"nope": 1})


def _records() -> list[dict[str, object]]:
    """Records covering every key the tables use, present, absent, null and empty."""
    metas: list[dict[str, object]] = [
        {},
        {"tier": "gold", "year": 2020, "name": "a", "n": 1, "a": 1, "b": 2, "c": 1},
        {"tier": "silver", "year": 2021.5, "name": "z", "n": 5.5, "a": 2, "b": 3, "c": 5},
        {"tier": "a", "team": {"name": "x"}, "tags": ["a", "b"], "note": "", "year": 1},
        {"tier": None, "note": None, "tags": [], "team": {"name": "ingest"}, "n": 4},
        {"note": "hi", "tags": ["b"], "year": 2},
    ]
    dates = [None, D, datetime(2026, 1, 1, tzinfo=timezone.utc)]
    out = []
    for i, meta in enumerate(metas):
        for j, source in enumerate(("a", "linear", None)):
            out.append(
                {
                    "source": source,
                    "source_name": "linear" if j else None,
                    "title": ("a", "", None)[(i + j) % 3],
                    "occurred_at": dates[(i + j) % 3],
                    "created_at": dates[1 + (i % 2)],
                    "metadata": meta,
                }
            )
    return out


RECORDS = _records()


def _same_selection(left: object, right: object) -> bool:
    a, b = RecallFilter.parse(left), RecallFilter.parse(right)
    return [a.matches(r) for r in RECORDS] == [b.matches(r) for r in RECORDS]


@pytest.mark.parametrize(("recall", "_"), REVERSE)
def test_round_trip_recall_to_llama_index_and_back_selects_the_same(recall, _):
    back = metadata_filters_to_recall_filter(recall_filter_to_metadata_filters(recall))
    assert _same_selection(recall, back)


#: Forward results with no MetadataFilters form: is_empty's null match and list equality.
# 4, 7, 21, 23, 24: the booleans Python equates with 0 and 1 (MetadataFilter values hold no booleans)
NOT_REVERSIBLE = {4, 7, 8, 9, 12, 15, 21, 23, 24}


@pytest.mark.parametrize(("index", "filters"), list(enumerate(case[0] for case in FORWARD)))
def test_round_trip_llama_index_to_recall_and_back(index, filters):
    recall = metadata_filters_to_recall_filter(filters)
    if index in NOT_REVERSIBLE:
        with pytest.raises(RecallFilterUnsupportedError):
            recall_filter_to_metadata_filters(recall)
        return
    back = metadata_filters_to_recall_filter(recall_filter_to_metadata_filters(recall))
    assert _same_selection(recall, back)
