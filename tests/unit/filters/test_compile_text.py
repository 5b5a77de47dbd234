"""Exact compiled text and parameters for each backend compiler."""

from __future__ import annotations

from typing import Any

import pytest

from khora_core.errors import InvalidInputError, RecallFilterUnsupportedError
from khora_core.filters import (
    POSTGRES_SUPPORT_DDL,
    RecallFilter,
    check_supported,
    compile_cypher,
    compile_postgres,
    compile_sqlite,
)
from khora_core.filters.compiled import split_pushable
from khora_core.filters.sql_sqlite import sqlite_json_path

from .strategies import dt

D = dt(2026, 1, 1)
D_US = 1767225600000000

# (filter, postgres sql, postgres params, sqlite sql, sqlite params, cypher sql, cypher params)
SYSTEM_CASES: list[tuple[dict[str, Any], str, list[Any], str, list[Any], str, dict[str, Any]]] = [
    (
        {"source_name": "linear"},
        "c.source_name = $1::text",
        ["linear"],
        "c.source_name = ?",
        ["linear"],
        "c.source_name = $f_0",
        {"f_0": "linear"},
    ),
    (
        {"source_name": {"$ne": "linear"}},
        "(c.source_name IS NULL OR c.source_name <> $1::text)",
        ["linear"],
        "(c.source_name IS NULL OR c.source_name <> ?)",
        ["linear"],
        "(c.source_name IS NULL OR c.source_name <> $f_0)",
        {"f_0": "linear"},
    ),
    (
        {"source_name": None},
        "c.source_name IS NULL",
        [],
        "c.source_name IS NULL",
        [],
        "c.source_name IS NULL",
        {},
    ),
    (
        {"source_name": {"$ne": None}},
        "c.source_name IS NOT NULL",
        [],
        "c.source_name IS NOT NULL",
        [],
        "c.source_name IS NOT NULL",
        {},
    ),
    (
        {"source_name": {"$in": ["a", None]}},
        "(c.source_name IS NULL OR c.source_name = ANY($1::text[]))",
        [["a"]],
        "(c.source_name IS NULL OR c.source_name IN (?))",
        ["a"],
        "(c.source_name IS NULL OR c.source_name IN $f_0)",
        {"f_0": ["a"]},
    ),
    (
        {"title": {"$nin": ["a", "b"]}},
        "(c.title IS NULL OR c.title <> ALL($1::text[]))",
        [["a", "b"]],
        "(c.title IS NULL OR c.title NOT IN (?, ?))",
        ["a", "b"],
        "(c.title IS NULL OR NOT (c.title IN $f_0))",
        {"f_0": ["a", "b"]},
    ),
    (
        {"source": {"$exists": True}},
        "c.source IS NOT NULL",
        [],
        "c.source IS NOT NULL",
        [],
        "c.source IS NOT NULL",
        {},
    ),
    (
        {"source": {"$exists": False}},
        "c.source IS NULL",
        [],
        "c.source IS NULL",
        [],
        "c.source IS NULL",
        {},
    ),
    (
        {"source_type": ["a", "b"]},
        "FALSE",
        [],
        "0",
        [],
        "FALSE",
        {},
    ),
    (
        {"occurred_at": {"$gte": D, "$lt": D}},
        "(c.occurred_at >= $1::timestamptz AND c.occurred_at < $2::timestamptz)",
        [D, D],
        "(c.occurred_at >= ? AND c.occurred_at < ?)",
        [D_US, D_US],
        "(c.occurred_at >= $f_0 AND c.occurred_at < $f_1)",
        {"f_0": D, "f_1": D},
    ),
    (
        {"created_at": {"$not": {"$gt": {"$date": "2026-01-01T01:00:00+01:00"}}}},
        "(c.created_at IS NULL OR c.created_at <= $1::timestamptz)",
        [D],
        "(c.created_at IS NULL OR c.created_at <= ?)",
        [D_US],
        "(c.created_at IS NULL OR c.created_at <= $f_0)",
        {"f_0": D},
    ),
    (
        {"source_timestamp": {"$in": [D]}},
        "c.source_timestamp = ANY($1::timestamptz[])",
        [[D]],
        "c.source_timestamp IN (?)",
        [D_US],
        "c.source_timestamp IN $f_0",
        {"f_0": [D]},
    ),
    (
        {"$nor": [{"title": "a"}, {"occurred_at": {"$lte": D}}]},
        "((c.title IS NULL OR c.title <> $1::text) AND (c.occurred_at IS NULL OR c.occurred_at > $2::timestamptz))",
        ["a", D],
        "((c.title IS NULL OR c.title <> ?) AND (c.occurred_at IS NULL OR c.occurred_at > ?))",
        ["a", D_US],
        "((c.title IS NULL OR c.title <> $f_0) AND (c.occurred_at IS NULL OR c.occurred_at > $f_1))",
        {"f_0": "a", "f_1": D},
    ),
    ({}, "TRUE", [], "1", [], "TRUE", {}),
    ({"$not": {}}, "FALSE", [], "0", [], "FALSE", {}),
    # a constant absorbs its siblings and drops their parameters
    ({"$and": [{"source_name": "x"}, {"source_type": ["a"]}]}, "FALSE", [], "0", [], "FALSE", {}),
    ({"$or": [{"source_name": "x"}, {"title": {"$nin": []}}]}, "TRUE", [], "1", [], "TRUE", {}),
    # hostile values stay parameters
    (
        {"title": "' OR 1=1 --"},
        "c.title = $1::text",
        ["' OR 1=1 --"],
        "c.title = ?",
        ["' OR 1=1 --"],
        "c.title = $f_0",
        {"f_0": "' OR 1=1 --"},
    ),
]


