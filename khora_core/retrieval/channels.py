"""The three retrieval channels over the storage protocols, and which of them a mode runs.

========  ========================================================================
mode      channels
========  ========================================================================
VECTOR    vector
GRAPH     graph
KEYWORD   keyword
HYBRID    vector + graph (graph only for MODERATE/COMPLEX when routing is on), plus
          keyword when ``QueryConfig.enable_bm25_channel``
ALL       vector + graph + keyword
========  ========================================================================

Each channel hands the parsed filter to its store, which compiles it for its backend,
re-checks it in memory and reports what it pushed down. Each returns a ``ChannelResult``
(hits best first, ``pushed_keys``, ``post_filtered_keys``, ``elapsed_ms``).

The graph channel has its own module, :mod:`khora_core.retrieval.graph_channel`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from khora_core.models import ChunkHit, SearchMode
from khora_core.retrieval.router import RoutingDecision
from khora_core.storage.protocols import SearchPage, StorageStack

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter

__all__ = [
    "ChannelResult",
    "keyword_channel",
    "run_channels",
    "select_channels",
    "vector_channel",
]


@dataclass
class ChannelResult:
    """One channel's hits (best first) and what it did with the filter."""

    name: str
    hits: list[ChunkHit] = field(default_factory=list)
    pushed_keys: list[str] = field(default_factory=list)
    post_filtered_keys: list[str] = field(default_factory=list)
    elapsed_ms: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {"count": len(self.hits), "ms": round(self.elapsed_ms, 2), **self.info}


def select_channels(mode: SearchMode, decision: RoutingDecision, *, enable_bm25: bool) -> list[str]:
    """The channels ``mode`` runs for this routing decision (table above)."""
    mode = SearchMode(mode)
    if mode is SearchMode.VECTOR:
        return ["vector"]
    if mode is SearchMode.GRAPH:
        return ["graph"]
    if mode is SearchMode.KEYWORD:
        return ["keyword"]
    if mode is SearchMode.ALL:
        return ["vector", "graph", "keyword"]
    return ["vector"] + (["graph"] if decision.use_graph else []) + (["keyword"] if enable_bm25 else [])


def _from_page(name: str, page: SearchPage, started: float, **info: Any) -> ChannelResult:
    return ChannelResult(
        name=name,
        hits=list(page.hits),
        pushed_keys=list(page.pushed_keys),
        post_filtered_keys=list(page.post_filtered_keys),
        elapsed_ms=(time.perf_counter() - started) * 1000.0,
        info=info,
    )


async def vector_channel(
    stack: StorageStack,
    namespace_id: str,
    vector: Sequence[float],
    *,
    limit: int,
    min_similarity: float = 0.0,
    filter: RecallFilter | None = None,
    name: str = "vector",
) -> ChannelResult:
    """Top ``limit`` chunks by raw cosine (``min_similarity`` applies to the raw cosine)."""
    started = time.perf_counter()
    page = await stack.vectors.search(
        namespace_id, vector, limit=limit, filter=filter, min_similarity=min_similarity
    )
    return _from_page(name, page, started)


async def keyword_channel(
    stack: StorageStack,
    namespace_id: str,
    query: str,
    *,
    limit: int,
    filter: RecallFilter | None = None,
) -> ChannelResult:
    """Top ``limit`` chunks by BM25."""
    started = time.perf_counter()
    page = await stack.keywords.search(namespace_id, query, limit=limit, filter=filter)
    return _from_page("keyword", page, started)


async def run_channels(calls: dict[str, Awaitable[ChannelResult]]) -> dict[str, ChannelResult]:
    """Run channel coroutines concurrently; a failing channel raises (nothing is hidden)."""
    names = list(calls)
    results = await asyncio.gather(*(calls[n] for n in names))
    return dict(zip(names, results, strict=True))
