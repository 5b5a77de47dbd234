"""Multi-hop retrieval quality: Recall@2 / Recall@5 of gold passages per mode and stack.

    python -m benchmarks.multihop [--stack all|sqlite_lance|postgres] [--datasets musique,2wikimultihopqa,hotpotqa]
                                  [--preset default|sharp]

Each development set in ``shared/data/multihop/`` is remembered into its own namespace
(one passage = one document, ``title`` + text, the offline extractor), then every question
is recalled in modes VECTOR, KEYWORD, GRAPH, HYBRID and HYBRID with BM25 (``ALL``, every
channel). The adaptive chunk count is turned off so each mode returns exactly k results.
Plain baselines from the issue (same embedder, title + text): cosine R@5 61.8 / 61.2 /
76.0 and BM25 48.3 / 66.2 / 79.0 on MuSiQue / 2Wiki / HotpotQA.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from benchmarks._common import (
    DATA,
    STACK_CHOICES,
    CachedEmbedder,
    preset_sections,
    print_table,
    read_jsonl,
    stack_configs,
)
from khora_core import Khora, SearchMode

DATASETS = ["musique", "2wikimultihopqa", "hotpotqa"]
BASELINE_R5 = {"musique": (61.8, 48.3), "2wikimultihopqa": (61.2, 66.2), "hotpotqa": (76.0, 79.0)}
MODES = [
    ("VECTOR", SearchMode.VECTOR),
    ("KEYWORD", SearchMode.KEYWORD),
    ("GRAPH", SearchMode.GRAPH),
    ("HYBRID", SearchMode.HYBRID),
    ("HYBRID+BM25", SearchMode.ALL),
]


async def run_dataset(kb: Khora, name: str, max_questions: int | None) -> dict[str, tuple[float, float]]:
    corpus = read_jsonl(DATA / "multihop" / name / "corpus.jsonl")
    queries = read_jsonl(DATA / "multihop" / name / "queries.jsonl")[:max_questions]
    ns = (await kb.create_namespace(f"multihop-{name}")).namespace_id
    t0 = time.perf_counter()
    batch = await kb.remember_batch(
        [
            {"content": f"{p['title']}\n{p['text']}", "title": p["title"], "external_id": p["id"]}
            for p in corpus
        ],
        namespace=ns,
        progress=True,
    )
    ingest_s = time.perf_counter() - t0
    stats = await kb.stats(ns)
    print(
        f"[{name}] {len(corpus)} passages in {ingest_s:.1f}s: {stats.chunks} chunks, "
        f"{stats.entities} entities, {stats.relationships} relationships; failures: "
        f"{len(getattr(batch, 'failures', []) or [])}"
    )
    out: dict[str, tuple[float, float]] = {}
    for label, mode in MODES:
        r2 = r5 = 0.0
        for q in queries:
            res = await kb.recall(q["question"], namespace=ns, limit=5, mode=mode)
            ext = {d.id: d.external_id for d in res.documents}
            ranked: list[str] = []
            for c in res.chunks:
                pid = ext.get(c.document_id)
                if pid and pid not in ranked:
                    ranked.append(pid)
            gold = set(q["gold_passage_ids"])
            r2 += len(gold & set(ranked[:2])) / len(gold)
            r5 += len(gold & set(ranked[:5])) / len(gold)
        out[label] = (100 * r2 / len(queries), 100 * r5 / len(queries))
    await kb.delete_namespace(ns)
    return out


async def main_async(args: argparse.Namespace) -> None:
    embedder = CachedEmbedder()
    datasets = [d for d in args.datasets.split(",") if d]
    configs = stack_configs(
        args.stack, **preset_sections(args.preset, skeleton_scope=args.skeleton_scope, adaptive_limit=False)
    )
    results: dict[str, dict[str, dict[str, tuple[float, float]]]] = {}
    for stack, cfg in configs.items():
        async with Khora(config=cfg, embedder=embedder) as kb:
            for name in datasets:
                results.setdefault(stack, {})[name] = await run_dataset(kb, name, args.max_questions)
    for stack, per in results.items():
        rows = []
        for label, _ in MODES:
            row: list[object] = [label]
            for name in datasets:
                r2, r5 = per[name][label]
                row += [round(r2, 1), round(r5, 1)]
            rows.append(row)
        rows.append(
            [
                "baseline cosine / BM25 R@5",
                *[x for n in datasets for x in ("", f"{BASELINE_R5[n][0]} / {BASELINE_R5[n][1]}")],
            ]
        )
        header = ["mode", *[f"{n} {k}" for n in datasets for k in ("R@2", "R@5")]]
        print_table(f"Multi-hop Recall@k (%), stack={stack}, preset={args.preset}", header, rows)
    print(f"\nembedding cache: {embedder.hits} hits, {embedder.misses} misses")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="all", choices=STACK_CHOICES)
    parser.add_argument("--datasets", default=",".join(DATASETS))
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
