"""Named read-path presets: frozen bundles of ``QueryConfig`` and ``VectorCypherConfig`` settings.

Use one when building a config::

    from khora_core.retrieval.presets import PRESETS
    cfg = KhoraConfig(**PRESETS["evergreen"].config_kwargs())

====================  ======================================================================
preset                what it does
====================  ======================================================================
``default``           the specification's defaults
``fast``              no LLM work at query time (no HyDE, no LLM understanding or reranking)
``precise``           cross-encoder reranking on, BM25 channel on
``evergreen``         recency off: for reference corpora where newer is not better
``graph_heavy``       relationship-first fusion weights and deeper walks
====================  ======================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["PRESETS", "RetrievalPreset"]


@dataclass(frozen=True)
class RetrievalPreset:
    """Overrides for ``KhoraConfig(query=..., vectorcypher=...)``; frozen so a shared preset
    cannot be mutated."""

    name: str
    query: MappingProxyType[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    vectorcypher: MappingProxyType[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def config_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``KhoraConfig``."""
        from khora_core.config import VectorCypherConfig

        return {"query": dict(self.query), "vectorcypher": VectorCypherConfig(**dict(self.vectorcypher))}


def _preset(
    name: str, query: dict[str, Any] | None = None, vectorcypher: dict[str, Any] | None = None
) -> RetrievalPreset:
    return RetrievalPreset(
        name, MappingProxyType(dict(query or {})), MappingProxyType(dict(vectorcypher or {}))
    )


PRESETS: MappingProxyType[str, RetrievalPreset] = MappingProxyType(
    {
        "default": _preset("default"),
        "fast": _preset(
            "fast",
            {"enable_hyde": "never", "enable_llm_reranking": False, "enable_reranking": False},
            {"routing_use_llm": False},
        ),
        "precise": _preset("precise", {"enable_reranking": True, "enable_bm25_channel": True}),
        "evergreen": _preset("evergreen", {"apply_recency_bias": False}, {"temporal_recency_weight": 0.0}),
        "graph_heavy": _preset(
            "graph_heavy",
            vectorcypher={
                "fusion_vector_weight": 0.4,
                "fusion_graph_weight": 0.6,
                "fusion_complex_vector_weight": 0.3,
                "fusion_complex_graph_weight": 0.7,
                "graph_default_depth": 3,
            },
        ),
    }
)
