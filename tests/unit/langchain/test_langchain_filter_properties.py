"""Property test: a translated PGVector filter selects what PGVector would on records
whose fields are present and well-typed, judged by the ``RecallFilter`` evaluator (missing
keys, nulls and type mismatches are compared live in
``tests/integration/langchain/test_pgvector_filter_parity.py``)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from khora_core.filters import RecallFilter
from khora_integrations.langchain.filters import pgvector_to_recall_filter

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
    lambda a, b, c, src: {**SYSTEM_NONE, "metadata": {"a": a, "b": b, "source_name": src, **c}},
    INTS,
    WORDS,
    st.one_of(st.just({}), st.builds(lambda v: {"c": v}, INTS)),
    SOURCES,
)


def _value(field: str, record: dict[str, Any]) -> Any:
    return record["metadata"].get(field)  # every key is the user's own metadata key


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
