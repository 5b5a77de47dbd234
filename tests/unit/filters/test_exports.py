"""Public names of khora_core.filters."""

from __future__ import annotations

import khora_core.filters as filters


def test_all_names_exist() -> None:
    for name in filters.__all__:
        assert getattr(filters, name) is not None, name
    assert sorted(filters.__all__) == sorted(set(filters.__all__))


def test_required_names_are_exported() -> None:
    required = {
        "RecallFilter",
        "CompiledFilter",
        "compile_postgres",
        "compile_sqlite",
        "compile_cypher",
        "FilterPushdownReport",
        "build_report",
        "POSTGRES_SUPPORT_DDL",
        "RecallFilterValidationError",
        "RecallFilterUnsupportedError",
    }
    assert required <= set(filters.__all__)
