"""Recall over the shipped sample corpus, on every stack: abstention and no dilution."""

from __future__ import annotations

from typing import Any

import pytest

from khora_core import Khora, SearchMode
from khora_core.sample import load_sample_corpus, load_sample_questions, to_remember_items

pytestmark = pytest.mark.slow


@pytest.fixture
async def sample_ns(kb: Khora, namespace: str) -> str:
    results = await kb.remember_batch(to_remember_items(load_sample_corpus()), namespace=namespace)
    assert not [r for r in results if isinstance(r, Exception)]
    return namespace


def _top_external_ids(result: Any) -> list[str]:
    ext = {d.id: d.external_id for d in result.documents}
    out: list[str] = []
    for c in result.chunks:
        e = ext[c.document_id]
        if e not in out:
            out.append(e)
    return out


async def test_off_topic_abstains_and_on_topic_answers(kb: Khora, sample_ns: str) -> None:
    for q in load_sample_questions():
        res = await kb.recall(q["question"], namespace=sample_ns, filter=q.get("filter"))
        signals = res.engine_info["abstention_signals"]
        if q["kind"] == "off-topic":
            assert signals["should_abstain"], (q["question"], signals)
        else:
            assert not signals["should_abstain"], (q["question"], signals)


async def test_hybrid_never_dilutes_a_good_vector_hit(kb: Khora, sample_ns: str) -> None:
    lookups = [q for q in load_sample_questions() if q["kind"] in ("lookup", "filtered")]
    vector_first = hybrid_first = 0
    for q in lookups:
        expected = set(q["expected_external_ids"])
        v = await kb.recall(
            q["question"], namespace=sample_ns, mode=SearchMode.VECTOR, limit=5, filter=q.get("filter")
        )
        h = await kb.recall(
            q["question"], namespace=sample_ns, mode=SearchMode.HYBRID, limit=5, filter=q.get("filter")
        )
        v_ok = bool(_top_external_ids(v)[:1] and _top_external_ids(v)[0] in expected)
        h_ok = bool(_top_external_ids(h)[:1] and _top_external_ids(h)[0] in expected)
        vector_first += v_ok
        hybrid_first += h_ok
        assert h_ok or not v_ok, f"hybrid lost the vector channel's right top hit on {q['question']!r}"
    assert hybrid_first >= vector_first


async def test_a_lone_vector_list_fetched_shallow_ranks_as_the_whole_pool_would(
    kb: Khora, sample_ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VECTOR recall asks its channel for max(2 * limit, 20) hits instead of the whole
    candidate pool (``ranking.lone_vector_pool``): the same chunks, scores, entities and
    documents as when the whole pool is fetched."""
    from khora_core.retrieval import ranking

    def snapshot(res: Any) -> tuple:
        return (
            [(c.id, c.score) for c in res.chunks],
            [e.id for e in res.entities],
            sorted(d.id for d in res.documents),
            res.engine_info["abstention_signals"],
        )

    questions = [q for q in load_sample_questions() if not q.get("filter")]
    assert len(questions) >= 5
    shallow, deep, shallow_fetches = [], [], 0
    for q in questions:
        for limit in (3, 10):
            res = await kb.recall(q["question"], namespace=sample_ns, mode=SearchMode.VECTOR, limit=limit)
            shallow.append(snapshot(res))
            fetched = res.engine_info["channels"]["vector"]["count"]
            dated = [r for r in res.engine_info["temporal"]["refs"] if r["kind"] != "recency"]
            assert fetched <= (50 if dated else 20), (q["question"], fetched)
            shallow_fetches += not dated
    with monkeypatch.context() as m:
        m.setattr(ranking, "lone_vector_pool", lambda channels, *, pool, **_: pool)
        for q in questions:
            for limit in (3, 10):
                res = await kb.recall(q["question"], namespace=sample_ns, mode=SearchMode.VECTOR, limit=limit)
                deep.append(snapshot(res))
    assert shallow == deep
    assert shallow_fetches >= len(questions)
    assert any(s != d for s, d in zip(shallow[::2], shallow[1::2], strict=True))  # limit matters
