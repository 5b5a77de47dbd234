"""Compile the system-key part of a recall filter to a Cypher ``WHERE`` expression.

On Neo4j, ``(:Chunk)`` nodes carry the system keys as properties (dates as ``DateTime``)
and metadata only as opaque ``metadata_json``, so metadata predicates cannot run in
Cypher. The filter's top-level conjunction is split: conjuncts built only from system keys
are compiled; the rest (any conjunct touching metadata, including an ``$or`` that mixes
both) is returned as ``residual`` for an in-memory re-check. ``pushed AND residual`` is
exactly the original filter.

Dates bind as aware UTC ``datetime`` values; strings bind as strings; parameters are named
``$<prefix>_0``, ``$<prefix>_1``... in the order they appear. Date properties must be
stored in UTC too (``astimezone(timezone.utc)``, as ``storage/neo4j`` does): Neo4j treats
two ``DateTime`` values of the same instant in different zones as unequal (and orders them
by zone), so a non-UTC stored date would miss ``$eq``/``$in`` matches. Comparing the raw
property keeps the chunk date indexes usable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from khora_core.filters.ast import And, DateValue, Leaf, Node, RecallFilter, distinct_keys, key_group
from khora_core.filters.compiled import BaseCompiler, CompiledFilter, prepare, split_pushable

__all__ = ["compile_cypher"]


class _CypherCompiler(BaseCompiler):
    def __init__(self, node_var: str, prefix: str) -> None:
        self.var = node_var
        self.prefix = prefix
        self.params: list[Any] = []

    def param(self, value: Any) -> str:
        self.params.append(value.to_datetime() if isinstance(value, DateValue) else value)
        return f"${self.prefix}_{len(self.params) - 1}"

    def column(self, key: str) -> str:
        return f"{self.var}.{key}"

    def cmp(self, key: str, col: str, op: str, value: Any) -> str:
        return f"{col} {op} {self.param(value)}"

    def member(self, key: str, col: str, values: list[Any], negated: bool) -> str:
        placeholder = self.param([v.to_datetime() if isinstance(v, DateValue) else v for v in values])
        return f"NOT ({col} IN {placeholder})" if negated else f"{col} IN {placeholder}"

    def metadata(self, leaf: Leaf, op: str, value: Any) -> str:  # pragma: no cover - split first
        raise AssertionError("metadata predicates are never compiled to Cypher")


def _is_system(leaf: Leaf) -> bool:
    return key_group(leaf.key) in ("date", "string")


def compile_cypher(
    f: RecallFilter | Mapping[str, Any], *, node_var: str = "c", param_prefix: str = "f"
) -> CompiledFilter:
    """Compile the system-key conjuncts of ``f`` for ``(:Chunk)`` nodes bound to ``node_var``.

    Args:
        f: the filter (a dict is parsed).
        node_var: the Cypher variable of the chunk node.
        param_prefix: prefix of the parameter names (``f`` gives ``$f_0``, ``$f_1``...).

    Returns:
        ``CompiledFilter`` with a ``params`` dict; ``residual`` holds the metadata part to
        re-check with ``residual.matches(chunk.filter_record())``.

    Raises:
        RecallFilterValidationError: ``f`` is a malformed dict.
        InvalidInputError: an alias or prefix is not a plain identifier.
    """
    f = prepare(f, node_var, param_prefix)
    pushed, rest = split_pushable(f.root, _is_system)
    compiler = _CypherCompiler(node_var, param_prefix)
    sql = compiler.node(And(tuple(pushed))) if pushed else compiler.TRUE
    residual_root: Node | None = None
    if rest:
        residual_root = rest[0] if len(rest) == 1 else And(tuple(rest))
    residual = RecallFilter(residual_root) if residual_root is not None else None
    residual_keys = residual.leaf_keys() if residual is not None else []
    pushed_keys = [k for k in distinct_keys(pushed) if k not in residual_keys]
    return CompiledFilter(
        sql=sql,
        params={f"{param_prefix}_{i}": v for i, v in enumerate(compiler.params)},
        pushed_keys=pushed_keys,
        residual=residual,
        residual_keys=residual_keys,
    )
