"""Grammar and validation of recall filters: accepted forms, every error code, hostile input."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import BaseModel

from khora_core.errors import RecallFilterValidationError
from khora_core.filters import (
    MAX_DEPTH,
    MAX_LEAVES,
    RecallFilter,
    and_,
    eq,
    exists,
    gte,
    in_,
    lt,
    ne,
    nin,
    nor,
    not_,
    or_,
)
from khora_core.filters.ast import And, DateValue, Leaf, Not, Or
from khora_core.filters.dates import datetime_to_us

from .strategies import CASES, RECORDS, dt

JAN1 = dt(2026, 1, 1)
JAN1_US = datetime_to_us(JAN1)


def _errors(obj: Any) -> list[dict[str, str]]:
    with pytest.raises(RecallFilterValidationError) as info:
        RecallFilter.parse(obj)
    assert isinstance(info.value, ValueError)
    return info.value.errors


# -- accepted forms -----------------------------------------------------------------------------


SPEC_EXAMPLES = [
    {"source_name": "linear", "metadata.tier": {"$in": ["gold", "silver"]}, "occurred_at": {"$gte": JAN1}},
    {"metadata.team.name": {"$eq": "ingest"}},
    {"metadata.score": {"$gte": 0.8}},
    {"$or": [{"source_name": "linear"}, {"$and": [{"source_type": "doc"}, {"metadata.public": True}]}]},
    {"source_name": "linear"},
    {"source_name": {"$eq": "linear"}},
    {"source_type": ["a", "b"]},
    {"source_type": {"$in": ["a", "b"]}},
    {"metadata.published": {"$gte": {"$date": "2026-01-01T00:00:00Z"}}},
    {"occurred_at": {"$gte": JAN1, "$lt": dt(2026, 4, 1)}},
]


@pytest.mark.parametrize("obj", SPEC_EXAMPLES)
def test_spec_examples_parse_and_round_trip(obj: dict[str, Any]) -> None:
    f = RecallFilter.parse(obj)
    again = RecallFilter.parse(f.to_dict())
    assert again == f
    assert again.root == f.root


@pytest.mark.parametrize(("obj", "expected"), CASES)
def test_table_cases_parse_to_a_canonical_form_that_keeps_their_meaning(
    obj: dict[str, Any], expected: set[str]
) -> None:
    # Each table filter parses, and its canonical form (``to_dict``) parses back to the same
    # tree, which selects exactly the records worked out by hand for the original.
    f = RecallFilter.parse(obj)
    again = RecallFilter.parse(f.to_dict())
    assert again == f
    assert {rid for rid, rec in RECORDS.items() if again.matches(rec)} == expected


def test_shorthand_forms() -> None:
    assert RecallFilter.parse({"source_name": "x"}).root == Leaf("source_name", "$eq", "x")
    assert RecallFilter.parse({"source_type": ["a", "b"]}).root == Leaf("source_type", "$eq", ["a", "b"])
    assert RecallFilter.parse({"metadata.tier": None}).root == Leaf("metadata.tier", "$eq", None)
    assert RecallFilter.parse({"metadata.d": {"$date": "2026-01-01"}}).root == Leaf(
        "metadata.d", "$eq", DateValue(JAN1_US)
    )
    assert RecallFilter.parse({"metadata": {"a": 1}}).root == Leaf("metadata", "$eq", {"a": 1})
    assert RecallFilter.parse({"metadata.team": {"name": "x"}}).root == Leaf(
        "metadata.team", "$eq", {"name": "x"}
    )
    assert RecallFilter.parse({}).root == And(())


def test_multiple_operators_and_field_not() -> None:
    f = RecallFilter.parse({"occurred_at": {"$gte": JAN1, "$not": {"$eq": JAN1}}})
    assert f.root == And(
        (Leaf("occurred_at", "$gte", DateValue(JAN1_US)), Not(Leaf("occurred_at", "$eq", DateValue(JAN1_US))))
    )


def test_date_operand_forms_agree() -> None:
    plus2 = timezone(timedelta(hours=2))
    forms = [
        JAN1,
        datetime(2026, 1, 1, 2, tzinfo=plus2),
        {"$date": "2026-01-01"},
        {"$date": "2026-01-01T00:00:00Z"},
        {"$date": "2026-01-01T02:00:00+02:00"},
        {"$date": "2025-12-31T23:00:00.000000-01:00"},
        date(2026, 1, 1),
    ]
    roots = {RecallFilter.parse({"created_at": {"$gte": form}}).root for form in forms}
    assert roots == {Leaf("created_at", "$gte", DateValue(JAN1_US))}


OPERATOR_MATRIX = [
    # date keys
    *[
        (k, op, JAN1)
        for k in ("occurred_at", "created_at", "source_timestamp")
        for op in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
    ],
    ("occurred_at", "$in", [JAN1, None]),
    ("occurred_at", "$nin", [{"$date": "2026-01-01"}]),
    ("occurred_at", "$not", {"$lt": JAN1}),
    ("occurred_at", "$eq", None),
    # string keys
    *[
        (k, op, "x")
        for k in (
            "source_type",
            "source_name",
            "source_url",
            "external_id",
            "content_type",
            "source",
            "title",
        )
        for op in ("$eq", "$ne")
    ],
    ("source_name", "$in", ["a", None]),
    ("source_name", "$nin", []),
    ("source_name", "$exists", True),
    ("source_name", "$not", {"$exists": False}),
    # metadata fields
    *[("metadata.a.b", op, 1) for op in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")],
    *[("metadata.a", op, "s") for op in ("$gt", "$gte", "$lt", "$lte")],
    *[("metadata.a", op, {"$date": "2026-01-01"}) for op in ("$eq", "$gt", "$lte")],
    ("metadata.a", "$eq", {"x": [1, {"y": None}]}),
    ("metadata.a", "$in", [1, "a", True, None, {"$date": "2026-01-01"}]),
    ("metadata.a", "$nin", [0.5]),
    ("metadata.a", "$exists", False),
    ("metadata.a", "$not", {"$in": [1]}),
    ("metadata.a", "$gte", JAN1),
    # the whole blob
    ("metadata", "$eq", {"a": 1}),
    ("metadata", "$ne", {}),
    ("metadata", "$not", {"$eq": {"a": 1}}),
]


@pytest.mark.parametrize(("key", "op", "operand"), OPERATOR_MATRIX)
def test_every_allowed_operator_parses(key: str, op: str, operand: Any) -> None:
    f = RecallFilter.parse({key: {op: operand}})
    assert f.leaf_keys() == [key]


def test_leaf_keys_in_first_appearance_order() -> None:
    f = RecallFilter.parse(
        {
            "$or": [{"metadata.b": 1}, {"source_name": "x"}],
            "metadata.b": {"$exists": True},
            "occurred_at": None,
        }
    )
    assert f.leaf_keys() == ["metadata.b", "source_name", "occurred_at"]
    assert len(f.leaves()) == 4


def test_parse_passes_filters_and_none_through() -> None:
    f = RecallFilter.parse({"source_name": "x"})
    assert RecallFilter.parse(f) is f
    assert RecallFilter.parse(None) is None


def test_builders_and_operators() -> None:
    f = eq("source_name", "linear") & in_("metadata.tier", ["gold"]) & gte("occurred_at", JAN1)
    assert f == RecallFilter.parse(
        {
            "$and": [
                {"source_name": "linear"},
                {"metadata.tier": {"$in": ["gold"]}},
                {"occurred_at": {"$gte": JAN1}},
            ]
        }
    )
    assert (eq("title", "a") | ne("title", "b")).root == Or(
        (Leaf("title", "$eq", "a"), Leaf("title", "$ne", "b"))
    )
    assert (~exists("metadata.a")).root == Not(Leaf("metadata.a", "$exists", True))
    assert and_({"title": "a"}, lt("metadata.n", 3)).leaf_keys() == ["title", "metadata.n"]
    assert or_(nin("title", ["a"]), nor({"title": "b"})).leaf_keys() == ["title"]
    assert not_({"title": "a"}).matches({"title": "b", "metadata": {}})
    with pytest.raises(RecallFilterValidationError):
        eq("nope", 1)


def test_filters_are_hashable_and_usable_in_pydantic_models() -> None:
    class Query(BaseModel):
        filter: RecallFilter | None = None

    q = Query(filter={"source_name": "x"})
    assert q.filter == RecallFilter.parse({"source_name": "x"})
    assert q.model_dump() == {"filter": {"source_name": {"$eq": "x"}}}
    assert len({RecallFilter.parse({"title": "a"}), RecallFilter.parse({"title": {"$eq": "a"}})}) == 1
    assert repr(q.filter) == 'RecallFilter({"source_name": {"$eq": "x"}})'
    assert Query.model_json_schema()["properties"]["filter"]["anyOf"][0]["type"] == "object"
    with pytest.raises(ValueError):
        Query(filter={"nope": 1})


# -- rejections -----------------------------------------------------------------------------------

REJECTIONS = [
    # (filter, path, code)
    ({"tier": "gold"}, "tier", "unknown_key"),
    ({"$and": [{"source_name": "x"}, {"Metadata.tier": 1}]}, "$and[1].Metadata.tier", "unknown_key"),
    ({1: "x"}, "", "unknown_key"),
    ({"metadata.": 1}, "metadata.", "bad_path"),
    ({"metadata.a..b": 1}, "metadata.a..b", "bad_path"),
    ({"metadata.équipe": 1}, "metadata.équipe", "bad_path"),
    ({"metadata.a b": 1}, "metadata.a b", "bad_path"),
    ({"metadata." + ".".join(["a"] * 17): 1}, "metadata." + ".".join(["a"] * 17), "bad_path"),
    ({"$gt": 1}, "$gt", "bad_operator"),
    ({"$date": "2026-01-01"}, "$date", "bad_operator"),
    ({"$where": "1"}, "$where", "bad_operator"),
    ({"source_name": {"$regex": "^a"}}, "source_name.$regex", "bad_operator"),
    ({"metadata.a": {"$and": [{"$gt": 1}]}}, "metadata.a.$and", "bad_operator"),
    ({"metadata.a": {"$gt": 1, "$date": "2026-01-01"}}, "metadata.a.$date", "bad_operator"),
    ({"occurred_at": {"$exists": True}}, "occurred_at.$exists", "operator_not_allowed"),
    ({"source_name": {"$gt": "a"}}, "source_name.$gt", "operator_not_allowed"),
    ({"title": {"$lte": "a"}}, "title.$lte", "operator_not_allowed"),
    ({"metadata": {"$in": [{}]}}, "metadata.$in", "operator_not_allowed"),
    ({"metadata": {"$exists": True}}, "metadata.$exists", "operator_not_allowed"),
    ({"$and": []}, "$and", "bad_operand"),
    ({"$or": {"source_name": "x"}}, "$or", "bad_operand"),
    ({"$nor": [1]}, "$nor[0]", "bad_operand"),
    ({"$not": [{"source_name": "x"}]}, "$not", "bad_operand"),
    ({"metadata.a": {"$in": "abc"}}, "metadata.a.$in", "bad_operand"),
    ({"metadata.a": {"$in": [[1]]}}, "metadata.a.$in[0]", "bad_operand"),
    ({"metadata.a": {"$exists": 1}}, "metadata.a.$exists", "bad_operand"),
    ({"metadata.a": {"$gt": None}}, "metadata.a.$gt", "bad_operand"),
    ({"metadata.a": {"$gt": True}}, "metadata.a.$gt", "bad_operand"),
    ({"metadata.a": {"$lt": [1]}}, "metadata.a.$lt", "bad_operand"),
    ({"metadata.a": float("nan")}, "metadata.a", "bad_operand"),
    ({"metadata.a": float("inf")}, "metadata.a", "bad_operand"),
    ({"metadata.a": 2**53 + 1}, "metadata.a", "bad_operand"),
    ({"metadata.a": "a\x00b"}, "metadata.a", "bad_operand"),
    ({"metadata.a": "\ud800"}, "metadata.a", "bad_operand"),
    ({"metadata.a": {1, 2}}, "metadata.a", "bad_operand"),
    ({"metadata.a": [datetime(2026, 1, 1, tzinfo=timezone.utc)]}, "metadata.a[0]", "bad_operand"),
    ({"metadata": {"$date": "2026-01-01"}}, "metadata", "bad_operand"),
    ({"source_name": 5}, "source_name", "bad_operand"),
    ({"source_name": True}, "source_name", "bad_operand"),
    ({"source_name": {"a": 1}}, "source_name", "bad_operand"),
    ({"source_name": {"$in": [1]}}, "source_name.$in[0]", "bad_operand"),
    ({"occurred_at": "2026-01-01T00:00:00Z"}, "occurred_at", "bad_operand"),
    ({"occurred_at": {"$gt": 1}}, "occurred_at.$gt", "bad_operand"),
    ({"metadata.d": {"$date": "2026-01-01", "x": 1}}, "metadata.d", "mixed_operator_keys"),
    ({"metadata.a": {"$gt": 1, "b": 2}}, "metadata.a", "mixed_operator_keys"),
    ({"metadata": {"tier": {"$in": ["gold"]}}}, "metadata.tier.$in", "nested_operator"),
    ({"metadata.a": [{"$gt": 1}]}, "metadata.a[0].$gt", "nested_operator"),
    ({"metadata.a": {"$eq": {"b": {"$date": "2026-01-01"}}}}, "metadata.a.$eq.b.$date", "nested_operator"),
    ({"occurred_at": datetime(2026, 1, 1)}, "occurred_at", "naive_datetime"),
    ({"occurred_at": {"$in": [datetime(2026, 1, 1)]}}, "occurred_at.$in[0]", "naive_datetime"),
    ({"metadata.d": {"$date": "2026-01-01T00:00:00"}}, "metadata.d", "naive_datetime"),
    ({"metadata.d": {"$gte": {"$date": "2026-01-01 10:00"}}}, "metadata.d.$gte", "naive_datetime"),
    ({"metadata.d": {"$date": "yesterday"}}, "metadata.d", "bad_date"),
    ({"metadata.d": {"$date": "2026-02-30"}}, "metadata.d", "bad_date"),
    ({"metadata.d": {"$date": "2026-01-01T25:00:00Z"}}, "metadata.d", "bad_date"),
    ({"metadata.d": {"$date": 20260101}}, "metadata.d", "bad_date"),
    ({"created_at": {"$date": "0001-01-01T00:00:00+01:00"}}, "created_at", "bad_date"),
]


@pytest.mark.parametrize(("obj", "path", "code"), REJECTIONS)
def test_rejections_carry_path_and_code(obj: Any, path: str, code: str) -> None:
    errors = _errors(obj)
    assert {"path": path, "code": code} in [{"path": e["path"], "code": e["code"]} for e in errors]
    assert all(e["message"] for e in errors)


def test_not_a_dict() -> None:
    assert [e["code"] for e in _errors(["source_name"])] == ["bad_operand"]
    assert [e["code"] for e in _errors("source_name = 'x'")] == ["bad_operand"]


def test_every_problem_is_reported_at_once() -> None:
    errors = _errors(
        {
            "tier": 1,
            "$and": [{"source_name": {"$gt": "a"}}, {"metadata.x": {"$in": 3}}],
            "occurred_at": datetime(2026, 1, 1),
        }
    )
    assert [(e["path"], e["code"]) for e in errors] == [
        ("tier", "unknown_key"),
        ("$and[0].source_name.$gt", "operator_not_allowed"),
        ("$and[1].metadata.x.$in", "bad_operand"),
        ("occurred_at", "naive_datetime"),
    ]


def test_unknown_key_suggests_metadata_path() -> None:
    assert "metadata.tier" in _errors({"tier": "gold"})[0]["message"]


# -- limits and hostile input ---------------------------------------------------------------------


def _nested(depth: int, wrap: str) -> dict[str, Any]:
    f: dict[str, Any] = {"source_name": "x"}
    for _ in range(depth):
        f = {"$not": f} if wrap == "$not" else {wrap: [f]}
    return f


@pytest.mark.parametrize("wrap", ["$not", "$and", "$or"])
@pytest.mark.parametrize("depth", [100, 10_000])
def test_deep_filters_are_rejected_without_recursion(wrap: str, depth: int) -> None:
    assert [e["code"] for e in _errors(_nested(depth, wrap))] == ["too_deep"]


def test_depth_limit_boundary() -> None:
    RecallFilter.parse(_nested(MAX_DEPTH - 1, "$not"))
    assert _errors(_nested(MAX_DEPTH, "$not"))[0]["code"] == "too_deep"


def test_deep_literal_is_rejected() -> None:
    value: Any = 1
    for _ in range(100):
        value = [value]
    assert _errors({"metadata.a": value})[0]["code"] == "too_deep"


def test_self_referencing_filter_is_rejected() -> None:
    f: dict[str, Any] = {}
    f["$not"] = f
    assert _errors(f)[0]["code"] == "too_deep"


def test_ten_thousand_leaves_are_rejected() -> None:
    f = {"$or": [{"metadata.n": i} for i in range(10_000)]}
    assert [e["code"] for e in _errors(f)] == ["too_large"]


def test_leaf_limit_boundary() -> None:
    RecallFilter.parse({"$or": [{"metadata.n": i} for i in range(MAX_LEAVES)]})
    assert _errors({"$or": [{"metadata.n": i} for i in range(MAX_LEAVES + 1)]})[0]["code"] == "too_large"


def test_huge_in_list_is_rejected_but_a_large_one_parses() -> None:
    assert _errors({"external_id": {"$in": [str(i) for i in range(20_000)]}})[0]["code"] == "too_large"
    f = RecallFilter.parse({"external_id": {"$in": [str(i) for i in range(5_000)]}})
    assert f.matches({"external_id": "4999", "metadata": {}})


HOSTILE_KEYS = [
    "source_name = '' OR 1=1 --",
    "metadata.a'); DROP TABLE chunks; --",
    'metadata.a"].b',
    "metadata.a) OR true //",
    "metadata.$a",
    "c.source_name",
    "метаданные.a",
    "metadata.ключ",
    "metadata.a\x00",
    "metadata.😀",
]


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_hostile_keys_are_rejected(key: str) -> None:
    assert _errors({key: 1})[0]["code"] in ("unknown_key", "bad_path")
