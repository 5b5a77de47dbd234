"""Compile a recall filter to a SQLite boolean expression (``?`` parameters).

The embedded store keeps dates as INTEGER microseconds since the epoch (UTC), so date
keys compare integers. Metadata is JSON text read with the JSON1 functions:
``json_type`` gives the stored type (``'null' 'true' 'false' 'integer' 'real' 'text'
'array' 'object'``, SQL NULL when missing), ``json_extract`` the scalar. The JSON path is
built only from validated segments (``$."team"."name"``) and still bound as a parameter.
Arrays and objects are compared structurally (type, element count, then each member
through ``json_each``), which gives JSON equality: ordered arrays, objects by key set,
``1 = 1.0``, booleans apart from numbers. Metadata ISO dates are parsed in SQL by
``_iso_us`` with the grammar of ``dates.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from khora_core.filters.ast import DateValue, Leaf, RecallFilter
from khora_core.filters.compiled import BaseCompiler, CompiledFilter, chain, prepare
from khora_core.filters.tree import SIMPLE_SEGMENT

__all__ = ["compile_sqlite", "sqlite_json_path"]

_CMP_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_NUMBER = "IN ('integer', 'real')"


def sqlite_json_path(segments: tuple[str, ...]) -> str | None:
    """``("team", "name")`` -> ``'$."team"."name"'``; ``None`` when a segment is not simple.

    SQLite path labels have no escapes, so only ``[A-Za-z0-9_-]+`` segments are written
    into a path; other keys are looked up through ``json_each`` (see ``_Node``).
    """
    if not all(SIMPLE_SEGMENT.fullmatch(s) for s in segments):
        return None
    return "$" + "".join(f'."{s}"' for s in segments)


def _iso_us(s: str) -> str:
    """SQL for epoch microseconds of the text ``s`` (a bare column), NULL outside the grammar.

    ``s`` appears many times, so the caller binds it once in a one-row subquery.
    """
    zulu = f"{s} GLOB '*Z'"
    zone_len = f"(CASE WHEN {zulu} THEN 1 ELSE 6 END)"
    leap = (
        f"(CAST(substr({s}, 1, 4) AS INTEGER) % 4 = 0 AND (CAST(substr({s}, 1, 4) AS INTEGER) % 100 <> 0 "
        f"OR CAST(substr({s}, 1, 4) AS INTEGER) % 400 = 0))"
    )
    last_day = (
        f"(CASE substr({s}, 6, 2) WHEN '02' THEN (CASE WHEN {leap} THEN '29' ELSE '28' END) "
        "WHEN '04' THEN '30' WHEN '06' THEN '30' WHEN '09' THEN '30' WHEN '11' THEN '30' ELSE '31' END)"
    )
    frac = f"substr({s}, 20, length({s}) - 19 - {zone_len})"
    valid_time = (
        f"(substr({s}, 11, 9) GLOB 'T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]' AND substr({s}, 12, 2) <= '23' "
        f"AND length({s}) >= 19 + {zone_len} "
        f"AND ({zulu} OR (substr({s}, -6) GLOB '[+-][0-2][0-9]:[0-5][0-9]' AND substr({s}, -5, 2) <= '23')) "
        f"AND ({frac} = '' OR (length({frac}) BETWEEN 2 AND 7 AND {frac} GLOB '.[0-9]*' "
        f"AND substr({frac}, 2) NOT GLOB '*[^0-9]*')))"
    )
    valid = (
        f"typeof({s}) = 'text' AND substr({s}, 1, 10) GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]' "
        f"AND substr({s}, 1, 4) <> '0000' AND substr({s}, 6, 2) BETWEEN '01' AND '12' "
        f"AND substr({s}, 9, 2) BETWEEN '01' AND {last_day} "
        f"AND (length({s}) = 10 OR {valid_time})"
    )
    seconds = (
        f"(CASE WHEN length({s}) = 10 THEN 0 ELSE CAST(substr({s}, 12, 2) AS INTEGER) * 3600 "
        f"+ CAST(substr({s}, 15, 2) AS INTEGER) * 60 + CAST(substr({s}, 18, 2) AS INTEGER) "
        f"- (CASE WHEN {zulu} THEN 0 ELSE (CASE substr({s}, -6, 1) WHEN '-' THEN -1 ELSE 1 END) "
        f"* (CAST(substr({s}, -5, 2) AS INTEGER) * 3600 + CAST(substr({s}, -2, 2) AS INTEGER) * 60) END) END)"
    )
    micros = (
        f"(CASE WHEN length({s}) > 10 AND substr({s}, 20, 1) = '.' "
        f"THEN CAST(substr(substr({frac}, 2) || '00000', 1, 6) AS INTEGER) ELSE 0 END)"
    )
    return (
        f"(CASE WHEN {valid} THEN (CAST(strftime('%s', substr({s}, 1, 10)) AS INTEGER) + {seconds}) "
        f"* 1000000 + {micros} END)"
    )


class _Node:
    """A JSON node: a metadata path (bound), a key lookup, or a ``json_each`` row alias.

    A path of simple segments uses SQLite's JSON path functions. Any other path is walked
    with ``json_each``, one key per level compared as a bound parameter, so a key holding
    dots, spaces or quotes is found exactly.
    """

    def __init__(
        self,
        compiler: _SqliteCompiler,
        path: str | None = None,
        alias: str | None = None,
        keys: tuple[str, ...] = (),
    ) -> None:
        self.c = compiler
        self.path = path
        self.alias = alias
        self.keys = keys

    def _fn(self, name: str) -> str:
        return f"{name}({self.c.alias}.metadata, {self.c.param(self.path)})"

    def _parent(self) -> str:
        """JSON text of the object that holds the last key (SQL NULL when there is none)."""
        doc = f"{self.c.alias}.metadata"
        for key in self.keys[:-1]:
            doc = (
                f"(SELECT k.value FROM json_each({doc}) AS k "
                f"WHERE k.key = {self.c.param(key)} AND k.type = 'object')"
            )
        return doc

    def _lookup(self, column: str) -> str:
        parent = self._parent()
        return (
            f"(SELECT k.{column} FROM json_each({parent}) AS k WHERE k.key = {self.c.param(self.keys[-1])})"
        )

    def type(self) -> str:
        if self.alias is not None:
            return f"{self.alias}.type"
        return self._fn("json_type") if self.path is not None else self._lookup("type")

    def atom(self) -> str:
        if self.alias is not None:
            return f"{self.alias}.atom"
        return self._fn("json_extract") if self.path is not None else self._lookup("atom")

    def each(self) -> str:
        if self.alias is not None:
            return f"json_each({self.alias}.value)"
        return self._fn("json_each") if self.path is not None else f"json_each({self._lookup('value')})"


class _SqliteCompiler(BaseCompiler):
    TRUE = "1"
    FALSE = "0"

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.params: list[Any] = []

    def param(self, value: Any) -> str:
        self.params.append(value)
        return "?"

    # -- system columns ----------------------------------------------------------------
    def column(self, key: str) -> str:
        return f"{self.alias}.{key}"

    def cmp(self, key: str, col: str, op: str, value: Any) -> str:
        return f"{col} {op} {self.param(value.us if isinstance(value, DateValue) else value)}"

    def member(self, key: str, col: str, values: list[Any], negated: bool) -> str:
        marks = self.marks([v.us if isinstance(v, DateValue) else v for v in values])
        return f"{col} {'NOT IN' if negated else 'IN'} ({marks})"

    # -- metadata ----------------------------------------------------------------------
    def metadata(self, leaf: Leaf, op: str, value: Any) -> str:
        path = sqlite_json_path(leaf.path)
        node = _Node(self, path=path) if path is not None else _Node(self, keys=leaf.path)
        if op == "$exists":
            return f"{node.type()} IS NOT NULL"
        if op == "$eq":
            return self.equal(node, value, depth=0)
        if op == "$in":
            return self.members(node, value)
        sql_op = _CMP_SQL[op]
        if isinstance(value, DateValue):
            return f"({node.type()} = 'text' AND {self.date_of(node)} {sql_op} {self.param(value.us)})"
        kind = "= 'text'" if isinstance(value, str) else _NUMBER
        return f"({node.type()} {kind} AND {node.atom()} {sql_op} {self.param(value)})"

    def members(self, node: _Node, values: list[Any]) -> str:
        """``$in`` on metadata: one typed ``IN`` list per JSON type present among the members."""
        parts = []
        if any(v is None for v in values):
            parts.append(self.equal(node, None, depth=0))
        bools = [v for v in values if isinstance(v, bool)]
        if bools:
            parts.append(f"{node.type()} IN ({self.marks(['true' if b else 'false' for b in bools])})")
        texts = [v for v in values if isinstance(v, str)]
        if texts:
            parts.append(f"({node.type()} = 'text' AND {node.atom()} IN ({self.marks(texts)}))")
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if numbers:
            parts.append(f"({node.type()} {_NUMBER} AND {node.atom()} IN ({self.marks(numbers)}))")
        dates = [v.us for v in values if isinstance(v, DateValue)]
        if dates:
            parts.append(f"({node.type()} = 'text' AND {self.date_of(node)} IN ({self.marks(dates)}))")
        return self.join(parts, conjunction=False)

    def marks(self, values: list[Any]) -> str:
        return ", ".join(self.param(v) for v in values)

    def date_of(self, node: _Node) -> str:
        return f"(SELECT {_iso_us('d.s')} FROM (SELECT {node.atom()} AS s) AS d)"

    def equal(self, node: _Node, value: Any, depth: int) -> str:
        """Typed JSON equality of ``node`` with a literal (see ``evaluate.py``)."""
        if value is None:
            return f"COALESCE({node.type()}, 'null') = 'null'"
        if isinstance(value, bool):
            return f"{node.type()} = {self.param('true' if value else 'false')}"
        if isinstance(value, DateValue):
            return f"({node.type()} = 'text' AND {self.date_of(node)} = {self.param(value.us)})"
        if isinstance(value, str):
            return f"({node.type()} = 'text' AND {node.atom()} = {self.param(value)})"
        if isinstance(value, (int, float)):
            return f"({node.type()} {_NUMBER} AND {node.atom()} = {self.param(value)})"
        is_list = isinstance(value, list)
        parts = [
            f"{node.type()} = '{'array' if is_list else 'object'}'",
            f"(SELECT count(*) FROM {node.each()}) = {self.param(len(value))}",
        ]
        alias = f"j{depth}"
        for key, member in enumerate(value) if is_list else value.items():
            source = node.each()
            key_mark = self.param(key)
            inner = self.equal(_Node(self, alias=alias), member, depth + 1)
            parts.append(
                f"EXISTS (SELECT 1 FROM {source} AS {alias} WHERE {alias}.key = {key_mark} AND {inner})"
            )
        return chain(parts, " AND ")


def compile_sqlite(f: RecallFilter | Mapping[str, Any], *, table_alias: str = "c") -> CompiledFilter:
    """Compile ``f`` for the embedded ``chunks`` table; everything is pushed down.

    Args:
        f: the filter (a dict is parsed).
        table_alias: alias of ``chunks`` in the caller's query.

    Returns:
        ``CompiledFilter`` whose ``params`` bind the ``?`` placeholders in order.

    Raises:
        RecallFilterValidationError: ``f`` is a malformed dict.
        InvalidInputError: an alias or prefix is not a plain identifier.
    """
    f = prepare(f, table_alias)
    compiler = _SqliteCompiler(table_alias)
    sql = compiler.node(f.root)
    return CompiledFilter(sql=sql, params=compiler.params, pushed_keys=f.leaf_keys())
