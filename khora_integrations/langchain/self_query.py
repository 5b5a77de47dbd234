"""``KhoraTranslator``: LangChain's self-query structured queries as PGVector-dialect filters.

A self-querying retriever (``langchain_core.structured_query``) asks an LLM for a query and
a filter tree; this visitor turns the tree into the dict that Khora's vector store and
retriever read with :func:`~khora_integrations.langchain.filters.pgvector_to_recall_filter`.
Each comparison is validated as it is built, so a bad one names its attribute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.structured_query import (
    Comparator,
    Comparison,
    Operation,
    Operator,
    StructuredQuery,
    Visitor,
)

from khora_integrations.langchain.filters import pgvector_to_recall_filter

__all__ = ["KhoraTranslator"]


def _structured_value(value: Any) -> Any:
    # langchain's query constructor wraps dates as {"date": "YYYY-MM-DD", "type": "date"}.
    if isinstance(value, Mapping) and value.get("type") in ("date", "datetime"):
        return str(value.get("date") or value.get("datetime"))
    return value


class KhoraTranslator(Visitor):
    """Turn a ``langchain_core.structured_query`` tree into a PGVector-dialect filter dict.

    Khora's vector store and retriever read the result as ``pgvector_to_recall_filter``
    does (attributes are the user's metadata keys; dates are compared as ISO strings).
    ``contain`` and ``like`` are not allowed.
    """

    allowed_operators = (Operator.AND, Operator.OR, Operator.NOT)
    allowed_comparators = (
        Comparator.EQ,
        Comparator.NE,
        Comparator.GT,
        Comparator.GTE,
        Comparator.LT,
        Comparator.LTE,
        Comparator.IN,
        Comparator.NIN,
    )

    def visit_operation(self, operation: Operation) -> dict[str, Any]:
        self._validate_func(operation.operator)
        args = [arg.accept(self) for arg in operation.arguments]
        if operation.operator == Operator.NOT:
            return {"$not": args[0] if len(args) == 1 else args}
        return {f"${operation.operator.value}": args}

    def visit_comparison(self, comparison: Comparison) -> dict[str, Any]:
        self._validate_func(comparison.comparator)
        value = comparison.value
        if isinstance(value, (list, tuple)):
            value = [_structured_value(v) for v in value]
        else:
            value = _structured_value(value)
        node = {comparison.attribute: {f"${comparison.comparator.value}": value}}
        pgvector_to_recall_filter(node)  # validate now, where the attribute is known
        return node

    def visit_structured_query(self, structured_query: StructuredQuery) -> tuple[str, dict[str, Any]]:
        if structured_query.filter is None:
            return structured_query.query, {}
        return structured_query.query, {"filter": structured_query.filter.accept(self)}
