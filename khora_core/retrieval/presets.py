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
``sharp``             BM25 channel on at weight 1.5, sharp RRF (``k = 5``), no MMR
====================  ======================================================================

``sharp`` is for recall@k on memory and question-answering corpora. The textbook ``k = 60``
flattens fused ranks: with 50 candidates per channel, mid-rank chunks seen by two channels
outvote one channel's confident top hit, and MMR then pushes apart the related passages a
multi-hop answer needs. Measured on the development sets (``benchmarks/``, offline
extractor, embedded store): LoCoMo recall@10 0.508 -> 0.656 in HYBRID; multi-hop HYBRID
Recall@5 68.7 / 76.2 / 80.0 -> 65.0 / 75.0 / 85.0 on MuSiQue / 2Wiki / HotpotQA (the default's
MMR counts only near-duplicates as redundant, ``QueryConfig.diversity_duplicate_floor``, and
its graph channel nominates only as many chunks as the recall returns).
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
        "sharp": _preset(
            "sharp",
            {"enable_bm25_channel": True, "enable_diversity": False},
            {"fusion_rrf_k": 5, "fusion_keyword_weight": 1.5},
        ),
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
