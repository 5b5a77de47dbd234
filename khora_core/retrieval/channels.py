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

**Graph channel scoring.** Entry entities are the linked mentions (score = link strength)
plus the entities nearest the query embedding (score = cosine), up to the route's
``entry_entities``. After the adaptive-depth walk, a chunk's graph score is the evidence it
carries: the sum of the scores of the entry entities it mentions, plus ``0.5 ** d`` times
the channel's quality for each ring of entities ``d`` hops out that it mentions. Mention
counts only order chunks *within* equal evidence (they decide truncation, not fusion rank),
so a chunk that merely says a name twice does not outrank one that names two asked-about
entities.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from khora_core.config import VectorCypherConfig
from khora_core.models import ChunkHit, SearchMode
from khora_core.retrieval.fusion import graph_quality
from khora_core.retrieval.linking import LinkedEntity
from khora_core.retrieval.router import RoutingDecision, adaptive_depth
from khora_core.storage.protocols import SearchPage, StorageStack

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter

__all__ = [
    "ChannelResult",
    "graph_channel",
    "keyword_channel",
    "run_channels",
    "select_channels",
    "vector_channel",
]

#: Passages nearest the question whose entities also seed the graph walk.
PASSAGE_SEEDS = 5
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


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


async def graph_channel(
    stack: StorageStack,
    namespace_id: str,
    query_vector: Sequence[float] | None,
    *,
    linked: Sequence[LinkedEntity],
    decision: RoutingDecision,
    config: VectorCypherConfig,
    limit: int,
    filter: RecallFilter | None = None,
    temporal_sort: bool = False,
) -> ChannelResult:
    """Entity-seeded traversal: entry entities -> adaptive-depth walk -> MENTIONED_IN chunks.

    ``info`` carries the entry entities, the depth walked, the expanded entity count and
    the channel's evidence ``quality`` (``fusion.graph_quality``).
    """
    started = time.perf_counter()
    graph = stack.graph
    seeds: dict[str, tuple[str, float, str]] = {}  # id -> (name, score, how)
    for link in linked:
        if link.entity.id not in seeds:
            seeds[link.entity.id] = (link.entity.name, link.score, link.match)
    if query_vector is not None and len(seeds) < decision.entry_entities:
        hits = await graph.search_entities_by_vector(
            namespace_id,
            query_vector,
            limit=decision.entry_entities,
            min_similarity=config.retriever_min_entity_similarity,
        )
        for hit in hits:
            if len(seeds) >= decision.entry_entities:
                break
            seeds.setdefault(hit.entity.id, (hit.entity.name, float(hit.score), "vector"))
    quality = graph_quality(s for _, s, _ in seeds.values())
    # Passage seeds (HippoRAG-style): the entities of the few passages nearest the question
    # are where a second hop starts ("the startup where X worked" -> that startup's passages).
    passage_seeds: dict[str, float] = {}
    if query_vector is not None and PASSAGE_SEEDS > 0:
        page = await stack.vectors.search(namespace_id, query_vector, limit=PASSAGE_SEEDS, filter=filter)
        by_chunk = await graph.entities_for_chunks(namespace_id, [h.chunk.id for h in page.hits])
        for h in page.hits:
            for ent in by_chunk.get(h.chunk.id, []):
                if ent.id not in seeds and ent.type != "DATE":
                    passage_seeds[ent.id] = max(passage_seeds.get(ent.id, 0.0), 0.5 * float(h.score))
    info: dict[str, Any] = {
        "entry_entities": [
            {"id": i, "name": n, "score": round(s, 4), "how": h} for i, (n, s, h) in seeds.items()
        ],
        "passage_seed_entities": len(passage_seeds),
        "quality": round(quality, 4),
    }
    if not seeds and not passage_seeds:
        info.update(depth=0, expanded=0)
        return ChannelResult("graph", elapsed_ms=(time.perf_counter() - started) * 1000.0, info=info)

    depth = adaptive_depth(decision.depth, len(seeds), config, max_depth=decision.max_depth) if seeds else 0
    rings: dict[int, list[str]] = {}
    if depth > 0:
        hood = await graph.neighbourhood(
            namespace_id, list(seeds), depth=depth, max_fanout=config.graph_max_fanout
        )
        far = sorted(
            ((eid, d) for eid, d in hood.distance.items() if eid not in seeds and d > 0), key=lambda p: p[1]
        )[: config.retriever_max_entities]
        for eid, d in far:
            rings.setdefault(d, []).append(eid)
    info.update(depth=depth, expanded=sum(len(v) for v in rings.values()))

    # One call per entry entity (to credit each entity's own score), one per ring, and one
    # for the passage seeds.
    groups: list[tuple[list[str], float]] = [([eid], score) for eid, (_, score, _) in seeds.items()]
    groups += [(ids, (0.5**d) * quality) for d, ids in sorted(rings.items())]
    if passage_seeds:
        groups.append((list(passage_seeds), max(passage_seeds.values())))
    pages = await asyncio.gather(
        *(
            graph.chunks_for_entities(
                namespace_id, ids, limit=limit, filter=filter, temporal_sort=temporal_sort
            )
            for ids, _ in groups
        )
    )
    evidence: dict[str, float] = {}
    mentions: dict[str, float] = {}
    chunks: dict[str, ChunkHit] = {}
    pushed: list[str] = []
    post: list[str] = []
    for (_, weight), page in zip(groups, pages, strict=True):
        pushed += [k for k in page.pushed_keys if k not in pushed]
        post += [k for k in page.post_filtered_keys if k not in post]
        for hit in page.hits:
            cid = hit.chunk.id
            chunks.setdefault(cid, hit)
            evidence[cid] = evidence.get(cid, 0.0) + weight
            mentions[cid] = mentions.get(cid, 0.0) + float(hit.score)

    # Rank what the graph reached by relevance to the question, with graph evidence as a
    # multiplier: entity overlap alone cannot tell a bridge passage from any other passage
    # that names the same popular entity.
    relevance = await _relevance(stack, namespace_id, query_vector, list(chunks))
    top_evidence = max(evidence.values(), default=1.0) or 1.0

    def score(cid: str) -> float:
        if cid not in relevance:
            return evidence[cid]
        return relevance[cid] * (0.5 + 0.5 * evidence[cid] / top_evidence)

    scored = {cid: score(cid) for cid in chunks}
    # The channel's evidence is the better of its entity links and how relevant the passages
    # it reached are: a walk from passage seeds is worth as much as what it finds.
    info["quality"] = round(max(quality, max(relevance.values(), default=0.0)), 4)

    def order(cid: str) -> tuple[float, float, float]:
        when = chunks[cid].chunk.occurred_at if temporal_sort else None
        return (-round(scored[cid], 9), -(when or _EPOCH).timestamp(), -mentions[cid])

    ranked = sorted(chunks, key=order)[:limit]
    hits = [
        ChunkHit(chunk=chunks[cid].chunk, score=scored[cid], rank=i) for i, cid in enumerate(ranked, start=1)
    ]
    return ChannelResult(
        name="graph",
        hits=hits,
        pushed_keys=pushed,
        post_filtered_keys=post,
        elapsed_ms=(time.perf_counter() - started) * 1000.0,
        info=info,
    )


async def _relevance(
    stack: StorageStack, namespace_id: str, query_vector: Sequence[float] | None, chunk_ids: list[str]
) -> dict[str, float]:
    """Cosine of the question with each chunk's stored embedding (absent when unknown)."""
    if query_vector is None or not chunk_ids:
        return {}
    stored = await stack.vectors.embeddings(namespace_id, chunk_ids)
    if not stored:
        return {}
    ids = list(stored)
    matrix = np.asarray([stored[c] for c in ids], dtype=np.float32)
    q = np.asarray(query_vector, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(q)) or 1.0)
    cos = (matrix @ q) / np.where(norms == 0, 1.0, norms)
    return {c: max(0.0, float(v)) for c, v in zip(ids, cos, strict=True)}


async def run_channels(calls: dict[str, Awaitable[ChannelResult]]) -> dict[str, ChannelResult]:
    """Run channel coroutines concurrently; a failing channel raises (nothing is hidden)."""
    names = list(calls)
    results = await asyncio.gather(*(calls[n] for n in names))
    return dict(zip(names, results, strict=True))
