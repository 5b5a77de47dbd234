"""Compile a recall filter to a PostgreSQL boolean expression (asyncpg ``$n`` parameters).

System keys compare their columns directly (``c.source_name = $1``,
``c.occurred_at >= $2``) so B-tree indexes apply. Metadata paths walk the ``jsonb`` column
with ``->`` and one bound text parameter per segment (``->`` on an array yields NULL, so a
numeric segment never indexes into an array, matching the evaluator). Equality compares
``jsonb`` with ``jsonb`` (typed: ``'1'`` never equals ``'"1"'``, ``true`` never equals ``1``;
arrays ordered, objects by key set); ranges guard with ``jsonb_typeof`` and compare numbers
as ``jsonb``, strings as text ``COLLATE "C"`` (code-point order); metadata dates go through
``khora_filter_iso_us`` from ``POSTGRES_SUPPORT_DDL``.

Every value is a bound parameter; JSON operands are bound as text and cast
(``$3::text::jsonb``) so the caller's jsonb codec settings do not matter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from khora_core.filters.ast import DateValue, Leaf, RecallFilter
from khora_core.filters.compiled import BaseCompiler, CompiledFilter, prepare

__all__ = ["ISO_FUNCTION", "POSTGRES_SUPPORT_DDL", "compile_postgres"]

#: Name of the SQL function that parses a metadata ISO-8601 string to epoch microseconds.
ISO_FUNCTION = "khora_filter_iso_us"

#: Run once per database (in a migration) before compiled filters use ``$date`` on metadata.
#: It implements the grammar of ``khora_core/filters/dates.py`` and returns NULL for any
#: text outside it; it never raises, so it is safe inside any WHERE.
POSTGRES_SUPPORT_DDL = r"""
CREATE OR REPLACE FUNCTION khora_filter_iso_us(s text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $khora$
DECLARE
    m text[];
    y int; mo int; d int;
    hh int := 0; mi int := 0; ss int := 0;
    us bigint := 0; off int := 0;
BEGIN
    m := regexp_match(s,
        '^([0-9]{4})-([0-9]{2})-([0-9]{2})(T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.([0-9]{1,6}))?(Z|([+-])([0-9]{2}):([0-9]{2})))?$');
    IF m IS NULL THEN
        RETURN NULL;
    END IF;
    y := m[1]::int; mo := m[2]::int; d := m[3]::int;
    IF y < 1 OR mo < 1 OR mo > 12 OR d < 1 THEN
        RETURN NULL;
    END IF;
    IF d > extract(day FROM make_date(y, mo, 1) + interval '1 month' - interval '1 day') THEN
        RETURN NULL;
    END IF;
    IF m[4] IS NOT NULL THEN
        hh := m[5]::int; mi := m[6]::int; ss := m[7]::int;
        IF hh > 23 OR mi > 59 OR ss > 59 THEN
            RETURN NULL;
        END IF;
        IF m[9] IS NOT NULL THEN
            us := rpad(m[9], 6, '0')::bigint;
        END IF;
        IF m[10] <> 'Z' THEN
            IF m[12]::int > 23 OR m[13]::int > 59 THEN
                RETURN NULL;
            END IF;
            off := m[12]::int * 3600 + m[13]::int * 60;
            IF m[11] = '-' THEN
                off := -off;
            END IF;
        END IF;
    END IF;
    RETURN (make_date(y, mo, d) - DATE '1970-01-01')::bigint * 86400000000
        + (hh * 3600 + mi * 60 + ss - off)::bigint * 1000000 + us;
END
$khora$;
"""

_COLUMN_TYPES = {"date": "timestamptz", "string": "text"}
_CMP_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class _PostgresCompiler(BaseCompiler):
    def __init__(self, alias: str, start: int) -> None:
        self.alias = alias
        self.start = start
        self.params: list[Any] = []

    def param(self, value: Any, cast: str) -> str:
        self.params.append(value)
        return f"${self.start + len(self.params) - 1}::{cast}"

    @staticmethod
    def bind(value: Any) -> Any:
        return value.to_datetime() if isinstance(value, DateValue) else value

    # -- system columns ----------------------------------------------------------------
    def column(self, key: str) -> str:
        return f"{self.alias}.{key}"

    def cmp(self, key: str, col: str, op: str, value: Any) -> str:
        cast = "timestamptz" if isinstance(value, DateValue) else "text"
        return f"{col} {op} {self.param(self.bind(value), cast)}"

    def member(self, key: str, col: str, values: list[Any], negated: bool) -> str:
        cast = "timestamptz[]" if isinstance(values[0], DateValue) else "text[]"
        placeholder = self.param([self.bind(v) for v in values], cast)
        return f"{col} <> ALL({placeholder})" if negated else f"{col} = ANY({placeholder})"

    # -- metadata ----------------------------------------------------------------------
    def metadata(self, leaf: Leaf, op: str, value: Any) -> str:
        v = f"{self.alias}.metadata"
        if leaf.path:
            v = "(" + " -> ".join([v] + [self.param(s, "text") for s in leaf.path]) + ")"
        if op == "$exists":
            return f"{v} IS NOT NULL"
        if op == "$eq":
            return self.equal(v, value)
        if op == "$in":
            return self.member_json(v, value)
        sql_op = _CMP_SQL[op]
        if isinstance(value, DateValue):
            return f"(jsonb_typeof({v}) = 'string' AND {ISO_FUNCTION}({v} #>> '{{}}') {sql_op} {self.param(value.us, 'bigint')})"
        if isinstance(value, str):
            return f"(jsonb_typeof({v}) = 'string' AND ({v} #>> '{{}}') COLLATE \"C\" {sql_op} {self.param(value, 'text')})"
        return (
            f"(jsonb_typeof({v}) = 'number' AND {v} {sql_op} {self.param(_json_text(value), 'text')}::jsonb)"
        )

    def equal(self, v: str, value: Any) -> str:
        if value is None:
            return f"COALESCE(jsonb_typeof({v}), 'null') = 'null'"
        if isinstance(value, DateValue):
            return f"(jsonb_typeof({v}) = 'string' AND {ISO_FUNCTION}({v} #>> '{{}}') = {self.param(value.us, 'bigint')})"
        return f"{v} = {self.param(_json_text(value), 'text')}::jsonb"

    def member_json(self, v: str, values: list[Any]) -> str:
        parts = []
        if any(m is None for m in values):
            parts.append(self.equal(v, None))
        dates = [m.us for m in values if isinstance(m, DateValue)]
        if dates:
            parts.append(
                f"(jsonb_typeof({v}) = 'string' AND {ISO_FUNCTION}({v} #>> '{{}}') = ANY({self.param(dates, 'bigint[]')}))"
            )
        plain = [m for m in values if m is not None and not isinstance(m, DateValue)]
        if plain:
            parts.append(
                f"{v} IN (SELECT jsonb_array_elements({self.param(_json_text(plain), 'text')}::jsonb))"
            )
        return self.join(parts, conjunction=False)


def compile_postgres(
    f: RecallFilter | Mapping[str, Any], *, table_alias: str = "c", param_start: int = 1
) -> CompiledFilter:
    """Compile ``f`` for the ``khora_chunks`` table; everything is pushed down.

    Args:
        f: the filter (a dict is parsed).
        table_alias: alias of ``khora_chunks`` in the caller's query.
        param_start: number of the first ``$n`` placeholder (the caller's own parameters
            come first).

    Returns:
        ``CompiledFilter`` with positional ``params`` for ``$param_start...``. ``$date``
        comparisons on metadata need ``POSTGRES_SUPPORT_DDL`` installed.

    Raises:
        RecallFilterValidationError: ``f`` is a malformed dict.
        InvalidInputError: an alias or prefix is not a plain identifier.
    """
    f = prepare(f, table_alias)
    compiler = _PostgresCompiler(table_alias, param_start)
    sql = compiler.node(f.root)
    return CompiledFilter(sql=sql, params=compiler.params, pushed_keys=f.leaf_keys())
