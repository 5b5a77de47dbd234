"""The ranking stages between channels and limit, on chunks built in memory."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from khora_core.config import QueryConfig, VectorCypherConfig
from khora_core.filters import RecallFilter
from khora_core.models import Chunk, ChunkHit
from khora_core.retrieval import ranking
from khora_core.retrieval.channels import ChannelResult
from khora_core.retrieval.router import QueryComplexity, route
from khora_core.retrieval.understand import heuristic_understanding

T0 = datetime(2024, 6, 1, tzinfo=timezone.utc)
VC = VectorCypherConfig()
QC = QueryConfig()


def chunk(cid: str, *, days_old: int = 0, source_name: str = "press") -> Chunk:
    return Chunk(
        id=cid,
        namespace_id="ns",
        document_id=f"d-{cid}",
        index=0,
        content=f"text {cid}",
        start_char=0,
        end_char=5,
        created_at=T0,
        occurred_at=T0 - timedelta(days=days_old),
        source_name=source_name,
    )


def channel(name: str, chunks: list[Chunk], scores: list[float]) -> ChannelResult:
    hits = [
        ChunkHit(chunk=c, score=s, rank=i) for i, (c, s) in enumerate(zip(chunks, scores, strict=True), 1)
    ]
    return ChannelResult(name=name, hits=hits)


def test_collect_keeps_each_channels_score_and_rank() -> None:
    a, b = chunk("a"), chunk("b")
    cands = ranking.collect(
        {"vector": channel("vector", [a, b], [0.9, 0.5]), "graph": channel("graph", [b], [2.0])}
    )
    assert cands["b"].scores == {"vector": 0.5, "graph": 2.0}
    assert cands["b"].ranks == {"vector": 2, "graph": 1}


def test_gate_rechecks_filter_and_window() -> None:
    cands = ranking.collect(
        {"vector": channel("vector", [chunk("a"), chunk("b", source_name="linear")], [0.9, 0.8])}
    )
    kept, dropped, _ = ranking.gate(cands, RecallFilter.parse({"source_name": "linear"}), None)
    assert list(kept) == ["b"] and dropped == 1
    kept, _, dropped_w = ranking.gate(cands, None, (T0, T0))  # inclusive on both ends (created_at)
    assert len(kept) == 2 and dropped_w == 0
    kept, _, dropped_w = ranking.gate(cands, None, (T0 + timedelta(seconds=1), None))
    assert kept == {} and dropped_w == 2


def _ranked(
    query: str, chunks: list[Chunk], scores: list[float]
) -> tuple[ranking.Ranked, dict[str, ranking.Candidate]]:
    results = {"vector": channel("vector", chunks, scores)}
    cands = ranking.collect(results)
    u = heuristic_understanding(query, now=T0)
    d = route(query, VC, complexity=QueryComplexity.SIMPLE)
    return ranking.fuse_and_boost(query, results, cands, decision=d, understanding=u, vc=VC, qc=QC), cands


def test_relevance_top_is_one_and_raw_score_kept() -> None:
    ranked, _ = _ranked("what is a", [chunk("a"), chunk("b")], [0.7, 0.6])
    assert ranked.order == ["a", "b"] and ranked.rel["a"] == 1.0
    assert ranked.max_raw_vector_score == 0.7 and ranked.vector_confident


def test_recency_only_for_recent_questions_and_only_in_the_head() -> None:
    # 12 relevant-ish chunks, older first; one brand-new chunk far down the list.
    chunks = [chunk(f"c{i}", days_old=400 - 30 * i) for i in range(12)] + [chunk("new", days_old=0)]
    scores = [0.8 - 0.01 * i for i in range(12)] + [0.3]
    ranked, cands = _ranked("What is the status?", chunks, scores)
    ranking.recency_head(
        ranked, cands, n=3, understanding=heuristic_understanding("What is the status?", now=T0), vc=VC, qc=QC
    )
    assert not ranked.recency_applied and ranked.order[0] == "c0"

    q = "What is the latest status?"
    ranked, cands = _ranked(q, chunks, scores)
    ranking.recency_head(ranked, cands, n=3, understanding=heuristic_understanding(q, now=T0), vc=VC, qc=QC)
    assert ranked.recency_applied
    head = ranked.order[:10]
    # the newest chunk of the head (c9) now leads; the unrelated new chunk stays out of the head
    assert head[0] == "c9"
    assert "new" not in head


def test_window_boost_lifts_chunks_dated_inside() -> None:
    chunks = [chunk("old", days_old=800), chunk("in_q1", days_old=100)]  # T0-100d = 2024-02-22
    ranked, _ = _ranked("What happened in Q1 2024?", chunks, [0.6, 0.58])
    assert ranked.window_boosted == 1
    assert ranked.order[0] == "in_q1"


def test_a_lone_vector_list_is_fetched_only_as_deep_as_the_later_stages_reach() -> None:
    now = T0
    plain = heuristic_understanding("Who founded Northwind Robotics?", now=now)
    dated = heuristic_understanding("What did Maya say in March 2024?", now=now)
    recent = heuristic_understanding("What is the latest news about Northwind?", now=now)
    assert ranking.date_windows(dated) and not ranking.date_windows(plain)

    def pool(channels: list[str], u=plain, *, limit: int = 10, hyde: bool = False, window=None) -> int:
        return ranking.lone_vector_pool(
            channels, pool=50, limit=limit, understanding=u, hyde=hyde, time_window=window
        )

    assert pool(["vector"]) == 20  # max(2 * limit, 20)
    assert pool(["vector"], limit=3) == 20  # the cross-encoder's and LLM reranker's 20
    assert pool(["vector"], limit=15) == 30
    assert pool(["vector"], limit=40) == 50  # never more than the pool
    assert pool(["vector"], recent) == 20  # recency reorders only the head
    # Another list to fuse with, HyDE's, a date window that may lift any hit, or the
    # deprecated window that drops hits after the search: the whole pool.
    assert pool(["vector", "graph"]) == 50
    assert pool(["vector", "keyword"]) == 50
    assert pool(["vector"], hyde=True) == 50
    assert pool(["vector"], dated) == 50
    assert pool(["vector"], window=(T0, None)) == 50


def test_graph_quality_is_capped_for_questions_that_only_name_things() -> None:
    """COMPLEX only by naming two things: the graph's quality is capped; multi-hop or
    comparison wording keeps it whole; the cap is a setting (1.0 turns it off)."""
    from khora_core.config import VectorCypherConfig
    from khora_core.retrieval.ranking import graph_fusion_quality
    from khora_core.retrieval.router import QueryComplexity, route

    vc = VectorCypherConfig()
    named = route("What did Maria say about Oregon?", vc, entity_mentions=["Maria", "Oregon"])
    worded = route("Which river runs through the city where Maria was born?", vc, entity_mentions=["Maria"])
    assert named.complexity is worded.complexity is QueryComplexity.COMPLEX
    assert graph_fusion_quality(0.9, named, vc) == vc.graph_quality_without_hop_wording < 0.9
    assert graph_fusion_quality(0.3, named, vc) == 0.3
    assert graph_fusion_quality(0.9, worded, vc) == 0.9
    off = VectorCypherConfig(graph_quality_without_hop_wording=1.0)
    assert graph_fusion_quality(0.9, named, off) == 0.9
