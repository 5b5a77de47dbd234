"""What the compilers share: ``CompiledFilter``, negation handling and system-column plans.

Compilers push negations down to the leaves (``$not``, ``$nor``, ``$ne``, ``$nin`` and
``$exists: false`` become negated leaves), so ``AND``/``OR`` only ever combine leaf
predicates that are TRUE exactly when the leaf matches. SQL and Cypher treat NULL as
not-matching in a WHERE, and with negations at the leaves that reading is exact; each
negated leaf is written so it never yields NULL.

A system column (``c.source_name``, ``c.occurred_at``) is compiled from a plan:
``(predicate on a non-NULL value, whether NULL matches)``. Negating a plan negates both
halves, which keeps NULL handling right without ``COALESCE`` around indexed columns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from khora_core.errors import InvalidInputError, RecallFilterUnsupportedError
from khora_core.filters.ast import And, Leaf, Node, Nor, Not, Or, RecallFilter, iter_leaves, key_group

__all__ = ["CompiledFilter", "SysPlan", "chain", "check_supported", "prepare", "system_plan"]

_NEGATED_OPS = {"$ne": "$eq", "$nin": "$in"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}", re.ASCII)
_INVERSE_CMP = {"=": "<>", "<>": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
_CMP = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


@dataclass
class CompiledFilter:
    """A filter compiled for one backend.

    Attributes:
        sql: a boolean SQL or Cypher expression to AND into a WHERE (``TRUE``, or ``1`` for
            SQLite, when nothing was pushed down).
        params: its bound values: a list for SQL (``$n`` for PostgreSQL starting at
            ``param_start``, ``?`` for SQLite), a dict for Cypher (``$f_0``, ``$f_1``...).
        pushed_keys: keys the expression enforces completely.
        residual: the part the backend could not express; re-check it in memory with
            ``residual.matches(record)`` (``None`` when everything was pushed).
        residual_keys: ``residual.leaf_keys()`` (disjoint from ``pushed_keys``).
    """

    sql: str
    params: list[Any] | dict[str, Any]
    pushed_keys: list[str] = field(default_factory=list)
    residual: RecallFilter | None = None
    residual_keys: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SysPlan:
    """A system-column leaf: ``kind`` is ``cmp`` (``op``, ``value``), ``in`` (``values``;
    ``negated`` for NOT IN) or ``const`` (``value`` is a bool); ``null_matches`` says
    whether a NULL column matches."""

    kind: str
    null_matches: bool
    op: str = "="
    value: Any = None
    values: tuple[Any, ...] = ()
    negated: bool = False

    def negate(self) -> SysPlan:
        """The plan matching exactly the rows this one does not."""
        if self.kind == "cmp":
            return SysPlan("cmp", not self.null_matches, op=_INVERSE_CMP[self.op], value=self.value)
        if self.kind == "in":
            return SysPlan("in", not self.null_matches, values=self.values, negated=not self.negated)
        return SysPlan("const", not self.null_matches, value=not self.value)


def prepare(f: RecallFilter | Mapping[str, Any], *identifiers: str) -> RecallFilter:
    """Parse ``f`` if it is a dict and check the caller's alias/prefix names.

    Raises:
        RecallFilterValidationError: ``f`` is a malformed dict.
        InvalidInputError: an alias or prefix is not a plain identifier (they become query text).
    """
    for name in identifiers:
        if not _IDENTIFIER.fullmatch(name):
            raise InvalidInputError(
                f"{name!r} is not a valid alias or parameter prefix; use [A-Za-z_][A-Za-z0-9_]*."
            )
    return RecallFilter.parse(f)


def positive_op(leaf: Leaf, negated: bool) -> tuple[str, Any, bool]:
    """Rewrite ``$ne``/``$nin``/``$exists: false`` as a negated positive operator."""
    op, value = leaf.op, leaf.value
    if op in _NEGATED_OPS:
        return _NEGATED_OPS[op], value, not negated
    if op == "$exists" and value is False:
        return "$exists", True, not negated
    return op, value, negated


def system_plan(op: str, value: Any) -> SysPlan:
    """The plan of a positive leaf (``$eq $in $exists`` or a range) on a system column."""
    if op == "$exists":
        return SysPlan("const", False, value=True)
    if op == "$in":
        members = tuple(v for v in value if v is not None)
        null_ok = any(v is None for v in value)
        if not members:
            return SysPlan("const", null_ok, value=False)
        return SysPlan("in", null_ok, values=members)
    if value is None:  # $eq null: only a NULL column matches
        return SysPlan("const", True, value=False)
    if isinstance(value, list):  # exact-array equality can never hold on a scalar column
        return SysPlan("const", False, value=False)
    return SysPlan("cmp", False, op=_CMP[op], value=value)


#: Longest flat AND/OR run; longer ones nest, so that SQLite's expression depth limit
#: (1000, and a flat ``a OR b OR ...`` is as deep as it is long) holds for 1,000 leaves.
CHAIN_WIDTH = 16


def chain(parts: list[str], sep: str) -> str:
    """``(p1 SEP p2 SEP ...)``, grouped into nested runs of at most ``CHAIN_WIDTH``."""
    if len(parts) <= CHAIN_WIDTH:
        return "(" + sep.join(parts) + ")"
    size = -(-len(parts) // CHAIN_WIDTH)
    return chain([chain(parts[i : i + size], sep) for i in range(0, len(parts), size)], sep)


class BaseCompiler:
    """Walks the tree with negations pushed to the leaves. Subclasses render leaves."""

    TRUE = "TRUE"
    FALSE = "FALSE"
    params: list[Any]

    def node(self, node: Node, negated: bool = False) -> str:
        if isinstance(node, Not):
            return self.node(node.child, not negated)
        if isinstance(node, Nor):
            return self.node(Or(node.children), not negated)
        if isinstance(node, (And, Or)):
            conjunction = isinstance(node, And) != negated
            mark = len(self.params)
            return self.join([self.node(c, negated) for c in node.children], conjunction, mark)
        op, value, negated = positive_op(node, negated)
        if key_group(node.key) in ("date", "string"):
            plan = system_plan(op, value)
            return self.system(node.key, plan.negate() if negated else plan)
        mark = len(self.params)
        positive = self.metadata(node, op, value)
        if positive in (self.TRUE, self.FALSE):
            del self.params[mark:]  # e.g. the path of an empty $in
            if negated:
                return self.FALSE if positive == self.TRUE else self.TRUE
            return positive
        return self.negate(positive) if negated else positive

    def join(self, parts: list[str], conjunction: bool, mark: int | None = None) -> str:
        """AND/OR with constant folding (an empty AND is TRUE, an empty OR is FALSE).

        ``mark`` is ``len(self.params)`` before the parts were compiled: when a constant
        absorbs the parts, their parameters are dropped too. (A constant part never has
        parameters of its own.)
        """
        absorbing, neutral = (self.FALSE, self.TRUE) if conjunction else (self.TRUE, self.FALSE)
        if absorbing in parts:
            if mark is not None:
                del self.params[mark:]
            return absorbing
        parts = [p for p in parts if p != neutral]
        if not parts:
            return neutral
        if len(parts) == 1:
            return parts[0]
        return chain(parts, " AND " if conjunction else " OR ")

    def system(self, key: str, plan: SysPlan) -> str:
        """Render a plan on a system column via ``column``, ``cmp`` and ``member``."""
        col = self.column(key)
        if plan.kind == "const":
            if plan.value:
                return self.TRUE if plan.null_matches else f"{col} IS NOT NULL"
            return f"{col} IS NULL" if plan.null_matches else self.FALSE
        pred = (
            self.cmp(key, col, plan.op, plan.value)
            if plan.kind == "cmp"
            else self.member(key, col, list(plan.values), plan.negated)
        )
        return f"({col} IS NULL OR {pred})" if plan.null_matches else pred

    def column(self, key: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def cmp(self, key: str, col: str, op: str, value: Any) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def member(self, key: str, col: str, values: list[Any], negated: bool) -> str:  # pragma: no cover
        raise NotImplementedError

    def metadata(self, leaf: Leaf, op: str, value: Any) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def negate(self, positive: str) -> str:
        """NOT of a predicate that may be NULL (NULL counts as not matching)."""
        return f"NOT COALESCE({positive}, {self.FALSE})"


def split_pushable(node: Node, pushable: Any) -> tuple[list[Node], list[Node]]:
    """Split a conjunction into (pushable conjuncts, the rest), so ``node == AND(both)``."""
    if isinstance(node, And):
        pushed: list[Node] = []
        rest: list[Node] = []
        for child in node.children:
            p, r = split_pushable(child, pushable)
            pushed += p
            rest += r
        return pushed, rest
    if all(pushable(leaf) for leaf in iter_leaves(node)):
        return [node], []
    return [], [node]


def check_supported(
    f: RecallFilter | None, columns: Iterable[str], *, backend: str, metadata: bool = True
) -> None:
    """Fail loudly when a backend lacks a column for a key the filter uses.

    Args:
        f: the filter (``None`` passes).
        columns: system keys the backend stores as real columns/properties.
        backend: backend name for the message, e.g. ``"sqlite_lance"``.
        metadata: whether the backend can evaluate metadata predicates (natively or by a
            re-check).

    Raises:
        RecallFilterUnsupportedError: naming the first key the backend cannot honour.
    """
    if f is None:
        return
    available = set(columns)
    for key in f.leaf_keys():
        is_metadata = key_group(key) in ("blob", "metadata")
        if (is_metadata and not metadata) or (not is_metadata and key not in available):
            raise RecallFilterUnsupportedError(
                f"The {backend} backend cannot filter on {key!r}: it has no column for it. "
                "Remove that key from the filter or use a storage stack that stores it.",
                key=key,
                backend=backend,
            )
