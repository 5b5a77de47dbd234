"""The adaptive chunk count and the rule for the caller's limit."""

from __future__ import annotations

import pytest

from khora_core.retrieval.limits import DEFAULT_LIMIT, adaptive_count, decide_limit
from khora_core.retrieval.router import QueryComplexity as C


@pytest.mark.parametrize(
    ("complexity", "confident", "label", "count"),
    [
        (C.SIMPLE, True, "very_focused", 3),
        (C.SIMPLE, False, "focused", 5),
        (C.MODERATE, False, "moderate", 10),
        (C.COMPLEX, False, "broad", 15),
    ],
)
def test_adaptive_table(complexity: C, confident: bool, label: str, count: int) -> None:
    assert adaptive_count(complexity, confident=confident) == (label, count)


def test_default_limit_gets_adaptive_count_capped_by_limit() -> None:
    assert decide_limit(DEFAULT_LIMIT, C.SIMPLE, adaptive_limit=True, confident=True).count == 3
    broad = decide_limit(DEFAULT_LIMIT, C.COMPLEX, adaptive_limit=True)
    assert broad.count == 10 and broad.label == "broad" and broad.adaptive


@pytest.mark.parametrize("limit", [1, 4, 25, 50])
def test_explicit_limit_is_honoured(limit: int) -> None:
    for complexity in C:
        decided = decide_limit(limit, complexity, adaptive_limit=True, confident=True)
        assert decided.count == limit and decided.label == "caller" and not decided.adaptive


def test_adaptive_off() -> None:
    assert decide_limit(DEFAULT_LIMIT, C.SIMPLE, adaptive_limit=False, confident=True).count == DEFAULT_LIMIT
