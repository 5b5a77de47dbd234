"""LoCoMo memory benchmark: turn-level evidence recall@5/10/15 and recall latency.

    python -m benchmarks.locomo [--stack sqlite_lance|postgres|all] [--mode hybrid] [--preset default|sharp]

Each dialogue turn of the development split (``shared/data/locomo/dev``) is remembered as
one document in its conversation's namespace (``occurred_at`` = the session date, the
speaker in metadata, the image caption appended as ``[shares ...]``). Every question of
categories 1-4 with resolvable evidence is recalled against its own conversation;
``recall@k = |E ∩ R_k| / |E|`` averaged per category and overall (the official scoring,
see the data README). Latency is the ``recall()`` call alone, query embedding included.
The same questions are scored against two plain baselines over each conversation's turn
texts, per category: cosine top-k (the same embedder) and Okapi BM25 (``k1 = 1.2``,
``b = 0.75``, lower-cased word tokens). Reference points from the issue: cosine top-k
recall@10 0.49, BM25 0.52; DRAGON
recall@5 56.7 / @10 66.2; DeytaHQ khora recall@15 0.859 at a mean 363 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import math
import re
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone

import numpy as np

from benchmarks._common import (
    DATA,
    STACK_CHOICES,
    CachedEmbedder,
    pct,
    preset_sections,
    print_table,
    read_jsonl,
    stack_configs,
)
from khora_core import Khora, SearchMode

KS = (5, 10, 15)


def _normalizer():  # the data set's own evidence-id repair
    spec = importlib.util.spec_from_file_location("locomo_check", DATA / "locomo" / "check.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = mod  # its dataclasses look their module up while being built
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.normalize_evidence_id


def turn_text(t: dict) -> str:
    text = f"{t['speaker']}: {t['text']}"
    if t.get("blip_caption"):
        text += f" [shares {t['blip_caption']}]"
    return text


def questions(turns: list[dict], max_questions: int | None) -> list[tuple[dict, set[str]]]:
    """Questions of categories 1-4 with their resolvable evidence turns (unresolvable
    evidence is dropped, not scored 0: data README)."""
    normalize = _normalizer()
    valid_ids = {(t["conv_id"], t["dia_id"]) for t in turns}
    out: list[tuple[dict, set[str]]] = []
    for q in read_jsonl(DATA / "locomo" / "dev" / "qa.jsonl"):
        if q["category"] not in (1, 2, 3, 4):
            continue
        evidence = {
            fixed
            for raw in q["evidence"]
            for fixed in normalize(str(raw))
            if (q["conv_id"], fixed) in valid_ids
        }
        if evidence:
            out.append((q, evidence))
    return out[:max_questions]


class Scores:
    """recall@5/10/15 sums per category."""

    def __init__(self) -> None:
        self.sums: dict[int, list[float]] = defaultdict(lambda: [0.0] * len(KS))
        self.counts: dict[int, int] = defaultdict(int)

    def add(self, category: int, evidence: set[str], ranked: list[str]) -> None:
        for i, k in enumerate(KS):
            self.sums[category][i] += len(evidence & set(ranked[:k])) / len(evidence)
        self.counts[category] += 1

    def by_category(self) -> dict[str, list[float]]:
        """``{"cat N": [R@5, R@10, R@15], ..., "overall 1-4": [...]}``."""
        out = {f"cat {c}": [s / self.counts[c] for s in self.sums[c]] for c in sorted(self.counts)}
        n = sum(self.counts.values())
        out["overall 1-4"] = [sum(self.sums[c][i] for c in self.counts) / n for i in range(len(KS))]
        return out


_WORD = re.compile(r"\w+")


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def bm25_rank(query: str, docs: list[list[str]], *, k1: float = 1.2, b: float = 0.75) -> list[int]:
    """Okapi BM25 over pre-tokenised documents (the plain baseline): indices, best first."""
    n = len(docs)
    avg = sum(len(d) for d in docs) / max(1, n)
    df: Counter[str] = Counter(t for d in docs for t in set(d))
    terms = set(_tokens(query))
    scores = []
    for d in docs:
        tf = Counter(d)
        score = 0.0
        for t in terms:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
        scores.append(score)
    return sorted(range(n), key=lambda i: -scores[i])


async def plain_baselines(
    embedder: CachedEmbedder, turns: list[dict], asked: list[tuple[dict, set[str]]]
) -> dict[str, Scores]:
    """Cosine top-k and BM25 over each conversation's turns (same texts, same embedder)."""
    by_conv: dict[str, list[dict]] = defaultdict(list)
    for t in turns:
        by_conv[t["conv_id"]].append(t)
    vectors = {}
    tokens = {}
    for conv_id, conv_turns in by_conv.items():
        texts = [turn_text(t) for t in conv_turns]
        matrix = np.asarray(await embedder.embed_documents(texts), dtype=np.float32)
        vectors[conv_id] = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        tokens[conv_id] = [_tokens(x) for x in texts]
    cosine, bm25 = Scores(), Scores()
    for q, evidence in asked:
        conv_turns = by_conv[q["conv_id"]]
        qv = np.asarray(await embedder.embed_query(q["question"]), dtype=np.float32)
        order = np.argsort(-(vectors[q["conv_id"]] @ qv), kind="stable")[: max(KS)]
        cosine.add(q["category"], evidence, [conv_turns[i]["dia_id"] for i in order])
        top = bm25_rank(q["question"], tokens[q["conv_id"]])[: max(KS)]
        bm25.add(q["category"], evidence, [conv_turns[i]["dia_id"] for i in top])
    return {"cosine top-k": cosine, "BM25": bm25}


