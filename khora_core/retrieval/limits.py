"""How many chunks a recall returns.

The spec adapts the count to the question, from ``very_focused`` (at most 3 chunks for a
simple lookup) to ``broad`` (15 for multi-hop questions), capped by ``limit``:

==============  =====  ==========================================================
label           count  when
==============  =====  ==========================================================
very_focused    3      SIMPLE and the vector channel is confident about its top hit
focused         5      SIMPLE otherwise
moderate        10     MODERATE
broad           15     COMPLEX
==============  =====  ==========================================================

**The rule for ``limit``**: the adaptive count applies only when
``QueryConfig.adaptive_limit`` is on *and* the caller left ``limit`` at its default (10,
whether omitted or passed). Any other ``limit`` is honoured exactly: a caller who asks for
``limit=50`` (an evaluation, a re-ranker downstream) gets up to 50 chunks, and a caller who
asks for ``limit=4`` gets up to 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from khora_core.retrieval.router import QueryComplexity

__all__ = ["DEFAULT_LIMIT", "LimitDecision", "adaptive_count", "decide_limit"]

#: ``recall(limit=...)``'s default; only this value lets the adaptive count apply.
DEFAULT_LIMIT = 10

_COUNTS = {"very_focused": 3, "focused": 5, "moderate": 10, "broad": 15}


@dataclass(frozen=True)
class LimitDecision:
    """The count applied, its label (``"caller"`` when the caller's limit was honoured)."""

    count: int
    label: str
    adaptive: bool

    def as_dict(self) -> dict[str, object]:
        return {"count": self.count, "label": self.label, "adaptive": self.adaptive}


def adaptive_count(complexity: QueryComplexity, *, confident: bool = False) -> tuple[str, int]:
    """The adaptive label and count for a complexity (see the table above)."""
    if complexity is QueryComplexity.COMPLEX:
        label = "broad"
    elif complexity is QueryComplexity.MODERATE:
        label = "moderate"
    else:
        label = "very_focused" if confident else "focused"
    return label, _COUNTS[label]


def decide_limit(
    limit: int, complexity: QueryComplexity, *, adaptive_limit: bool, confident: bool = False
) -> LimitDecision:
    """Apply the rule above.

    Args:
        limit: the caller's limit.
        complexity: the routed complexity.
        adaptive_limit: ``QueryConfig.adaptive_limit``.
        confident: the vector channel is confident about its top hit.
    """
    limit = max(1, int(limit))
    if not adaptive_limit or limit != DEFAULT_LIMIT:
        return LimitDecision(limit, "caller", False)
    label, count = adaptive_count(complexity, confident=confident)
    return LimitDecision(min(count, limit), label, True)
