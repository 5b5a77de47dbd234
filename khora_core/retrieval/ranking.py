"""The ranking stages of recall, between the channels and the limit.

``collect`` -> ``gate`` (defensive filter re-check, deprecated time window) ->
``fuse_and_boost`` (RRF with the evidence rules, soft date windows) -> ``recency_head``
(recency over the head of the list) -> ``diversify_and_rerank`` (MMR, cross-encoder, LLM
reranking).

Relevance (``rel``) starts as the fused RRF score divided by the best one, so it lies in
(0, 1] and multiplicative boosts keep their meaning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from khora_core.config import QueryConfig, VectorCypherConfig
from khora_core.models import Chunk
from khora_core.retrieval import fusion, rerank
from khora_core.retrieval.channels import ChannelResult
from khora_core.retrieval.hyde import HYDE_WEIGHT_FACTOR
from khora_core.retrieval.mmr import mmr_order
from khora_core.retrieval.recency import apply_recency, apply_window_boost, event_time, recency_scores
from khora_core.retrieval.router import QueryComplexity, RoutingDecision
from khora_core.retrieval.understand import QueryUnderstanding

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter
    from khora_core.llm.client import LLMClient

__all__ = [
    "Candidate",
    "Ranked",
    "collect",
    "date_windows",
    "diversify_and_rerank",
    "fill_embeddings",
    "fuse_and_boost",
    "gate",
    "graph_fusion_quality",
    "lone_vector_pool",
    "mmr_window",
    "recency_head",
]


@dataclass
class Candidate:
    """A chunk seen by one or more channels, with each channel's raw score and rank."""

    chunk: Chunk
    scores: dict[str, float] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)


def collect(results: Mapping[str, ChannelResult]) -> dict[str, Candidate]:
    cands: dict[str, Candidate] = {}
    for name, res in results.items():
        for hit in res.hits:
            cand = cands.setdefault(hit.chunk.id, Candidate(hit.chunk))
            cand.scores[name] = float(hit.score)
            cand.ranks[name] = int(hit.rank)
    return cands


def _aware(dt: datetime) -> datetime:
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def in_time_window(chunk: Chunk, window: tuple[datetime | None, datetime | None]) -> bool:
    """The deprecated start/end window over ``COALESCE(source_timestamp, created_at)`` (inclusive)."""
    when = _aware(chunk.source_timestamp or chunk.created_at)
    start, end = window
    return (start is None or when >= _aware(start)) and (end is None or when <= _aware(end))


def gate(
    cands: dict[str, Candidate],
    filter: RecallFilter | None,
    time_window: tuple[datetime | None, datetime | None] | None,
) -> tuple[dict[str, Candidate], int, int]:
    """Defensive re-check of the full filter, then the deprecated window.

    Returns:
        The surviving candidates and how many each step dropped.
    """
    dropped_filter = dropped_window = 0
    if filter is not None:
        kept = {cid: c for cid, c in cands.items() if filter.matches(c.chunk.filter_record())}
        dropped_filter, cands = len(cands) - len(kept), kept
    if time_window is not None:
        kept = {cid: c for cid, c in cands.items() if in_time_window(c.chunk, time_window)}
        dropped_window, cands = len(cands) - len(kept), kept
    return cands, dropped_filter, dropped_window


@dataclass
class Ranked:
    order: list[str]
    rel: dict[str, float]
    outcome: fusion.FusionOutcome
    policy: fusion.FusionPolicy
    base_weights: dict[str, float]
    quality: dict[str, float]
    max_raw_vector_score: float | None
    vector_confident: bool
    window_boosted: int = 0
    recency_applied: bool = False


