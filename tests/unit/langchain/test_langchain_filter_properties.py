"""Property tests: translated filters select exactly what they should, judged by the
``RecallFilter`` in-memory evaluator on randomised records."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from khora_core.filters import RecallFilter
from khora_integrations.langchain.filters import pgvector_to_recall_filter, recall_filter_to_pgvector

SYSTEM_NONE = {
    "occurred_at": None,
    "created_at": datetime(2026, 1, 1, tzinfo=timezone.utc),
    "source_timestamp": None,
    "source_type": None,
    "source_name": None,
    "source_url": None,
    "external_id": None,
    "content_type": "text/plain",
    "source": None,
    "title": None,
}
INTS = st.integers(min_value=0, max_value=5)
WORDS = st.sampled_from(["x", "y", "z"])
SOURCES = st.sampled_from(["linear", "slack", "mail"])

# -- PGVector filters over present, well-typed fields, with a reference evaluator --------


def _ops(values: st.SearchStrategy[Any], *, ranges: bool) -> st.SearchStrategy[Any]:
    names = ["$eq", "$ne"] + (["$lt", "$lte", "$gt", "$gte"] if ranges else [])
    single = st.tuples(st.sampled_from(names), values).map(lambda t: {t[0]: t[1]})
    member = st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(values, max_size=3)).map(
        lambda t: {t[0]: t[1]}
    )
    options = [values, single, member]
    if ranges:
        options.append(st.tuples(values, values).map(lambda t: {"$between": [min(t), max(t)]}))
    return st.one_of(*options)


PG_FIELD = st.one_of(
    st.builds(lambda c: {"a": c}, _ops(INTS, ranges=True)),
    st.builds(lambda c: {"b": c}, _ops(WORDS, ranges=False)),
    st.builds(lambda c: {"source_name": c}, _ops(SOURCES, ranges=False)),
    st.builds(lambda e: {"c": {"$exists": e}}, st.booleans()),
    st.builds(lambda a, b: {"a": a, "b": b}, _ops(INTS, ranges=True), _ops(WORDS, ranges=False)),
)
PG_FILTER = st.recursive(
    PG_FIELD,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"$and": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$or": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"$not": x}, inner),
        st.builds(lambda xs: {"$not": xs}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=8,
)
PG_RECORD = st.builds(
    lambda a, b, c, src: {**SYSTEM_NONE, "source_name": src, "metadata": {"a": a, "b": b, **c}},
    INTS,
    WORDS,
    st.one_of(st.just({}), st.builds(lambda v: {"c": v}, INTS)),
    SOURCES,
)


def _value(field: str, record: dict[str, Any]) -> Any:
    return record["source_name"] if field == "source_name" else record["metadata"].get(field)


def _pg_condition(field: str, cond: Any, record: dict[str, Any]) -> bool:
    """What langchain-postgres selects for a field condition (fields here are present)."""
    if not isinstance(cond, dict):
        cond = {"$eq": cond}
    ((op, arg),) = cond.items()
    if op == "$exists":
        return (field in record["metadata"]) == arg
    v = _value(field, record)
    return {
        "$eq": lambda: v == arg,
        "$ne": lambda: v != arg,
        "$lt": lambda: v < arg,
        "$lte": lambda: v <= arg,
        "$gt": lambda: v > arg,
        "$gte": lambda: v >= arg,
        "$in": lambda: v in arg,
        "$nin": lambda: v not in arg,
        "$between": lambda: arg[0] <= v <= arg[1],
    }[op]()


def pg_matches(f: dict[str, Any], record: dict[str, Any]) -> bool:
    if "$and" in f:
        return all(pg_matches(x, record) for x in f["$and"])
    if "$or" in f:
        return any(pg_matches(x, record) for x in f["$or"])
    if "$not" in f:
        items = f["$not"] if isinstance(f["$not"], list) else [f["$not"]]
        return not any(pg_matches(x, record) for x in items)
    return all(_pg_condition(k, c, record) for k, c in f.items())


@settings(max_examples=300, deadline=None)
@given(PG_FILTER, st.lists(PG_RECORD, min_size=1, max_size=5))
def test_translated_pgvector_filter_selects_what_pgvector_would(pg, records):
    khora = RecallFilter.parse(pgvector_to_recall_filter(pg))
    for record in records:
        assert khora.matches(record) == pg_matches(pg, record), (pg, record)


# -- RecallFilter -> PGVector -> RecallFilter keeps the meaning (missing values included) ----

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DATES = st.integers(min_value=0, max_value=4).map(lambda d: T0 + timedelta(days=d))


def _khora_ops(values: st.SearchStrategy[Any], ops: list[str]) -> st.SearchStrategy[Any]:
    single = st.tuples(st.sampled_from(ops), values).map(lambda t: {t[0]: t[1]})
    member = st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(values, max_size=3)).map(
        lambda t: {t[0]: t[1]}
    )
    pair = st.tuples(st.sampled_from(ops), values, st.sampled_from(ops), values).map(
        lambda t: {t[0]: t[1], t[2]: t[3]}
    )
    negated = single.map(lambda c: {"$not": c})
    return st.one_of(values, single, member, pair, negated)


RANGE = ["$eq", "$ne", "$lt", "$lte", "$gt", "$gte"]
KHORA_FIELD = st.one_of(
    st.builds(lambda c: {"metadata.a": c}, _khora_ops(INTS, RANGE)),
    st.builds(lambda c: {"metadata.b": c}, _khora_ops(WORDS, RANGE)),
    st.builds(lambda c: {"source": c}, _khora_ops(SOURCES, ["$eq", "$ne"])),
    st.builds(lambda c: {"occurred_at": c}, _khora_ops(DATES, RANGE)),
    st.builds(lambda e: {"metadata.c": {"$exists": e}}, st.booleans()),
)
KHORA_FILTER = st.recursive(
    KHORA_FIELD,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"$and": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$or": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$nor": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"$not": x}, inner),
    ),
    max_leaves=8,
)
MAYBE = st.one_of(st.just({}), st.builds(lambda v: {"v": v}, st.one_of(INTS, WORDS, st.none())))
KHORA_RECORD = st.builds(
    lambda a, b, c, src, when: {
        **SYSTEM_NONE,
        "source": src,
        "occurred_at": when,
        "metadata": {
            **({"a": a["v"]} if a else {}),
            **({"b": b["v"]} if b else {}),
            **({"c": c["v"]} if c else {}),
        },
    },
    MAYBE,
    MAYBE,
    MAYBE,
    st.one_of(st.none(), SOURCES),
    st.one_of(st.none(), DATES),
)


@settings(max_examples=300, deadline=None)
@given(KHORA_FILTER, st.lists(KHORA_RECORD, min_size=1, max_size=5))
def test_khora_pgvector_khora_round_trip_keeps_the_meaning(khora, records):
    original = RecallFilter.parse(khora)
    pg = recall_filter_to_pgvector(khora)
    back = RecallFilter.parse(pgvector_to_recall_filter(pg))
    assert pgvector_to_recall_filter(pgvector_to_recall_filter(pg)) == pgvector_to_recall_filter(pg)
    for record in records:
        assert back.matches(record) == original.matches(record), (khora, pg, record)