@pytest.mark.parametrize(("obj", "pg", "pg_params", "lite", "lite_params", "cy", "cy_params"), SYSTEM_CASES)
def test_system_keys(
    obj: dict[str, Any],
    pg: str,
    pg_params: list[Any],
    lite: str,
    lite_params: list[Any],
    cy: str,
    cy_params: dict[str, Any],
) -> None:
    f = RecallFilter.parse(obj)
    compiled = compile_postgres(f)
    assert (compiled.sql, compiled.params) == (pg, pg_params)
    compiled = compile_sqlite(f)
    assert (compiled.sql, compiled.params) == (lite, lite_params)
    compiled = compile_cypher(f)
    assert (compiled.sql, compiled.params) == (cy, cy_params)
    assert compiled.residual is None and compiled.residual_keys == []


# (filter, postgres sql, postgres params, sqlite sql, sqlite params)
METADATA_CASES: list[tuple[dict[str, Any], str, list[Any], str, list[Any]]] = [
    (
        {"metadata.team.name": "ingest"},
        "(c.metadata -> $1::text -> $2::text) = $3::text::jsonb",
        ["team", "name", '"ingest"'],
        "(json_type(c.metadata, ?) = 'text' AND json_extract(c.metadata, ?) = ?)",
        ['$."team"."name"', '$."team"."name"', "ingest"],
    ),
    (
        {"metadata.score": {"$gte": 0.8}},
        "(jsonb_typeof((c.metadata -> $1::text)) = 'number' AND (c.metadata -> $1::text) >= $2::text::jsonb)",
        ["score", "0.8"],
        "(json_type(c.metadata, ?) IN ('integer', 'real') AND json_extract(c.metadata, ?) >= ?)",
        ['$."score"', '$."score"', 0.8],
    ),
    (
        {"metadata.tier": {"$lt": "m"}},
        "(jsonb_typeof((c.metadata -> $1::text)) = 'string' AND ((c.metadata -> $1::text) #>> '{}') COLLATE \"C\" < $2::text)",
        ["tier", "m"],
        "(json_type(c.metadata, ?) = 'text' AND json_extract(c.metadata, ?) < ?)",
        ['$."tier"', '$."tier"', "m"],
    ),
    (
        {"metadata.public": True},
        "(c.metadata -> $1::text) = $2::text::jsonb",
        ["public", "true"],
        "json_type(c.metadata, ?) = ?",
        ['$."public"', "true"],
    ),
    (
        {"metadata.tier": None},
        "COALESCE(jsonb_typeof((c.metadata -> $1::text)), 'null') = 'null'",
        ["tier"],
        "COALESCE(json_type(c.metadata, ?), 'null') = 'null'",
        ['$."tier"'],
    ),
    (
        {"metadata.tier": {"$exists": True}},
        "(c.metadata -> $1::text) IS NOT NULL",
        ["tier"],
        "json_type(c.metadata, ?) IS NOT NULL",
        ['$."tier"'],
    ),
    (
        {"metadata.tier": {"$ne": "gold"}},
        "NOT COALESCE((c.metadata -> $1::text) = $2::text::jsonb, FALSE)",
        ["tier", '"gold"'],
        "NOT COALESCE((json_type(c.metadata, ?) = 'text' AND json_extract(c.metadata, ?) = ?), 0)",
        ['$."tier"', '$."tier"', "gold"],
    ),
    (
        {"metadata.tier": {"$in": ["gold", 1, True, None]}},
        "(COALESCE(jsonb_typeof((c.metadata -> $1::text)), 'null') = 'null' OR "
        "(c.metadata -> $1::text) IN (SELECT jsonb_array_elements($2::text::jsonb)))",
        ["tier", '["gold",1,true]'],
        "(COALESCE(json_type(c.metadata, ?), 'null') = 'null' OR json_type(c.metadata, ?) IN (?) OR "
        "(json_type(c.metadata, ?) = 'text' AND json_extract(c.metadata, ?) IN (?)) OR "
        "(json_type(c.metadata, ?) IN ('integer', 'real') AND json_extract(c.metadata, ?) IN (?)))",
        ['$."tier"', '$."tier"', "true", '$."tier"', '$."tier"', "gold", '$."tier"', '$."tier"', 1],
    ),
    (
        {"metadata.tier": {"$in": []}},
        "FALSE",
        [],
        "0",
        [],
    ),
    (
        {"metadata.tags": ["a", {"b": 1}]},
        "(c.metadata -> $1::text) = $2::text::jsonb",
        ["tags", '["a",{"b":1}]'],
        "(json_type(c.metadata, ?) = 'array' AND (SELECT count(*) FROM json_each(c.metadata, ?)) = ? "
        "AND EXISTS (SELECT 1 FROM json_each(c.metadata, ?) AS j0 WHERE j0.key = ? AND (j0.type = 'text' AND j0.atom = ?)) "
        "AND EXISTS (SELECT 1 FROM json_each(c.metadata, ?) AS j0 WHERE j0.key = ? AND (j0.type = 'object' "
        "AND (SELECT count(*) FROM json_each(j0.value)) = ? AND EXISTS (SELECT 1 FROM json_each(j0.value) AS j1 "
        "WHERE j1.key = ? AND (j1.type IN ('integer', 'real') AND j1.atom = ?)))))",
        ['$."tags"', '$."tags"', 2, '$."tags"', 0, "a", '$."tags"', 1, 1, "b", 1],
    ),
    (
        {"metadata": {"a": 1}},
        "c.metadata = $1::text::jsonb",
        ['{"a":1}'],
        "(json_type(c.metadata, ?) = 'object' AND (SELECT count(*) FROM json_each(c.metadata, ?)) = ? "
        "AND EXISTS (SELECT 1 FROM json_each(c.metadata, ?) AS j0 WHERE j0.key = ? "
        "AND (j0.type IN ('integer', 'real') AND j0.atom = ?)))",
        ["$", "$", 1, "$", "a", 1],
    ),
    (
        {"metadata.x": "'); DROP TABLE chunks; --"},
        "(c.metadata -> $1::text) = $2::text::jsonb",
        ["x", '"\'); DROP TABLE chunks; --"'],
        "(json_type(c.metadata, ?) = 'text' AND json_extract(c.metadata, ?) = ?)",
        ['$."x"', '$."x"', "'); DROP TABLE chunks; --"],
    ),
]


