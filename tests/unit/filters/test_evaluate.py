"""The in-memory evaluator: table-driven semantics and the ISO-8601 date grammar."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from khora_core.filters import RecallFilter
from khora_core.filters.dates import datetime_to_us, iso_to_us, us_to_iso
from khora_core.filters.evaluate import json_equal
from khora_core.models import Chunk

from .strategies import CASES, RECORDS, dt, record


@pytest.mark.parametrize(("obj", "expected"), CASES)
def test_table_cases(obj: dict[str, Any], expected: set[str]) -> None:
    f = RecallFilter.parse(obj)
    assert {rid for rid, rec in RECORDS.items() if f.matches(rec)} == expected


def test_matches_a_real_chunk_record() -> None:
    chunk = Chunk(
        id="c1",
        namespace_id="ns",
        document_id="d1",
        index=0,
        content="hello",
        start_char=0,
        end_char=5,
        created_at=dt(2026, 2, 1),
        occurred_at=dt(2026, 1, 15),
        source_name="linear",
        metadata={"tier": "gold", "score": 0.9},
    )
    rec = chunk.filter_record()
    assert RecallFilter.parse(
        {
            "source_name": "linear",
            "metadata.tier": {"$in": ["gold", "silver"]},
            "occurred_at": {"$gte": dt(2026, 1, 1)},
        }
    ).matches(rec)
    assert RecallFilter.parse({"content_type": "text/plain", "title": None}).matches(rec)
    assert not RecallFilter.parse({"metadata.score": {"$gt": 0.9}}).matches(rec)


@pytest.mark.parametrize(
    ("stored", "literal", "equal"),
    [
        (1, 1.0, True),
        (True, 1, False),
        (1, True, False),
        (0, False, False),
        ("1", 1, False),
        (None, None, True),
        ([1, 2], [1, 2], True),
        ([2, 1], [1, 2], False),
        ([1, True], [1, 1], False),
        ({"a": 1, "b": [None]}, {"b": [None], "a": 1.0}, True),
        ({"a": 1}, {"a": 1, "b": None}, False),
        ((1, 2), [1, 2], True),
        ("a", ["a"], False),
    ],
)
def test_json_equality_is_typed(stored: Any, literal: Any, equal: bool) -> None:
    assert json_equal(stored, literal) is equal


def test_missing_values_match_only_negations_and_null() -> None:
    rec = record(metadata={})
    matching = [
        {"metadata.a": None},
        {"metadata.a": {"$ne": 1}},
        {"metadata.a": {"$nin": [1]}},
        {"metadata.a": {"$exists": False}},
        {"metadata.a": {"$not": {"$gt": 1}}},
        {"title": {"$ne": "x"}},
        {"occurred_at": {"$ne": dt(2026, 1, 1)}},
    ]
    failing = [
        {"metadata.a": {"$gt": 1}},
        {"metadata.a": {"$lte": "z"}},
        {"metadata.a": {"$in": [1, "a"]}},
        {"metadata.a": {"$exists": True}},
        {"metadata.a": []},
        {"metadata.a": {}},
        {"occurred_at": {"$lt": dt(2030, 1, 1)}},
        {"title": {"$exists": True}},
    ]
    assert all(RecallFilter.parse(f).matches(rec) for f in matching)
    assert not any(RecallFilter.parse(f).matches(rec) for f in failing)


def test_metadata_datetimes_read_as_iso_text() -> None:
    rec = record(metadata={"d": dt(2026, 1, 1)})
    assert RecallFilter.parse({"metadata.d": {"$date": "2026-01-01"}}).matches(rec)
    assert RecallFilter.parse({"metadata.d": "2026-01-01T00:00:00+00:00"}).matches(rec)


def test_paths_walk_objects_only() -> None:
    rec = record(metadata={"a": [{"b": 1}], "s": "text", "o": {"0": "zero"}})
    assert not RecallFilter.parse({"metadata.a.0.b": 1}).matches(rec)
    assert not RecallFilter.parse({"metadata.s.x": {"$exists": True}}).matches(rec)
    assert RecallFilter.parse({"metadata.o.0": "zero"}).matches(rec)


def test_naive_record_dates_are_read_as_utc() -> None:
    rec = record(occurred_at=datetime(2026, 1, 1))
    assert RecallFilter.parse({"occurred_at": dt(2026, 1, 1)}).matches(rec)


# -- the ISO-8601 grammar --------------------------------------------------------------------------

EPOCH_JAN1 = datetime_to_us(dt(2026, 1, 1))


@pytest.mark.parametrize(
    ("text", "us"),
    [
        ("2026-01-01", EPOCH_JAN1),
        ("2026-01-01T00:00:00Z", EPOCH_JAN1),
        ("2026-01-01T01:00:00+01:00", EPOCH_JAN1),
        ("2025-12-31T23:00:00-01:00", EPOCH_JAN1),
        ("2026-01-01T00:00:00.5Z", EPOCH_JAN1 + 500_000),
        ("2026-01-01T00:00:00.000001Z", EPOCH_JAN1 + 1),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.999999Z", -1),
        ("2024-02-29", datetime_to_us(dt(2024, 2, 29))),
        ("0001-01-01T00:00:00+01:00", datetime_to_us(dt(1, 1, 1)) - 3_600_000_000),
        ("9999-12-31T23:59:59Z", datetime_to_us(dt(9999, 12, 31, 23, 59, 59))),
    ],
)
def test_iso_dates(text: str, us: int) -> None:
    assert iso_to_us(text) == us


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-01T00:00:00",
        "2026-01-01 00:00:00Z",
        "2026-01-01T00:00Z",
        "2023-02-29",
        "2026-04-31",
        "2026-13-01",
        "2026-00-10",
        "0000-01-01",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z",
        "2026-01-01T00:00:60Z",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01T00:00:00+01:60",
        "2026-01-01T00:00:00.1234567Z",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00+0100",
        "2026-01-01T00:00:00z",
        "2026-01-01\n",
        "٢٠٢٦-01-01",
        "",
        20260101,
        None,
    ],
)
def test_not_iso_dates(text: Any) -> None:
    assert iso_to_us(text) is None


def test_iso_round_trip() -> None:
    for d in (dt(2026, 1, 1), dt(1, 1, 1), dt(2026, 1, 1) + timedelta(microseconds=7)):
        assert iso_to_us(us_to_iso(datetime_to_us(d))) == datetime_to_us(d)
    assert datetime_to_us(datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))) == EPOCH_JAN1
