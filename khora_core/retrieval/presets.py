"""Named read-path presets: frozen bundles of ``QueryConfig`` and ``VectorCypherConfig`` settings.

Pick one with a word: ``Khora(preset="memory")``, ``KhoraConfig(preset="memory")``,
``KHORA_PRESET=memory``, ``khora recall --preset memory``, or ``preset=`` on the LangChain
and LlamaIndex classes. A preset's settings sit just above the defaults: anything set in the
environment, a YAML file or keywords still wins.

====================  ======================================================================
preset                what it is for
====================  ======================================================================
``default``           the specification's settings
``memory``            chat and agent memory, and question answering over notes: the BM25
                      channel on and weighted first (3.0), sharp rank fusion (``k = 5``), no
                      MMR; remember messages with ``context=`` (what they reply to)
``fast``              no LLM work at query time (no HyDE, no LLM understanding or reranking)
``precise``           cross-encoder reranking on, BM25 channel on
``evergreen``         recency off: for reference corpora where newer is not better
``graph_heavy``       relationship-first fusion weights and deeper walks
====================  ======================================================================

``sharp`` is the earlier name of ``memory`` and stays as an alias. Measured figures for
``default`` and ``memory`` are in ``docs/benchmarks.md``.
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
        """Keyword arguments for ``KhoraConfig``: ``{"preset": name}``."""
        return {"preset": self.name}


def _preset(
    name: str, query: dict[str, Any] | None = None, vectorcypher: dict[str, Any] | None = None
) -> RetrievalPreset:
    return RetrievalPreset(
        name, MappingProxyType(dict(query or {})), MappingProxyType(dict(vectorcypher or {}))
    )


_MEMORY = _preset(
    "memory",
    {"enable_bm25_channel": True, "enable_diversity": False},
    {"fusion_rrf_k": 5, "fusion_keyword_weight": 3.0},
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
        "memory": _MEMORY,
        "sharp": _MEMORY,
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