@pytest.mark.parametrize(("obj", "pg", "pg_params", "lite", "lite_params"), METADATA_CASES)
def test_metadata_keys(
    obj: dict[str, Any], pg: str, pg_params: list[Any], lite: str, lite_params: list[Any]
) -> None:
    f = RecallFilter.parse(obj)
    compiled = compile_postgres(f)
    assert (compiled.sql, compiled.params) == (pg, pg_params)
    assert compiled.pushed_keys == f.leaf_keys() and compiled.residual is None
    compiled = compile_sqlite(f)
    assert (compiled.sql, compiled.params) == (lite, lite_params)
    assert compiled.pushed_keys == f.leaf_keys() and compiled.residual is None


def test_metadata_dates() -> None:
    f = RecallFilter.parse({"metadata.d": {"$gt": {"$date": "2026-01-01"}}})
    compiled = compile_postgres(f)
    assert compiled.sql == (
        "(jsonb_typeof((c.metadata -> $1::text)) = 'string' AND "
        "khora_filter_iso_us((c.metadata -> $1::text) #>> '{}') > $2::bigint)"
    )
    assert compiled.params == ["d", D_US]
    compiled = compile_sqlite(f)
    assert compiled.sql.startswith(
        "(json_type(c.metadata, ?) = 'text' AND (SELECT (CASE WHEN typeof(d.s) = 'text'"
    )
    assert compiled.sql.endswith("FROM (SELECT json_extract(c.metadata, ?) AS s) AS d) > ?)")
    assert compiled.params == ['$."d"', '$."d"', D_US]


