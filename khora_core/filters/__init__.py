"""Recall filters: a closed, typed ``$``-operator grammar (see ``docs/filters.md``).

Pipeline: ``RecallFilter.parse`` (``ast.py`` tree, ``parse.py`` validation) -> per-backend
compilers (``sql_postgres.py``, ``sql_sqlite.py``, ``cypher.py``) -> ``evaluate.py`` (the
in-memory evaluator every channel runs as a defensive re-check, and the one written
definition of the type semantics) -> ``report.py`` (``FilterPushdownReport``).
"""

from __future__ import annotations

from khora_core.errors import RecallFilterUnsupportedError, RecallFilterValidationError
from khora_core.filters.ast import MAX_DEPTH, MAX_ITEMS, MAX_LEAVES, RecallFilter
from khora_core.filters.builders import and_, eq, exists, gt, gte, in_, lt, lte, ne, nin, nor, not_, or_
from khora_core.filters.compiled import CompiledFilter, check_supported
from khora_core.filters.cypher import compile_cypher
from khora_core.filters.report import ChannelPushdown, FilterPushdownReport, build_report
from khora_core.filters.sql_postgres import POSTGRES_SUPPORT_DDL, compile_postgres
from khora_core.filters.sql_sqlite import compile_sqlite

__all__ = [
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_LEAVES",
    "POSTGRES_SUPPORT_DDL",
    "ChannelPushdown",
    "CompiledFilter",
    "FilterPushdownReport",
    "RecallFilter",
    "RecallFilterUnsupportedError",
    "RecallFilterValidationError",
    "and_",
    "build_report",
    "check_supported",
    "compile_cypher",
    "compile_postgres",
    "compile_sqlite",
    "eq",
    "exists",
    "gt",
    "gte",
    "in_",
    "lt",
    "lte",
    "ne",
    "nin",
    "nor",
    "not_",
    "or_",
]
