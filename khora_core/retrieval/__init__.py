"""The read path: understand -> route -> link -> channels -> fuse -> rank -> assemble.

One module per stage: ``understand`` (intent, mentions, dates), ``router`` (complexity,
depth, weights), ``dates`` (temporal parsing), ``linking`` (mentions to entities),
``channels`` (vector / graph / keyword), ``fusion`` (RRF and the evidence rules),
``recency``, ``mmr``, ``rerank``, ``hyde``, ``limits``, ``abstention``, ``ranking`` (the
stages between channels and limit), ``assemble`` (entities, relationships, documents),
``pipeline`` (``RecallPipeline``), ``context`` (``context_text``) and ``agentic``
(``AgenticSearchAgent``). Names below load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from khora_core.retrieval.agentic import AgenticSearchAgent
    from khora_core.retrieval.context import context_text
    from khora_core.retrieval.dates import TemporalReference, parse_temporal
    from khora_core.retrieval.fusion import weighted_rrf, weighted_rrf_normalized
    from khora_core.retrieval.pipeline import RecallPipeline
    from khora_core.retrieval.router import QueryComplexity, RoutingDecision

__all__ = [
    "AgenticSearchAgent",
    "QueryComplexity",
    "RecallPipeline",
    "RoutingDecision",
    "TemporalReference",
    "context_text",
    "parse_temporal",
    "weighted_rrf",
    "weighted_rrf_normalized",
]

_LAZY = {
    "AgenticSearchAgent": "khora_core.retrieval.agentic",
    "QueryComplexity": "khora_core.retrieval.router",
    "RecallPipeline": "khora_core.retrieval.pipeline",
    "RoutingDecision": "khora_core.retrieval.router",
    "TemporalReference": "khora_core.retrieval.dates",
    "context_text": "khora_core.retrieval.context",
    "parse_temporal": "khora_core.retrieval.dates",
    "weighted_rrf": "khora_core.retrieval.fusion",
    "weighted_rrf_normalized": "khora_core.retrieval.fusion",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'khora_core.retrieval' has no attribute {name!r}")
