"""SQLite (stdlib, in memory) selects exactly the rows the in-memory evaluator selects."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings

from khora_core.errors import RecallFilterValidationError
from khora_core.filters import RecallFilter, compile_cypher, compile_sqlite
from khora_core.filters.dates import iso_to_us
from khora_core.filters.sql_sqlite import _iso_us

from .strategies import CASES, ISO_TEXTS, RECORDS, filters, record, record_sets, sqlite_rows, sqlite_select


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize(("obj", "expected"), CASES)
def test_table_cases(obj: dict[str, Any], expected: set[str], ensure_ascii: bool) -> None:
    f = RecallFilter.parse(obj)
    compiled = compile_sqlite(f)
    conn = sqlite_rows(RECORDS, ensure_ascii=ensure_ascii)
    assert sqlite_select(conn, compiled.sql, compiled.params) == expected


def _parse_or_skip(obj: dict[str, Any]) -> RecallFilter:
    try:
        return RecallFilter.parse(obj)
    except RecallFilterValidationError as exc:
        # The generator builds only valid forms; it can still nest past the depth limit.
        assume(all(e["code"] in ("too_deep", "too_large") for e in exc.errors))
        raise AssertionError("unreachable") from exc


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_sets, obj=filters)
def test_sqlite_selects_what_the_evaluator_selects(
    records: dict[str, dict[str, Any]], obj: dict[str, Any]
) -> None:
    f = _parse_or_skip(obj)
    expected = {rid for rid, rec in records.items() if f.matches(rec)}
    compiled = compile_sqlite(f)
    assert compiled.residual is None
    assert sqlite_select(sqlite_rows(records), compiled.sql, compiled.params) == expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_sets, obj=filters)
def test_cypher_split_keeps_the_meaning(records: dict[str, dict[str, Any]], obj: dict[str, Any]) -> None:
    """``pushed AND residual`` is the filter: checked by evaluating both parts in memory."""
    f = _parse_or_skip(obj)
    compiled = compile_cypher(f)
    pushed_keys = set(compiled.pushed_keys)
    assert pushed_keys.isdisjoint(compiled.residual_keys)
    assert not any(k.startswith("metadata") for k in pushed_keys)
    assert set(f.leaf_keys()) == pushed_keys | set(compiled.residual_keys)
    if compiled.residual is not None:
        # The residual must be a conjunct of the filter: whatever it rejects, the filter rejects.
        for rec in records.values():
            if f.matches(rec):
                assert compiled.residual.matches(rec)


def test_sqlite_date_parser_agrees_with_python() -> None:
    conn = sqlite3.connect(":memory:")
    sql = f"SELECT {_iso_us('d.s')} FROM (SELECT ? AS s) AS d"
    samples = [
        *ISO_TEXTS,
        "2023-02-29",
        "2024-02-29T23:59:59.999999-23:59",
        "2026-04-31",
        "2026-12-31T24:00:00Z",
        "2026-01-01T00:00:00.1234567Z",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00+01:00Z",
        "0000-01-01",
        "0001-01-01T00:00:00+23:59",
        "9999-12-31T23:59:59-23:59",
        "2026-01-01T00:00:00+0100",
        " 2026-01-01",
        "2026-01-01 ",
        "x",
        "",
    ]
    for text in samples:
        assert conn.execute(sql, (text,)).fetchone()[0] == iso_to_us(text), text
    for value in (5, 2.5, None):
        assert conn.execute(sql, (value,)).fetchone()[0] is None


def test_hostile_values_are_matched_literally() -> None:
    hostile = ["'; DROP TABLE chunks; --", '" OR 1=1 --', "\\", "%", "_", "*", "?", "é😀", "$.a", "]"]
    records = {f"r{i}": record(title=v, metadata={"v": v}) for i, v in enumerate(hostile)}
    conn = sqlite_rows(records)
    for i, value in enumerate(hostile):
        for obj in ({"title": value}, {"metadata.v": value}, {"metadata.v": {"$in": [value]}}):
            compiled = compile_sqlite(RecallFilter.parse(obj))
            assert sqlite_select(conn, compiled.sql, compiled.params) == {f"r{i}"}
    assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == len(hostile)


def test_large_filters_compile_and_run() -> None:
    ids = [str(i) for i in range(5_000)]
    conn = sqlite_rows({"r": record(external_id="4999", metadata={"n": 999})})
    for obj in (
        {"external_id": {"$in": ids}},
        {"metadata.n": {"$in": list(range(5_000))}},
        {"$or": [{"metadata.n": i} for i in range(1_000)]},
    ):
        compiled = compile_sqlite(RecallFilter.parse(obj))
        assert sqlite_select(conn, compiled.sql, compiled.params) == {"r"}


def test_long_literals_compile_and_run() -> None:
    value = list(range(2_000))
    conn = sqlite_rows({"r": record(metadata={"n": value, "o": {f"k{i}": i for i in range(300)}})})
    for obj in ({"metadata.n": value}, {"metadata.o": {f"k{i}": i for i in range(300)}}):
        compiled = compile_sqlite(RecallFilter.parse(obj))
        assert sqlite_select(conn, compiled.sql, compiled.params) == {"r"}
