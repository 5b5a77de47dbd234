"""``RecallPipeline``: the read path, one small stage after another.

understand -> route -> embed -> link entities -> channels in parallel (each pushes the
filter down and reports it) -> defensive filter re-check -> deprecated time window -> fuse ->
date-window boost -> limit decision -> recency over the head -> MMR -> rerank -> limit ->
entities, relationships and documents -> abstention -> ``RecallResult``.

Scores: fused RRF scores are divided by the best one (relevance in (0, 1]), boosted, and
reordered; the returned ``chunk.score`` is made non-increasing down the list and divided by
the first, so the top hit is 1.0. It is a rank within this result, not a confidence: read
``engine_info["max_raw_vector_score"]`` and ``engine_info["abstention_signals"]`` for that.

The question is embedded while it is understood and routed; linking looks its mentions up
by name meanwhile and embeds only those no name matched (``retrieval.linking``).

Reference ``now`` for relative dates: the caller's ``now``, else the newest ``occurred_at`` in
the namespace, else the wall clock; ``engine_info["temporal"]["reference_source"]`` says which.

Recency is applied only when the question asks for recent information ("latest", "last
week"): evergreen lookups are not reordered by date. Dates in the question are a soft boost
(``temporal_window_boost``), never a gate; use ``filter=`` for hard time bounds.
"""

from __future__ import annotations

import asyncio
import functools
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from khora_core.config import KhoraConfig
from khora_core.embedding.base import Embedder
from khora_core.errors import InvalidInputError
from khora_core.models import RecallResult, SearchMode
from khora_core.retrieval import ranking
from khora_core.retrieval.abstention import abstention_signals
from khora_core.retrieval.assemble import assemble, project_chunks
from khora_core.retrieval.channels import (
    ChannelResult,
    keyword_channel,
    run_channels,
    select_channels,
    vector_channel,
)
from khora_core.retrieval.chunk_counts import ChunkCounts
from khora_core.retrieval.graph_channel import graph_channel
from khora_core.retrieval.hyde import hypothetical_passage, should_use_hyde
from khora_core.retrieval.limits import decide_limit
from khora_core.retrieval.linking import LinkedEntity, link_entities
from khora_core.retrieval.pushdown import pushdown_report
from khora_core.retrieval.router import route
from khora_core.retrieval.understand import understand
from khora_core.storage.protocols import EntityHit, StorageStack

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter
    from khora_core.llm.client import LLMClient

__all__ = ["RecallPipeline"]

_T = TypeVar("_T")


def _aware(dt: datetime) -> datetime:
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000.0, 2)


