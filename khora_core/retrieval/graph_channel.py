"""The graph channel: entry entities, an adaptive-depth walk, and the chunks they reach.

**Entry entities** are the question's linked mentions (score = link strength) plus the
entities nearest the question's embedding (score = cosine), up to the route's
``entry_entities``. Each score is multiplied by the entity's specificity
(``fusion.entity_specificity``): an entity named in more than ``graph_common_entity_share`` of
the namespace's chunks, such as a chat's speaker, picks out little and is discounted on a log
scale (the chunk count is read before the walk and cached briefly:
``retrieval.chunk_counts``).

**Walk.** The adaptive-depth walk from the entry entities does not pass through an entity
that is common (as above) and has more mentions than the channel reads per entity
(``walk_through_limit``): such an entity links everything to everything, and expanding it
costs its whole degree, which grows with the store.

**Evidence.** After the walk, a chunk's graph evidence is the sum of the
scores of the entry entities it mentions, plus ``0.5 ** d`` times the channel's quality for
each ring of entities ``d`` hops out that it mentions, plus the passage seeds (the entities
of the passages nearest the question, HippoRAG-style). Mention counts only break ties, so a
chunk that repeats one name does not outrank a chunk that names two asked-about entities.

**Reach** (``retrieval.graph_reach``). Each evidence group (an entry entity, a ring, the passage seeds) reaches at most
the candidate pool's count of chunks. Unfiltered, the channel reads each entity's
``graph_reach_scan`` most-mentioning chunks, scores them all for relevance (below) in one
pass, and each group keeps its most relevant ones, so a popular entity's reach is not decided
by which chunks repeat its name most. Filtered or temporal recalls reach by pages that the
store filters and orders (most mentions, or newest first), then rank by relevance.

**Bridge relevance.** A reached chunk's evidence is multiplied by its relevance: the better of
its cosine with the question and its cosine with the *bridged question* (the question's
vector plus the nearest passage's, renormalised: a Rocchio step towards the first hop). The
second hop of a multi-hop question is about the bridge entity that the first hop names, not
about the question's words, so its cosine with the question alone is low.

**Nominations.** Beside another channel, the graph hands fusion only its best ``nominate``
chunks, as many as the recall returns. With RRF's ``k = 60`` any chunk that two channels
list outscores any chunk that one lists, so a long graph tail (chunks that merely name a
popular entity) would act as votes for the vector channel's mid-ranked hits and push the
graph's own best finds, often the second hop that the vector channel misses, out of the
result. Measured effects of these choices are in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from khora_core.config import VectorCypherConfig
from khora_core.models import ChunkHit
from khora_core.retrieval.channels import ChannelResult
from khora_core.retrieval.fusion import calibrated_similarity, entity_specificity, graph_quality, nominations
from khora_core.retrieval.graph_reach import reach_by_mentions, reach_by_pages, relevance_to
from khora_core.retrieval.linking import LinkedEntity
from khora_core.retrieval.ppr import walk_passages
from khora_core.retrieval.router import RoutingDecision, adaptive_depth
from khora_core.storage.protocols import EntityHit, StorageStack

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter

__all__ = ["PASSAGE_SEEDS", "bridged_query", "graph_channel", "walk_through_limit"]

#: Passages nearest the question whose entities also seed the graph walk.
PASSAGE_SEEDS = 5
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


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
    entry_hits: Sequence[EntityHit] | None = None,
    passages: Awaitable[ChannelResult] | None = None,
    nominate: int | None = None,
    chunk_count: Callable[[], Awaitable[int]] | None = None,
) -> ChannelResult:
    """Entity-seeded traversal: entry entities -> adaptive-depth walk -> MENTIONED_IN chunks.

    Args:
        entry_hits: the entities nearest the question, when the caller already searched
            them (linking does, in the same pass as the mentions); searched here otherwise.
        passages: the vector channel's result, when it runs alongside: its first
            ``PASSAGE_SEEDS`` hits are the passage seeds (no second vector search).
        nominate: return at most this many chunks (fewer than ``limit``) when fused with
            other channels (module docstring, "Nominations"); ``limit`` still sets how far
            each evidence group reaches.
        chunk_count: reads the namespace's chunk count (for the entry entities'
            specificity; a cached ``retrieval.chunk_counts.ChunkCounts`` in the read path);
            ``stack.documents.count_chunks`` otherwise.

    ``info`` carries the entry entities, the depth walked, the expanded entity count and
    the channel's evidence ``quality`` (``fusion.graph_quality``).
    """
    started = time.perf_counter()
    graph = stack.graph
    seeds: dict[str, tuple[str, float, str]] = {}  # id -> (name, score, how)
    mentions: dict[str, int] = {}
    floor = config.retriever_min_entity_similarity
    for link in linked:
        if link.entity.id not in seeds:
            score = calibrated_similarity(link.score, floor) if link.match == "embedding" else link.score
            seeds[link.entity.id] = (link.entity.name, score, link.match)
            mentions[link.entity.id] = link.entity.mention_count
    if query_vector is not None and len(seeds) < decision.entry_entities:
        if entry_hits is None:
            entry_hits = await graph.search_entities_by_vector(
                namespace_id,
                query_vector,
                limit=decision.entry_entities,
                min_similarity=config.retriever_min_entity_similarity,
            )
        for hit in entry_hits:
            if len(seeds) >= decision.entry_entities:
                break
            if hit.score >= floor and hit.entity.id not in seeds:
                seeds[hit.entity.id] = (
                    hit.entity.name,
                    calibrated_similarity(float(hit.score), floor),
                    "vector",
                )
                mentions[hit.entity.id] = hit.entity.mention_count
    if config.graph_scoring == "walk" and filter is None and not temporal_sort and query_vector is not None:
        return await _walk_channel(
            stack,
            namespace_id,
            query_vector,
            seeds=seeds,
            mentions=mentions,
            config=config,
            limit=limit,
            nominate=nominate,
            passages=passages,
            chunk_count=chunk_count,
            started=started,
        )
    # The walk from the entry entities and the passage seeds (below) run together, once the
    # namespace's chunk count (cached; for the seeds' specificity and the walk's
    # ``max_mentions``) is known.
    depth = adaptive_depth(decision.depth, len(seeds), config, max_depth=decision.max_depth) if seeds else 0
    walk: asyncio.Task[Any] | None = None
    counting: asyncio.Task[int] | None = None
    if (seeds or query_vector is not None) and config.graph_common_entity_share < 1.0:
        counting = asyncio.ensure_future(
            chunk_count() if chunk_count is not None else stack.documents.count_chunks(namespace_id)
        )
    if depth > 0:
        through = walk_through_limit(await counting, config) if counting is not None else None
        walk = asyncio.ensure_future(
            graph.walk_distances(
                namespace_id,
                list(seeds),
                depth=depth,
                max_fanout=config.graph_max_fanout,
                max_entities=config.retriever_max_entities,
                max_mentions=through,
            )
        )
    try:
        passage_found, read = await _passage_seeds(stack, namespace_id, query_vector, seeds, passages, filter)
        bridge = await _bridge(stack, namespace_id, query_vector, read[0] if read else None)
        distance = await walk if walk is not None else None
        chunks_in_namespace = await counting if counting is not None else 0
    except BaseException:
        pending = [t for t in (walk, counting) if t is not None]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        raise

    def specific(entity_mentions: int) -> float:
        return entity_specificity(
            entity_mentions, chunks_in_namespace, common_share=config.graph_common_entity_share
        )

    specificity = {eid: specific(mentions[eid]) for eid in seeds}
    seeds = {eid: (n, s * specificity[eid], h) for eid, (n, s, h) in seeds.items()}
    passage_seeds = {eid: s * specific(n) for eid, (s, n) in passage_found.items()}
    quality = graph_quality(s for _, s, _ in seeds.values())
    info: dict[str, Any] = {
        "entry_entities": [
            {"id": i, "name": n, "score": round(s, 4), "how": h, "specificity": round(specificity[i], 4)}
            for i, (n, s, h) in seeds.items()
        ],
        "passage_seed_entities": len(passage_seeds),
        "bridge_passage": read[0].chunk.id if bridge is not None else None,
        "quality": round(quality, 4),
    }
    if not seeds and not passage_seeds:
        info.update(depth=0, expanded=0)
        return ChannelResult("graph", elapsed_ms=(time.perf_counter() - started) * 1000.0, info=info)

    rings: dict[int, list[str]] = {}
    if distance is not None:
        far = sorted(
            ((eid, d) for eid, d in distance.items() if eid not in seeds and d > 0), key=lambda p: p[1]
        )[: config.retriever_max_entities]
        for eid, d in far:
            rings.setdefault(d, []).append(eid)
    info.update(depth=depth, expanded=sum(len(v) for v in rings.values()))

    # Evidence groups: each entry entity (credited with its own score), each ring, and the
    # passage seeds.
    groups: list[tuple[list[str], float]] = [([eid], score) for eid, (_, score, _) in seeds.items()]
    groups += [(ids, (0.5**d) * quality) for d, ids in sorted(rings.items())]
    if passage_seeds:
        groups.append((list(passage_seeds), max(passage_seeds.values())))
    if filter is None and not temporal_sort:
        reached = await reach_by_mentions(
            stack,
            namespace_id,
            groups,
            limit=limit,
            scan=max(limit, config.graph_reach_scan),
            query_vector=query_vector,
            bridge=bridge,
        )
    else:
        reached = await reach_by_pages(stack, namespace_id, groups, limit, filter, temporal_sort)

    # Rank what the graph reached by relevance to the question, with graph evidence as a
    # multiplier: entity overlap alone cannot tell a bridge passage from any other passage
    # that names the same popular entity.
    if reached.relevance is not None:
        relevance = {c: reached.relevance[c] for c in reached.evidence if c in reached.relevance}
    else:
        relevance = await relevance_to(
            stack, namespace_id, query_vector, list(reached.evidence), bridge=bridge
        )
    top_evidence = max(reached.evidence.values(), default=1.0) or 1.0

    def final_score(cid: str) -> float:
        if cid not in relevance:
            return reached.evidence[cid]
        return relevance[cid] * (0.5 + 0.5 * reached.evidence[cid] / top_evidence)

    scored = {cid: final_score(cid) for cid in reached.evidence}
    # The channel's evidence is the better of its entity links and how relevant the passages
    # it reached are: a walk from passage seeds is worth as much as what it finds.
    info["quality"] = round(max(quality, max(relevance.values(), default=0.0)), 4)

    def order(cid: str) -> tuple[float, float, float, str]:
        chunk = reached.chunks.get(cid)
        when = chunk.chunk.occurred_at if temporal_sort and chunk is not None else None
        return (-round(scored[cid], 9), -(when or _EPOCH).timestamp(), -reached.mentions[cid], cid)

    ranked = sorted(reached.evidence, key=order)
    returned = limit if nominate is None else nominations(nominate, limit, quality)
    info["nominated"] = returned if nominate is not None else None
    if reached.chunks:
        ranked = [cid for cid in ranked if cid in reached.chunks][:returned]
        rows = {cid: reached.chunks[cid].chunk for cid in ranked}
    else:  # rows the passage search read, the rest fetched; a chunk whose row is gone is skipped
        ranked = ranked[: returned + returned // 2]
        known = {h.chunk.id: h.chunk for h in read}
        rows = {cid: known[cid] for cid in ranked if cid in known}
        missing = [cid for cid in ranked if cid not in known]
        if missing:
            rows.update({c.id: c for c in await stack.documents.get_chunks(namespace_id, missing)})
        ranked = [cid for cid in ranked if cid in rows][:returned]
    hits = [ChunkHit(chunk=rows[cid], score=scored[cid], rank=i) for i, cid in enumerate(ranked, start=1)]
    return ChannelResult(
        name="graph",
        hits=hits,
        pushed_keys=reached.pushed,
        post_filtered_keys=reached.post,
        elapsed_ms=(time.perf_counter() - started) * 1000.0,
        info=info,
    )


def walk_through_limit(chunks: int, config: VectorCypherConfig) -> int:
    """The most mentions an entity may have for the walk to pass through it: a common entity
    (more than ``graph_common_entity_share`` of the namespace's chunks) that also has more
    mentions than the channel reads per entity (``graph_reach_scan``) links too much to be a
    bridge, and expanding it would cost its whole degree."""
    return max(int(config.graph_common_entity_share * chunks), config.graph_reach_scan)


async def _walk_channel(
    stack: StorageStack,
    namespace_id: str,
    query_vector: Sequence[float],
    *,
    seeds: dict[str, tuple[str, float, str]],
    mentions: dict[str, int],
    config: VectorCypherConfig,
    limit: int,
    nominate: int | None,
    passages: Awaitable[ChannelResult] | None,
    chunk_count: Callable[[], Awaitable[int]] | None,
    started: float,
) -> ChannelResult:
    """The unfiltered graph channel as a walk (``retrieval.ppr``): restart at the question's
    entities (link strength times specificity) and at its nearest passages (cosine), rank
    passages by where the walk settles."""
    counting: asyncio.Future[int] | None = None
    if seeds and config.graph_common_entity_share < 1.0:
        counting = asyncio.ensure_future(
            chunk_count() if chunk_count is not None else stack.documents.count_chunks(namespace_id)
        )
    try:
        if passages is not None:
            nearest = list((await passages).hits)
        else:
            nearest = list((await stack.vectors.search(namespace_id, query_vector, limit=limit)).hits)
        chunks_in_namespace = await counting if counting is not None else 0
    except BaseException:
        if counting is not None:
            counting.cancel()
            await asyncio.gather(counting, return_exceptions=True)
        raise
    specificity = {
        eid: entity_specificity(
            mentions[eid], chunks_in_namespace, common_share=config.graph_common_entity_share
        )
        for eid in seeds
    }
    weighted = {eid: (n, s * specificity[eid], h) for eid, (n, s, h) in seeds.items()}
    quality = graph_quality(s for _, s, _ in weighted.values())
    mass, hits, walk_info = await walk_passages(
        stack,
        namespace_id,
        seeds={eid: (s, mentions[eid]) for eid, (_, s, _) in weighted.items() if s > 0},
        nearest=nearest,
        expand=config.graph_walk_expand,
        per_entity=config.graph_walk_per_entity,
        damping=config.graph_walk_damping,
        passage_share=config.graph_walk_passage_share,
    )
    info: dict[str, Any] = {
        "entry_entities": [
            {"id": i, "name": n, "score": round(s, 4), "how": h, "specificity": round(specificity[i], 4)}
            for i, (n, s, h) in weighted.items()
        ],
        "scoring": "walk",
        "walk": walk_info,
        "quality": round(quality, 4),
        "depth": 0,
        "expanded": walk_info["expanded_entities"],
    }
    returned = limit if nominate is None else max(1, min(limit, nominate))
    ranked = sorted((cid for cid in mass if mass[cid] > 0), key=lambda c: (-mass[c], c))
    head = ranked[: returned + returned // 2]
    missing = [cid for cid in head if cid not in hits]
    rows = {cid: hits[cid].chunk for cid in head if cid in hits}
    if missing:
        rows.update({c.id: c for c in await stack.documents.get_chunks(namespace_id, missing)})
    ranked = [cid for cid in head if cid in rows][:returned]
    out = [ChunkHit(chunk=rows[cid], score=mass[cid], rank=i) for i, cid in enumerate(ranked, start=1)]
    return ChannelResult(
        name="graph", hits=out, elapsed_ms=(time.perf_counter() - started) * 1000.0, info=info
    )


async def _passage_seeds(
    stack: StorageStack,
    namespace_id: str,
    query_vector: Sequence[float] | None,
    seeds: dict[str, tuple[str, float, str]],
    passages: Awaitable[ChannelResult] | None,
    filter: RecallFilter | None,
) -> tuple[dict[str, tuple[float, int]], list[ChunkHit]]:
    """Passage seeds (HippoRAG-style): the entities of the few passages nearest the question
    are where a second hop starts ("the startup where X worked" -> that startup's passages);
    each scores half its passage's similarity (before its specificity), and comes with its
    mention count. Also returns the passages it read, nearest first: the vector channel's
    whole page when it runs alongside, else the seeds' own search."""
    if query_vector is None or PASSAGE_SEEDS <= 0:
        return {}, []
    if passages is not None:
        read = list((await passages).hits)
    else:
        read = (
            await stack.vectors.search(namespace_id, query_vector, limit=PASSAGE_SEEDS, filter=filter)
        ).hits
    nearest = read[:PASSAGE_SEEDS]
    by_chunk = await stack.graph.entity_refs_for_chunks(namespace_id, [h.chunk.id for h in nearest])
    out: dict[str, tuple[float, int]] = {}
    for h in nearest:
        for ent in by_chunk.get(h.chunk.id, []):
            if ent.id not in seeds and ent.type != "DATE":
                score = max(out.get(ent.id, (0.0, 0))[0], 0.5 * float(h.score))
                out[ent.id] = (score, ent.mention_count)
    return out, read


def bridged_query(query_vector: Sequence[float], passage_vector: Sequence[float]) -> list[float] | None:
    """The question moved halfway to its nearest passage: ``q/|q| + p/|p|``, renormalised
    (``None`` when either vector is zero or they cancel out)."""
    q_norm = math.sqrt(sum(x * x for x in query_vector))
    p_norm = math.sqrt(sum(x * x for x in passage_vector))
    if q_norm == 0.0 or p_norm == 0.0 or len(query_vector) != len(passage_vector):
        return None
    mixed = [a / q_norm + b / p_norm for a, b in zip(query_vector, passage_vector, strict=True)]
    norm = math.sqrt(sum(x * x for x in mixed))
    return [x / norm for x in mixed] if norm > 1e-9 else None


async def _bridge(
    stack: StorageStack, namespace_id: str, query_vector: Sequence[float] | None, top: ChunkHit | None
) -> list[float] | None:
    """The bridged question for the nearest passage (module docstring), or ``None``. A vector
    hit carries its embedding; one without is read from the store."""
    if query_vector is None or top is None:
        return None
    vector = top.chunk.embedding
    if vector is None:
        vector = (await stack.vectors.embeddings(namespace_id, [top.chunk.id])).get(top.chunk.id)
    return bridged_query(query_vector, vector) if vector else None