def fuse_and_boost(
    query: str,
    results: Mapping[str, ChannelResult],
    cands: dict[str, Candidate],
    *,
    decision: RoutingDecision,
    understanding: QueryUnderstanding,
    vc: VectorCypherConfig,
    qc: QueryConfig,
) -> Ranked:
    """Fuse the surviving hits, then apply the soft date-window boost (over every candidate:
    a chunk dated inside the asked-about window may rise from anywhere in the list)."""
    lists = {
        n: [(h.chunk.id, float(h.score)) for h in r.hits if h.chunk.id in cands] for n, r in results.items()
    }
    weights = dict(decision.weights)
    weights["hyde"] = weights.get("vector", vc.fusion_vector_weight) * HYDE_WEIGHT_FACTOR
    quality: dict[str, float] = {}
    if "graph" in results:
        quality["graph"] = graph_fusion_quality(
            float(results["graph"].info.get("quality", 0.0)), decision, vc
        )
    if lists.get("keyword"):
        quality["keyword"] = fusion.keyword_quality(query, cands[lists["keyword"][0][0]].chunk.search_text)
    policy = fusion.FusionPolicy(
        k=vc.fusion_rrf_k,
        normalized=vc.fusion_normalized,
        anchor_share_factor=vc.fusion_vector_share_factor,
    )
    outcome = fusion.fuse(lists, weights, quality=quality, policy=policy)
    vector_scores = [s for _, s in lists.get("vector", [])]
    max_raw = max(vector_scores) if vector_scores else None
    confident = fusion.confident_top(
        vector_scores, min_score=policy.anchor_min_score, margin=policy.anchor_margin
    )

    order = [item.id for item in outcome.items]
    top = outcome.items[0].score if outcome.items and outcome.items[0].score > 0 else 1.0
    scores = [item.score / top for item in outcome.items]
    dates = [event_time(cands[c].chunk.occurred_at, cands[c].chunk.source_timestamp) for c in order]
    scores, boosted = apply_window_boost(
        scores, dates, date_windows(understanding), boost=vc.temporal_window_boost
    )
    rel = dict(zip(order, scores, strict=True))
    order.sort(key=lambda c: -rel[c])  # stable: equal scores keep the fused order
    return Ranked(
        order=order,
        rel=rel,
        outcome=outcome,
        policy=policy,
        base_weights=weights,
        quality=quality,
        max_raw_vector_score=max_raw,
        vector_confident=confident,
        window_boosted=boosted,
    )


def graph_fusion_quality(quality: float, decision: RoutingDecision, vc: VectorCypherConfig) -> float:
    """The graph channel's evidence quality as fusion weighs it.

    A question routed COMPLEX only because it names two or more things ("What did Maria
    say about the waterfall in Oregon?") asks about those things, not about a path between
    them: the graph may add chunks, but at most ``graph_quality_without_hop_wording`` of its
    weight, so its list does not push the vector channel's best hits out. Multi-hop or
    comparison wording ("the country where ...", "which came first") keeps the full quality.
    """
    worded = any(r.startswith(("multi_hop", "comparison", "relationship")) for r in decision.reasons)
    if decision.complexity is QueryComplexity.COMPLEX and not worded:
        return min(quality, vc.graph_quality_without_hop_wording)
    return quality


def date_windows(understanding: QueryUnderstanding) -> list[Any]:
    """The dated windows the question asks about ("in March 2023"): the soft boost's targets."""
    return [r for r in understanding.temporal_refs if r.kind != "recency"]


def lone_vector_pool(
    channels: Sequence[str],
    *,
    pool: int,
    limit: int,
    understanding: QueryUnderstanding,
    hyde: bool,
    time_window: object | None,
) -> int:
    """How many hits to ask the vector channel for.

    When it is the only list (VECTOR mode, or HYBRID routed without the graph; no HyDE)
    and no date window can lift a hit from deep in it, fusion keeps its order and no stage
    after fusion looks past the top ``max(2 * limit, 20)``: MMR and recency take
    ``max(2n, 10)``, the cross-encoder ``max(2n, 20)``, the LLM reranker 20, with
    ``n <= limit``. Fetching the whole ``pool`` (50) would only convert rows nobody reads:
    VECTOR recall on PostgreSQL over 11,763 passages took 25.9 ms p50 instead of 29.1
    (interleaved, identical results for 400 questions). The deprecated time window drops
    hits after the search, so it keeps the whole pool.
    """
    if list(channels) != ["vector"] or hyde or time_window is not None or date_windows(understanding):
        return pool
    return min(pool, max(2 * limit, 20))