class RecallPipeline:
    """The read path over one storage stack.

    Args:
        stack: an opened storage stack.
        embedder: embeds the question (and entity mentions for linking).
        config: ``config.query`` toggles and ``config.vectorcypher`` engine knobs.
        llm: optional; enables LLM understanding, HyDE and LLM reranking.
    """

    def __init__(
        self, *, stack: StorageStack, embedder: Embedder, config: KhoraConfig, llm: LLMClient | None = None
    ) -> None:
        self.stack = stack
        self.embedder = embedder
        self.config = config
        self.llm = llm
        #: Namespace chunk counts for the graph channel; writers call ``invalidate``.
        self.chunk_counts = ChunkCounts(stack.documents)

    async def _reference_now(self, namespace_id: str, now: datetime | None) -> tuple[datetime, str]:
        if now is not None:
            return _aware(now), "explicit"
        newest = await self.stack.documents.newest_occurred_at(namespace_id)
        if newest is not None:
            return _aware(newest), "newest_occurred_at"
        return datetime.now(timezone.utc), "wall_clock"

    async def _hyde(
        self, query: str, namespace_id: str, *, limit: int, min_similarity: float, filter: RecallFilter | None
    ) -> ChannelResult:
        started = time.perf_counter()
        passage = await hypothetical_passage(query, self.llm) if self.llm is not None else None
        if passage is None:
            return ChannelResult("hyde", elapsed_ms=_ms(started), info={"skipped": "llm_failed"})
        vector = await self.embedder.embed_query(passage)
        result = await vector_channel(
            self.stack,
            namespace_id,
            vector,
            limit=limit,
            min_similarity=min_similarity,
            filter=filter,
            name="hyde",
        )
        result.elapsed_ms = _ms(started)
        result.info["passage"] = passage[:200]
        return result

    async def recall(
        self,
        query: str,
        *,
        namespace_id: str,
        limit: int = 10,
        mode: SearchMode | str = SearchMode.HYBRID,
        min_similarity: float = 0.0,
        filter: RecallFilter | dict[str, Any] | None = None,
        time_window: tuple[datetime | None, datetime | None] | None = None,
        now: datetime | None = None,
    ) -> RecallResult:
        """Answer ``query`` from ``namespace_id``. See ``Khora.recall`` for the arguments.

        Raises:
            RecallFilterValidationError: a malformed filter dict.
            InvalidInputError: ``filter`` combined with ``time_window`` (also a ValueError).
        """
        started = time.perf_counter()
        # Each timing is how long recall() waited at that stage; work that overlaps an
        # earlier stage (linking starts while the question is embedded) is not counted twice.
        timings: dict[str, float] = {}
        qc, vc = self.config.query, self.config.vectorcypher
        if isinstance(query, str) and len(query) > qc.max_question_chars:
            raise InvalidInputError(
                f"The question is {len(query):,} characters long; recall takes at most "
                f"{qc.max_question_chars:,} (QueryConfig.max_question_chars, KHORA_QUERY_MAX_QUESTION_CHARS). "
                "Put long context in remember() and ask a short question."
            )
        mode = SearchMode(mode)
        f = _parse_filter(filter)
        if f is not None and time_window is not None:
            raise InvalidInputError(
                "filter= cannot be combined with the deprecated start/end time window; "
                'use filter={"occurred_at": {"$gte": start, "$lt": end}}'
            )

        # 1-2. understand and route while the question is embedded (every mode but
        # KEYWORD needs its vector)
        t = time.perf_counter()
        qvec_task: asyncio.Future[Any] | None = None
        if mode is not SearchMode.KEYWORD:
            qvec_task = asyncio.ensure_future(self.embedder.embed_query(query))
        started_tasks: list[asyncio.Future[Any]] = [qvec_task] if qvec_task is not None else []
        try:
            ref_now, ref_source = await self._reference_now(namespace_id, now)
            u = await understand(query, llm=self.llm, use_llm=vc.routing_use_llm, now=ref_now)
            llm_route = u.source == "llm"
            decision = route(
                query,
                vc,
                entity_mentions=u.entity_mentions,
                max_graph_depth=qc.max_graph_depth,
                complexity=u.complexity if llm_route else None,
                reasons=u.complexity_reasons if llm_route else (),
                weights=u.fusion_weights,
            )
            names = select_channels(mode, decision, enable_bm25=qc.enable_bm25_channel)
            hyde_on = "vector" in names and should_use_hyde(
                qc.enable_hyde,
                complexity=decision.complexity,
                is_temporal=u.is_temporal,
                has_llm=self.llm is not None,
            )
            timings["understand_ms"] = _ms(t)
            pool = max(qc.candidate_pool, limit) * (2 if time_window is not None else 1)
            vector_pool = ranking.lone_vector_pool(
                names, pool=pool, limit=limit, understanding=u, hyde=hyde_on, time_window=time_window
            )
            keyword_task: asyncio.Task[ChannelResult] | None = None
            if "keyword" in names:  # needs nothing else: starts now
                keyword_task = asyncio.ensure_future(
                    keyword_channel(self.stack, namespace_id, query, limit=pool, filter=f)
                )
                started_tasks.append(keyword_task)

            # 3. link the question's entities: the lookup by name starts now, while the
            # question is still being embedded
            link_task: asyncio.Task[Any] | None = None
            if "graph" in names:
                link_task = asyncio.ensure_future(
                    link_entities(
                        self.stack.graph,
                        namespace_id,
                        u.entity_mentions,
                        embedder=self.embedder,
                        min_similarity=vc.retriever_min_entity_similarity,
                        query_vector=_shielded(qvec_task) if qvec_task is not None else None,
                        query_limit=decision.entry_entities,
                    )
                )
                started_tasks.append(link_task)

            # 4. the question's vector; the vector channel starts as soon as it is there
            t = time.perf_counter()
            qvec = await qvec_task if qvec_task is not None else None
            timings["embed_ms"] = _ms(t)
            vector_task: asyncio.Task[ChannelResult] | None = None
            if "vector" in names and qvec is not None:
                vector_task = asyncio.ensure_future(
                    vector_channel(
                        self.stack,
                        namespace_id,
                        qvec,
                        limit=vector_pool,
                        min_similarity=min_similarity,
                        filter=f,
                    )
                )
                started_tasks.append(vector_task)

            # linking finishes while the vector channel runs
            t = time.perf_counter()
            linked: list[LinkedEntity] = []
            nearest: list[EntityHit] | None = None
            if link_task is not None:
                linking = await link_task
                linked = list(linking.links)
                nearest = list(linking.nearest) if qvec is not None else None
            timings["link_ms"] = _ms(t)
        except BaseException:
            for task in started_tasks:
                task.cancel()
            await asyncio.gather(*started_tasks, return_exceptions=True)
            raise

        # 5. the other channels, in parallel with those already running (the graph
        # channel's passage seeds are the vector channel's first hits when both run with
        # the same filter: one search, not two)
        t = time.perf_counter()
        calls: dict[str, Any] = {}
        if vector_task is not None:
            calls["vector"] = vector_task
        if "graph" in names:
            calls["graph"] = graph_channel(
                self.stack,
                namespace_id,
                qvec,
                linked=linked,
                decision=decision,
                config=vc,
                limit=pool,
                # Beside another channel, the graph nominates only as many chunks as the
                # recall returns (graph_channel module docstring, "Nominations").
                nominate=decide_limit(limit, decision.complexity, adaptive_limit=qc.adaptive_limit).count
                if len(names) > 1
                else None,
                filter=f,
                temporal_sort=u.wants_recency,
                entry_hits=nearest,
                passages=_shielded(vector_task) if vector_task is not None and min_similarity <= 0 else None,
                chunk_count=functools.partial(self.chunk_counts.get, namespace_id),
            )
        if keyword_task is not None:
            calls["keyword"] = keyword_task
        hyde_on = hyde_on and "vector" in calls
        if hyde_on:
            calls["hyde"] = self._hyde(
                query, namespace_id, limit=pool, min_similarity=min_similarity, filter=f
            )
        results = await run_channels(calls)
        timings["channels_ms"] = _ms(t)

        # 6-8. candidates, defensive filter re-check, deprecated window, fusion, boosts
        t = time.perf_counter()
        cands, dropped_by_filter, dropped_by_window = ranking.gate(ranking.collect(results), f, time_window)
        ranked = ranking.fuse_and_boost(
            query, results, cands, decision=decision, understanding=u, vc=vc, qc=qc
        )
        timings["fuse_ms"] = _ms(t)

        # 9. limit decision, recency, MMR, rerank
        t = time.perf_counter()
        decided = decide_limit(
            limit, decision.complexity, adaptive_limit=qc.adaptive_limit, confident=ranked.vector_confident
        )
        n = decided.count
        ranking.recency_head(ranked, cands, n=n, understanding=u, vc=vc, qc=qc)
        if qc.enable_diversity:
            await ranking.fill_embeddings(self.stack, namespace_id, ranked, cands, n=n)
        rerank_scores, mmr_info, rerank_info = await ranking.diversify_and_rerank(
            query, ranked, cands, n=n, qc=qc, llm=self.llm, is_temporal=u.is_temporal
        )
        order, rel, quality, max_raw = ranked.order, ranked.rel, ranked.quality, ranked.max_raw_vector_score
        timings["rerank_ms"] = _ms(t)

        # 10. limit, assemble
        t = time.perf_counter()
        final = order[:n]
        link_scores = {link.entity.id: link.score for link in linked}
        built = await assemble(
            self.stack,
            namespace_id,
            [cands[c].chunk for c in final],
            entity_scores=link_scores,
            max_entities=vc.retriever_max_entities,
            per_pair=vc.retriever_relationships_per_pair,
        )
        final = [c for c in final if cands[c].chunk.document_id in built.documents]
        chunks = project_chunks(final, cands, rel, rerank_scores, built.chunk_entities, qvec)
        timings["assemble_ms"] = _ms(t)

        # 11. abstention and engine_info
        other = max(
            [link.score for link in linked if link.match in ("exact", "fuzzy")]
            + [quality.get("keyword", 0.0)],
            default=0.0,
        )
        signals = abstention_signals(
            n_chunks=len(chunks),
            n_entities=len(built.entities),
            max_raw_vector_score=max_raw,
            min_chunks=qc.abstain_min_chunks,
            min_top_score=qc.abstain_min_top_score,
            threshold=qc.abstain_threshold,
            other_evidence=other,
        )
        report = pushdown_report(
            f,
            {k: (r.pushed_keys, r.post_filtered_keys) for k, r in results.items()},
            defensive_recheck=True,
        )
        timings["total_ms"] = _ms(started)
        engine_info: dict[str, Any] = {
            "engine": "vectorcypher",
            "stack": getattr(self.stack, "name", None),
            "mode": mode.value,
            "routing": {**decision.as_dict(), "channels": names},
            "understanding": u.as_dict(),
            "linked_entities": [link.as_dict() for link in linked],
            "channels": {
                k: {**r.summary(), "pushed_keys": r.pushed_keys, "post_filtered_keys": r.post_filtered_keys}
                for k, r in results.items()
            },
            "fusion": {
                "method": "weighted_rrf_normalized" if ranked.policy.normalized else "weighted_rrf",
                "k": ranked.policy.k,
                "base_weights": ranked.base_weights,
                "weights": ranked.outcome.weights,
                "quality": quality,
                "anchored_top": ranked.outcome.anchored,
                "vector_share": (
                    None if ranked.outcome.anchor_share is None else round(ranked.outcome.anchor_share, 4)
                ),
                "vector_hits_kept_up": ranked.outcome.moved_up,
            },
            "timings": timings,
            "max_raw_vector_score": max_raw,
            "temporal": {
                "refs": [r.as_dict() for r in u.temporal_refs],
                "reference_now": ref_now.isoformat(),
                "reference_source": ref_source,
                "window_boost": vc.temporal_window_boost,
                "window_boosted_chunks": ranked.window_boosted,
                "recency_applied": ranked.recency_applied,
                "graph_temporal_sort": bool("graph" in results and u.wants_recency),
                "how_used": [
                    use
                    for use, on in (
                        ("window_boost", ranked.window_boosted > 0),
                        ("recency", ranked.recency_applied),
                        ("graph_temporal_sort", "graph" in results and u.wants_recency),
                        ("hyde", hyde_on and u.is_temporal),
                    )
                    if on
                ],
            },
            "filter": report,
            "filter_dropped": dropped_by_filter,
            "time_window": None
            if time_window is None
            else {
                "start": time_window[0].isoformat() if time_window[0] else None,
                "end": time_window[1].isoformat() if time_window[1] else None,
                "axis": "COALESCE(source_timestamp, created_at)",
                "dropped": dropped_by_window,
            },
            "hyde": {
                "applied": hyde_on and bool(results.get("hyde") and results["hyde"].hits),
                "setting": qc.enable_hyde,
            },
            "mmr": mmr_info,
            "rerank": rerank_info,
            "candidates": len(cands),
            "limit_applied": n,
            "returned": len(chunks),
            "limit_decision": decided.as_dict(),
            "abstention_signals": signals.as_dict(),
        }
        return RecallResult(
            query=query,
            namespace_id=namespace_id,
            chunks=chunks,
            entities=built.entities,
            relationships=built.relationships,
            documents=list(built.documents.values()),
            engine_info=engine_info,
        )


async def _shielded(task: asyncio.Future[_T]) -> _T:
    """Await a shared task without cancelling it for its other waiter."""
    return await asyncio.shield(task)


def _parse_filter(obj: Any) -> RecallFilter | None:
    if obj is None:
        return None
    try:
        from khora_core.filters import RecallFilter
    except ImportError:  # the package re-export is optional; the class lives in ast.py
        from khora_core.filters.ast import RecallFilter
    return RecallFilter.parse(obj)