def test_postgres_alias_and_param_start() -> None:
    f = RecallFilter.parse({"source_name": "x", "metadata.a": 1})
    compiled = compile_postgres(f, table_alias="k", param_start=4)
    assert compiled.sql == "(k.source_name = $4::text AND (k.metadata -> $5::text) = $6::text::jsonb)"
    assert compiled.params == ["x", "a", "1"]


def test_sqlite_alias_and_path() -> None:
    compiled = compile_sqlite(RecallFilter.parse({"metadata.a-b.c_1": {"$exists": False}}), table_alias="t")
    assert compiled.sql == "NOT COALESCE(json_type(t.metadata, ?) IS NOT NULL, 0)"
    assert compiled.params == ['$."a-b"."c_1"']
    assert sqlite_json_path(()) == "$"


def test_cypher_splits_metadata_into_the_residual() -> None:
    f = RecallFilter.parse(
        {
            "source_name": "linear",
            "metadata.tier": {"$in": ["gold"]},
            "$or": [{"title": "a"}, {"metadata.x": 1}],
            "$and": [{"occurred_at": {"$gte": D}}, {"metadata.y": {"$exists": True}}],
        }
    )
    compiled = compile_cypher(f, node_var="n", param_prefix="p")
    assert compiled.sql == "(n.source_name = $p_0 AND n.occurred_at >= $p_1)"
    assert compiled.params == {"p_0": "linear", "p_1": D}
    assert compiled.residual == RecallFilter.parse(
        {
            "$and": [
                {"metadata.tier": {"$in": ["gold"]}},
                {"$or": [{"title": "a"}, {"metadata.x": 1}]},
                {"metadata.y": {"$exists": True}},
            ]
        }
    )
    assert compiled.residual_keys == ["metadata.tier", "title", "metadata.x", "metadata.y"]
    assert compiled.pushed_keys == ["source_name", "occurred_at"]


def test_cypher_all_metadata() -> None:
    compiled = compile_cypher(RecallFilter.parse({"metadata.a": 1}))
    assert (compiled.sql, compiled.params, compiled.pushed_keys) == ("TRUE", {}, [])
    assert compiled.residual == RecallFilter.parse({"metadata.a": 1})


def test_split_pushable_keeps_the_meaning() -> None:
    f = RecallFilter.parse({"$and": [{"title": "a"}, {"$and": [{"metadata.a": 1}, {"source": "s"}]}]})
    pushed, rest = split_pushable(f.root, lambda leaf: not leaf.key.startswith("metadata"))
    assert [RecallFilter(n).to_dict() for n in pushed] == [{"title": {"$eq": "a"}}, {"source": {"$eq": "s"}}]
    assert [RecallFilter(n).to_dict() for n in rest] == [{"metadata.a": {"$eq": 1}}]


def test_postgres_support_ddl() -> None:
    assert POSTGRES_SUPPORT_DDL.strip().startswith("CREATE OR REPLACE FUNCTION khora_filter_iso_us(s text)")
    assert "IMMUTABLE" in POSTGRES_SUPPORT_DDL


def test_check_supported() -> None:
    f = RecallFilter.parse({"source_name": "x", "metadata.a": 1})
    check_supported(f, ["source_name"], backend="test")
    check_supported(None, [], backend="test")
    with pytest.raises(RecallFilterUnsupportedError) as info:
        check_supported(f, ["title"], backend="test")
    assert (info.value.key, info.value.backend) == ("source_name", "test")
    with pytest.raises(RecallFilterUnsupportedError) as info:
        check_supported(f, ["source_name"], backend="test", metadata=False)
    assert info.value.key == "metadata.a"


def test_compilers_accept_dicts_and_check_identifiers() -> None:
    assert compile_postgres({"title": "a"}).sql == "c.title = $1::text"
    assert compile_sqlite({"title": "a"}).sql == "c.title = ?"
    assert compile_cypher({"title": "a"}).sql == "c.title = $f_0"
    for bad in ("c; DROP TABLE x", "1c", "", "c.x"):
        with pytest.raises(InvalidInputError):
            compile_postgres({"title": "a"}, table_alias=bad)
        with pytest.raises(InvalidInputError):
            compile_sqlite({"title": "a"}, table_alias=bad)
        with pytest.raises(InvalidInputError):
            compile_cypher({"title": "a"}, param_prefix=bad)