def recency_head(
    ranked: Ranked,
    cands: dict[str, Candidate],
    *,
    n: int,
    understanding: QueryUnderstanding,
    vc: VectorCypherConfig,
    qc: QueryConfig,
) -> None:
    """Recency over the head of the list, in place, for questions that ask for recent things.

    The head is the top ``max(2n, 10)`` candidates, and recency is measured from the newest
    date among them (the spec's "result set"). Only the head is reordered, blending recency
    with a flat positional relevance (``61 / (60 + position)``): over the whole candidate
    pool such a blend would let any recent but unrelated chunk overtake the relevant ones.
    Recency orders the relevant results; it does not pull in irrelevant ones.
    """
    if not (qc.apply_recency_bias and vc.temporal_recency_weight > 0 and understanding.wants_recency):
        return
    head = ranked.order[: max(2 * n, 10)]
    dates = [event_time(cands[c].chunk.occurred_at, cands[c].chunk.source_timestamp) for c in head]
    rec = recency_scores(
        dates, decay_days=vc.temporal_recency_decay_days, decay_type=vc.temporal_recency_decay_type
    )
    # Relevance by position on the flat RRF scale (k = 60), not the fused scores: how far
    # recency may move an item must not depend on ``fusion_rrf_k`` (a small k makes fused
    # scores steep, and recency would then never reorder anything).
    k = fusion.DEFAULT_RRF_K
    flat = [(k + 1) / (k + pos) for pos in range(1, len(head) + 1)]
    boosted = apply_recency(flat, rec, weight=vc.temporal_recency_weight)
    new_head = [head[i] for i in sorted(range(len(head)), key=lambda i: -boosted[i])]
    # the head keeps its relevance values, in its new order
    ranked.rel.update(zip(new_head, sorted((ranked.rel[c] for c in head), reverse=True), strict=True))
    ranked.order[: len(head)] = new_head
    ranked.recency_applied = True


def mmr_window(ranked: Ranked, n: int) -> list[str]:
    """The head of the ranking MMR chooses from: ``max(2n, 10)`` items."""
    return ranked.order[: max(2 * n, 10)]


async def fill_embeddings(
    stack: Any, namespace_id: str, ranked: Ranked, cands: dict[str, Candidate], *, n: int
) -> None:
    """Give MMR the stored embeddings of graph and keyword hits, which arrive without them."""
    missing = [c for c in mmr_window(ranked, n) if cands[c].chunk.embedding is None]
    if not missing:
        return
    found = await stack.vectors.embeddings(namespace_id, missing)
    for cid, emb in found.items():
        cands[cid].chunk = cands[cid].chunk.model_copy(update={"embedding": emb})


async def diversify_and_rerank(
    query: str,
    ranked: Ranked,
    cands: dict[str, Candidate],
    *,
    n: int,
    qc: QueryConfig,
    llm: LLMClient | None,
    is_temporal: bool,
) -> tuple[dict[str, float], dict[str, Any], dict[str, Any]]:
    """MMR over the head of the list, then optional reranking; reorders ``ranked`` in place.

    MMR picks ``n`` items from the top ``max(2n, 10)`` (its usual fetch-k window: reaching
    deeper would trade relevance for diversity the caller never sees).

    Returns:
        Cross-encoder scores by chunk id, the MMR report and the rerank report.
    """
    order, rel = ranked.order, ranked.rel
    mmr_info: dict[str, Any] = {"applied": False}
    if qc.enable_diversity and len(order) > 1:
        window = mmr_window(ranked, n)
        embs = [cands[c].chunk.embedding for c in window]
        if all(e is not None for e in embs):
            perm = mmr_order(
                [rel[c] for c in window],
                embs,  # type: ignore[arg-type]
                lambda_=qc.diversity_lambda,
                k=n,
                duplicate_floor=qc.diversity_duplicate_floor,
            )
            order[: len(window)] = [window[i] for i in perm]
            mmr_info = {
                "applied": True,
                "lambda": qc.diversity_lambda,
                "duplicate_floor": qc.diversity_duplicate_floor,
                "pool": len(window),
            }
        else:
            mmr_info["note"] = "skipped: the store returned chunks without embeddings"

    rerank_scores: dict[str, float] = {}
    rerank_info: dict[str, Any] = {"cross_encoder": False, "llm": False}
    if qc.enable_reranking and len(order) >= rerank.MIN_RERANK:
        head = order[: max(2 * n, 20)]
        scores = await rerank.cross_encoder_scores(
            query, [cands[c].chunk.content for c in head], model_name=qc.reranker_model
        )
        if scores is not None:
            rerank_scores = dict(zip(head, scores, strict=True))
            order[: len(head)] = sorted(head, key=lambda c: -rerank_scores[c])
            lo, hi = min(scores), max(scores)
            for c in head:  # reranked scores on the relevance scale, top 1.0
                rel[c] = 1.0 if hi - lo < 1e-12 else 0.05 + 0.95 * (rerank_scores[c] - lo) / (hi - lo)
            rerank_info.update(cross_encoder=True, model=qc.reranker_model, reranked=len(head))
    if qc.enable_llm_reranking and is_temporal and llm is not None and len(order) > 1:
        head = order[:20]
        llm_order = await rerank.llm_rerank(query, [cands[c].chunk.content for c in head], llm)
        if llm_order is not None:
            order[: len(head)] = [head[i] for i in llm_order]
            rerank_info["llm"] = True
    return rerank_scores, mmr_info, rerank_info