async def run(kb: Khora, mode: SearchMode, asked: list[tuple[dict, set[str]]], turns: list[dict]) -> Scores:
    by_conv: dict[str, list[dict]] = defaultdict(list)
    for t in turns:
        by_conv[t["conv_id"]].append(t)
    namespaces: dict[str, str] = {}
    t0 = time.perf_counter()
    for conv_id, conv_turns in by_conv.items():
        ns = (await kb.create_namespace(f"locomo-{conv_id}")).namespace_id
        namespaces[conv_id] = ns
        await kb.remember_batch(
            [
                {
                    "content": turn_text(t),
                    "external_id": f"{conv_id}:{t['dia_id']}",
                    "occurred_at": datetime.fromisoformat(t["occurred_at"]).replace(tzinfo=timezone.utc),
                    "metadata": {"speaker": t["speaker"], "dia_id": t["dia_id"], "session": t["session"]},
                    "source_type": "dialogue",
                }
                for t in conv_turns
            ],
            namespace=ns,
            progress=True,
        )
    print(f"ingested {len(turns)} turns in {time.perf_counter() - t0:.1f}s")
    scores = Scores()
    latencies: list[float] = []
    for q, evidence in asked:
        t1 = time.perf_counter()
        res = await kb.recall(q["question"], namespace=namespaces[q["conv_id"]], limit=max(KS), mode=mode)
        latencies.append((time.perf_counter() - t1) * 1000)
        ext = {d.id: d.external_id for d in res.documents}
        ranked: list[str] = []
        for c in res.chunks:
            dia = (ext.get(c.document_id) or "").split(":", 1)[-1]
            if dia and dia not in ranked:
                ranked.append(dia)
        scores.add(q["category"], evidence, ranked)
    print(
        f"\nrecall latency over {len(latencies)} queries: mean {sum(latencies) / len(latencies):.1f} ms, "
        f"p50 {pct(latencies, 50):.1f} ms, p95 {pct(latencies, 95):.1f} ms"
    )
    for ns in namespaces.values():
        await kb.delete_namespace(ns)
    return scores


def report(mode: SearchMode, khora: Scores, baselines: dict[str, Scores]) -> None:
    ours = khora.by_category()
    plain = {name: b.by_category() for name, b in baselines.items()}
    rows = []
    for cat, values in ours.items():
        n = khora.counts[int(cat[4:])] if cat.startswith("cat ") else sum(khora.counts.values())
        rows.append([cat, f"Khora {mode.value}", n, *[round(v, 3) for v in values]])
        for name, by_cat in plain.items():
            rows.append(["", name, "", *[round(v, 3) for v in by_cat[cat]]])
    print_table(
        f"LoCoMo evidence recall, mode={mode.value}, against plain baselines",
        ["category", "retriever", "questions", "R@5", "R@10", "R@15"],
        rows,
    )
    below = [
        f"{cat} (R@10 {values[1]:.3f} < {max(p[cat][1] for p in plain.values()):.3f})"
        for cat, values in ours.items()
        if values[1] < max(p[cat][1] for p in plain.values())
    ]
    print(f"\nbelow the best plain baseline at R@10: {', '.join(below) or 'none'}")


async def main_async(args: argparse.Namespace) -> None:
    embedder = CachedEmbedder()
    turns = read_jsonl(DATA / "locomo" / "dev" / "turns.jsonl")
    asked = questions(turns, args.max_questions)
    baselines = await plain_baselines(embedder, turns, asked)
    for stack, cfg in stack_configs(
        args.stack, **preset_sections(args.preset, skeleton_scope=args.skeleton_scope, adaptive_limit=False)
    ).items():
        print(f"\n# stack: {stack}, preset: {args.preset}")
        async with Khora(config=cfg, embedder=embedder) as kb:
            scores = await run(kb, SearchMode(args.mode), asked, turns)
        report(SearchMode(args.mode), scores, baselines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="sqlite_lance", choices=STACK_CHOICES)
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument("--preset", default="default", help="read-path preset (khora_core.retrieval.presets)")
    parser.add_argument(
        "--skeleton-scope",
        choices=["document", "batch"],
        default=None,
        help="VectorCypherConfig.skeleton_scope (default: the configured one)",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
