"""Shared test data for recall filters: fixed records, table-driven cases, hypothesis strategies.

Used by the unit tests here and by ``tests/storage/test_filter_equivalence.py``, so every
backend runs the same cases.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from khora_core.filters.dates import datetime_to_us
from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS

UTC = timezone.utc
SYSTEM_KEYS = SYSTEM_DATE_KEYS + SYSTEM_STRING_KEYS


def dt(*args: int, tz: timezone = UTC) -> datetime:
    return datetime(*args, tzinfo=tz)


def record(**fields: Any) -> dict[str, Any]:
    """A ``Chunk.filter_record()``-shaped dict (unset system keys are None)."""
    out: dict[str, Any] = {k: None for k in SYSTEM_KEYS}
    out["metadata"] = {}
    out.update(fields)
    return out


# -- fixed records and table-driven cases -----------------------------------------------------

RECORDS: dict[str, dict[str, Any]] = {
    "r1": record(
        source_name="linear",
        source_type="doc",
        title="Pricing",
        occurred_at=dt(2026, 1, 15),
        created_at=dt(2026, 2, 1),
        metadata={
            "tier": "gold",
            "score": 0.9,
            "public": True,
            "team": {"name": "ingest"},
            "tags": ["a", "b"],
            "published": "2026-02-01T00:00:00Z",
            "n": 1,
        },
    ),
    "r2": record(
        source_name="slack",
        source_type="chat",
        occurred_at=dt(2025, 12, 1),
        created_at=dt(2026, 2, 1),
        metadata={
            "tier": "silver",
            "score": 0.5,
            "public": False,
            "team": {"name": "search"},
            "tags": ["b", "a"],
            "published": "2025-06-01",
            "n": "1",
        },
    ),
    "r3": record(created_at=dt(2026, 2, 2)),
    "r4": record(
        source_name="linear",
        created_at=dt(2026, 2, 3),
        occurred_at=dt(2026, 1, 1, 0, 0, 0) + timedelta(microseconds=1),
        metadata={
            "tier": None,
            "score": 1,
            "public": 1,
            "team": "ingest",
            "tags": "a",
            "published": "2026-01-01T10:00:00",
            "n": 1.0,
        },
    ),
    "r5": record(
        source_type="doc",
        created_at=dt(2026, 2, 4),
        metadata={
            "tier": ["gold"],
            "score": "0.9",
            "team": {"name": "ingest", "size": 3},
            "published": "2026-03-01T01:00:00+02:00",
            "n": True,
        },
    ),
    "r6": record(
        title="O'Reilly",
        source='x"; DROP TABLE chunks; --',
        source_url="https://example.com/é?q='1'",
        created_at=dt(2026, 2, 5),
        metadata={"weird": "é😀\"'", "blob": {"a": [1, {"b": None}]}, "published": "2026-02-30"},
    ),
}

_GOLD_DATE = {"$date": "2026-02-01T00:00:00Z"}

#: (filter, ids the filter selects among RECORDS), worked out by hand from the semantics.
CASES: list[tuple[dict[str, Any], set[str]]] = [
    # the spec's examples
    (
        {
            "source_name": "linear",
            "metadata.tier": {"$in": ["gold", "silver"]},
            "occurred_at": {"$gte": dt(2026, 1, 1)},
        },
        {"r1"},
    ),
    ({"metadata.team.name": {"$eq": "ingest"}}, {"r1", "r5"}),
    ({"metadata.score": {"$gte": 0.8}}, {"r1", "r4"}),
    (
        {"$or": [{"source_name": "linear"}, {"$and": [{"source_type": "doc"}, {"metadata.public": True}]}]},
        {"r1", "r4"},
    ),
    ({"source_name": {"$eq": "linear"}}, {"r1", "r4"}),
    ({"source_type": ["a", "b"]}, set()),
    ({"source_type": {"$in": ["doc", "b"]}}, {"r1", "r5"}),
    ({"metadata.published": {"$gte": {"$date": "2026-01-01T00:00:00Z"}}}, {"r1", "r5"}),
    ({"occurred_at": {"$gte": dt(2026, 1, 1), "$lt": dt(2026, 2, 1)}}, {"r1", "r4"}),
    # null and missing
    ({"source_name": None}, {"r3", "r5", "r6"}),
    ({"source_name": {"$ne": None}}, {"r1", "r2", "r4"}),
    ({"metadata.tier": None}, {"r3", "r4", "r6"}),
    ({"metadata.tier": {"$exists": True}}, {"r1", "r2", "r4", "r5"}),
    ({"metadata.tier": {"$exists": False}}, {"r3", "r6"}),
    ({"source_name": {"$exists": False}}, {"r3", "r5", "r6"}),
    ({"occurred_at": None}, {"r3", "r5", "r6"}),
    ({"source_name": {"$ne": "linear"}}, {"r2", "r3", "r5", "r6"}),
    ({"source_name": {"$nin": ["linear", "slack"]}}, {"r3", "r5", "r6"}),
    ({"source_name": {"$in": [None, "slack"]}}, {"r2", "r3", "r5", "r6"}),
    ({"source_name": {"$nin": [None, "slack"]}}, {"r1", "r4"}),
    ({"source_name": {"$in": []}}, set()),
    ({"source_name": {"$nin": []}}, set(RECORDS)),
    # typed equality
    ({"metadata.n": 1}, {"r1", "r4"}),
    ({"metadata.n": "1"}, {"r2"}),
    ({"metadata.n": True}, {"r5"}),
    ({"metadata.n": {"$in": [1, True]}}, {"r1", "r4", "r5"}),
    ({"metadata.public": 1}, {"r4"}),
    ({"metadata.public": {"$ne": True}}, {"r2", "r3", "r4", "r5", "r6"}),
    ({"metadata.tags": ["a", "b"]}, {"r1"}),
    ({"metadata.tags": {"$in": ["a"]}}, {"r4"}),
    ({"metadata.tier": ["gold"]}, {"r5"}),
    ({"metadata.team": {"name": "ingest"}}, {"r1"}),
    ({"metadata.blob": {"a": [1, {"b": None}]}}, {"r6"}),
    ({"metadata.blob": {"a": [1, {"b": None, "c": 1}]}}, set()),
    ({"metadata": {}}, {"r3"}),
    (
        {"metadata": {"weird": "é😀\"'", "blob": {"a": [1, {"b": None}]}, "published": "2026-02-30"}},
        {"r6"},
    ),
    ({"metadata": {"$ne": {}}}, {"r1", "r2", "r4", "r5", "r6"}),
    ({"metadata.team.name.x": {"$exists": True}}, set()),
    ({"metadata.tags.0": "a"}, set()),
    # ranges are typed
    ({"metadata.score": {"$gt": "0"}}, {"r5"}),
    ({"metadata.score": {"$lt": 1}}, {"r1", "r2"}),
    ({"metadata.score": {"$lte": 1}}, {"r1", "r2", "r4"}),
    ({"metadata.tier": {"$gte": "h"}}, {"r2"}),
    ({"metadata.weird": {"$gt": "é"}}, {"r6"}),
    ({"metadata.published": {"$gt": "2026"}}, {"r1", "r4", "r5", "r6"}),
    ({"metadata.published": {"$lt": {"$date": "2026-03-01"}}}, {"r1", "r2", "r5"}),
    ({"metadata.published": {"$eq": _GOLD_DATE}}, {"r1"}),
    ({"metadata.published": {"$eq": {"$date": "2026-02-28T23:00:00Z"}}}, {"r5"}),
    (
        {"metadata.published": {"$in": [{"$date": "2025-06-01T00:00:00Z"}, "2026-01-01T10:00:00"]}},
        {"r2", "r4"},
    ),
    ({"metadata.published": {"$nin": [_GOLD_DATE]}}, {"r2", "r3", "r4", "r5", "r6"}),
    ({"occurred_at": {"$gt": dt(2026, 1, 1)}}, {"r1", "r4"}),
    ({"occurred_at": {"$lte": dt(2026, 1, 1)}}, {"r2"}),
    ({"occurred_at": {"$eq": dt(2026, 1, 1, 1, 0, 0, tz=timezone(timedelta(hours=1)))}}, set()),
    ({"occurred_at": {"$eq": dt(2026, 1, 15, 2, 0, 0, tz=timezone(timedelta(hours=2)))}}, {"r1"}),
    ({"occurred_at": {"$ne": dt(2026, 1, 15)}}, {"r2", "r3", "r4", "r5", "r6"}),
    ({"occurred_at": {"$in": [dt(2025, 12, 1), None]}}, {"r2", "r3", "r5", "r6"}),
    ({"occurred_at": {"$nin": [dt(2025, 12, 1)]}}, {"r1", "r3", "r4", "r5", "r6"}),
    ({"created_at": {"$gt": {"$date": "2026-02-03"}}}, {"r5", "r6"}),
    ({"created_at": {"$gte": {"$date": "2026-02-03"}}}, {"r4", "r5", "r6"}),
    ({"occurred_at": {"$not": {"$gt": dt(2026, 1, 1)}}}, {"r2", "r3", "r5", "r6"}),
    # logic
    ({"$nor": [{"source_name": "linear"}, {"metadata.tier": "silver"}]}, {"r3", "r5", "r6"}),
    ({"$not": {"metadata.score": {"$gte": 0.8}}}, {"r2", "r3", "r5", "r6"}),
    ({"metadata.score": {"$not": {"$gte": 0.8}}}, {"r2", "r3", "r5", "r6"}),
    ({"metadata.score": {"$not": 1}}, {"r1", "r2", "r3", "r5", "r6"}),
    (
        {"$and": [{"source_name": "linear"}, {"$or": [{"metadata.n": "1"}, {"metadata.n": 1.0}]}]},
        {"r1", "r4"},
    ),
    ({}, set(RECORDS)),
    ({"$not": {}}, set()),
    # hostile values are matched literally
    ({"title": "O'Reilly"}, {"r6"}),
    ({"source": 'x"; DROP TABLE chunks; --'}, {"r6"}),
    ({"source_url": {"$in": ["https://example.com/é?q='1'"]}}, {"r6"}),
    ({"metadata.weird": "é😀\"'"}, {"r6"}),
    ({"title": "' OR 1=1 --"}, set()),
    ({"metadata.tier": "gold' OR '1'='1"}, set()),
    ({"source_name": "linear') OR true //"}, set()),
]


# -- SQLite table per the conventions ----------------------------------------------------------

SQLITE_DDL = (
    "CREATE TABLE chunks (id TEXT PRIMARY KEY, "
    + ", ".join(f"{k} INTEGER" for k in SYSTEM_DATE_KEYS)
    + ", "
    + ", ".join(f"{k} TEXT" for k in SYSTEM_STRING_KEYS)
    + ", metadata TEXT NOT NULL DEFAULT '{}')"
)


def sqlite_rows(records: dict[str, dict[str, Any]], *, ensure_ascii: bool = True) -> sqlite3.Connection:
    """An in-memory SQLite database with a ``chunks`` table holding ``records``."""
    conn = sqlite3.connect(":memory:")
    conn.execute(SQLITE_DDL)
    columns = ["id", *SYSTEM_KEYS, "metadata"]
    for rid, rec in records.items():
        values = [rid]
        for key in SYSTEM_KEYS:
            v = rec.get(key)
            values.append(datetime_to_us(v) if isinstance(v, datetime) else v)
        values.append(json.dumps(rec.get("metadata", {}), ensure_ascii=ensure_ascii))
        conn.execute(
            f"INSERT INTO chunks ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", values
        )
    return conn


def sqlite_select(conn: sqlite3.Connection, sql: str, params: list[Any]) -> set[str]:
    return {row[0] for row in conn.execute(f"SELECT c.id FROM chunks AS c WHERE {sql}", params)}


# -- hypothesis strategies ----------------------------------------------------------------------

DATES = [
    dt(2025, 12, 1),
    dt(2026, 1, 1),
    dt(2026, 1, 1) + timedelta(microseconds=1),
    dt(2026, 1, 15, 12, 30),
    dt(1969, 12, 31, 23, 59, 59),
]
ISO_TEXTS = [
    "2026-01-01",
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:00.000001Z",
    "2026-01-01T01:00:00+01:00",
    "2026-01-15T12:30:00.5-00:00",
    "2025-12-01T00:00:00Z",
    "2026-01-01T00:00:00",
    "2026-02-30",
    "2024-02-29T23:59:59Z",
    "1969-12-31T23:59:59Z",
]
TEXTS = ["a", "b", "", "1", "true", "é", "😀", "O'Reilly", 'x"y', "A", "aa", "2026"]
NUMBERS = [0, 1, -1, 2, 0.5, 1.0, -2.5, 1e20, 2**53]

strings = st.sampled_from(TEXTS + ISO_TEXTS)
scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(NUMBERS), strings)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "x"]), inner, max_size=3)
    ),
    max_leaves=6,
)
metadata = st.dictionaries(st.sampled_from(["a", "b", "c"]), json_values, max_size=3)
system_strings = st.sampled_from([None, "a", "b", "é", "O'Reilly", 'x"y', ""])
system_dates = st.sampled_from([None, *DATES])

records_strategy = st.fixed_dictionaries(
    {
        **{k: system_dates for k in SYSTEM_DATE_KEYS},
        **{k: system_strings for k in ("source_type", "source_name", "title")},
        "metadata": metadata,
    }
).map(lambda r: record(**r))
record_sets = st.lists(records_strategy, min_size=1, max_size=8).map(
    lambda rs: {f"r{i}": r for i, r in enumerate(rs)}
)

date_operands = st.one_of(
    st.sampled_from(DATES),
    st.sampled_from(DATES).map(lambda d: {"$date": d.isoformat()}),
    st.sampled_from([t for t in ISO_TEXTS if t not in ("2026-01-01T00:00:00", "2026-02-30")]).map(
        lambda t: {"$date": t}
    ),
)
DATE_KEYS = st.sampled_from(SYSTEM_DATE_KEYS)
STRING_KEYS = st.sampled_from(["source_type", "source_name", "title"])
META_KEYS = st.sampled_from(["metadata.a", "metadata.b", "metadata.c", "metadata.a.b", "metadata.a.x"])
RANGE_OPS = st.sampled_from(["$gt", "$gte", "$lt", "$lte"])


def _cond(op: st.SearchStrategy[str], operand: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.tuples(op, operand).map(lambda t: {t[0]: t[1]})


date_conditions = st.one_of(
    date_operands,
    st.none(),
    _cond(st.sampled_from(["$eq", "$ne"]), st.one_of(date_operands, st.none())),
    _cond(RANGE_OPS, date_operands),
    _cond(st.sampled_from(["$in", "$nin"]), st.lists(st.one_of(date_operands, st.none()), max_size=3)),
)
string_conditions = st.one_of(
    system_strings,
    st.lists(st.sampled_from(TEXTS), max_size=2),
    _cond(st.sampled_from(["$eq", "$ne"]), system_strings),
    _cond(st.sampled_from(["$in", "$nin"]), st.lists(system_strings, max_size=3)),
    _cond(st.just("$exists"), st.booleans()),
)
meta_members = st.one_of(scalars, date_operands)
meta_conditions = st.one_of(
    json_values,
    _cond(st.sampled_from(["$eq", "$ne"]), st.one_of(json_values, date_operands)),
    _cond(RANGE_OPS, st.one_of(st.sampled_from(NUMBERS), strings, date_operands)),
    _cond(st.sampled_from(["$in", "$nin"]), st.lists(meta_members, max_size=4)),
    _cond(st.just("$exists"), st.booleans()),
)


def _with_not(conditions: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return conditions | conditions.filter(lambda c: c != {}).map(lambda c: {"$not": c})


field_filters = st.one_of(
    st.tuples(DATE_KEYS, _with_not(date_conditions)),
    st.tuples(STRING_KEYS, _with_not(string_conditions)),
    st.tuples(META_KEYS, _with_not(meta_conditions)),
    st.tuples(st.just("metadata"), st.one_of(metadata, _cond(st.sampled_from(["$eq", "$ne"]), metadata))),
).map(lambda kv: {kv[0]: kv[1]})

filters = st.recursive(
    field_filters,
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(["$and", "$or", "$nor"]), st.lists(inner, min_size=1, max_size=3)).map(
            lambda t: {t[0]: t[1]}
        ),
        inner.map(lambda f: {"$not": f}),
        st.tuples(inner, inner).map(lambda t: {**t[0], **t[1]}),
    ),
    max_leaves=6,
)
