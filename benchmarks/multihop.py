"""Multi-hop retrieval quality: Recall@2 / Recall@5 of gold passages per mode, stack and fold.

    python -m benchmarks.multihop [--stack all|sqlite_lance|postgres]
                                  [--datasets musique,2wikimultihopqa,hotpotqa]
                                  [--preset default|memory|...] [--modes VECTOR,GRAPH,HYBRID]
                                  [--data-dir DIR]

Each development set in ``shared/data/multihop/`` is remembered into its own namespace (one
passage = one document: its text as ``content``, its title as ``title=``, the offline
extractor); every question is recalled in each mode with ``limit=5`` and the adaptive chunk
count off, so each mode returns exactly k results. Questions fall into two fixed folds by a
hash of their id (``fold_of``): settings are chosen on fold A, and fold B is printed beside
it. The plain baselines are computed in the same run over the same passages (title line +
text): cosine top-k with the same embedder, and Okapi BM25.

``--data-dir`` keeps the embedded store in a folder and reuses namespaces already
remembered there (for comparing read-path settings without ingesting again).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict

import numpy as np

from benchmarks._common import (
    DATA,
    FOLDS,
    STACK_CHOICES,
    CachedEmbedder,
    PlainBM25,
    fold_of,
    preset_sections,
    print_table,
    read_jsonl,
    stack_configs,
)
from khora_core import Khora, SearchMode

DATASETS = ["musique", "2wikimultihopqa", "hotpotqa"]
MODES = {
    "VECTOR": SearchMode.VECTOR,
    "KEYWORD": SearchMode.KEYWORD,
    "GRAPH": SearchMode.GRAPH,
    "HYBRID": SearchMode.HYBRID,
    "ALL": SearchMode.ALL,
}
K = 5

#: dataset -> retriever -> fold -> [R@2 sum, R@5 sum, questions]
Tally = dict[str, dict[str, dict[str, list[float]]]]


def _score(tally: Tally, name: str, label: str, qid: str, gold: set[str], ranked: list[str]) -> None:
    cell = tally[name][label].setdefault(fold_of(qid), [0.0, 0.0, 0])
    cell[0] += len(gold & set(ranked[:2])) / len(gold)
    cell[1] += len(gold & set(ranked[:5])) / len(gold)
    cell[2] += 1


async def plain_baselines(embedder: CachedEmbedder, name: str, tally: Tally) -> None:
    """Cosine top-k and BM25 over the passages as ``title\\ntext``."""
    corpus = read_jsonl(DATA / "multihop" / name / "corpus.jsonl")
    queries = read_jsonl(DATA / "multihop" / name / "queries.jsonl")
    texts = [f"{p['title']}\n{p['text']}" for p in corpus]
    matrix = np.asarray(await embedder.embed_documents(texts), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    bm25 = PlainBM25(texts)
    for q in queries:
        gold = set(q["gold_passage_ids"])
        qv = np.asarray(await embedder.embed_query(q["question"]), dtype=np.float32)
        top = np.argsort(-(matrix @ qv), kind="stable")[:K]
        _score(tally, name, "plain cosine", q["id"], gold, [corpus[i]["id"] for i in top])
        _score(
            tally, name, "plain BM25", q["id"], gold, [corpus[i]["id"] for i in bm25.rank(q["question"], K)]
        )


async def _namespace(kb: Khora, name: str, reuse: bool) -> tuple[str, bool]:
    label = f"multihop-{name}"
    if reuse:
        for ns in await kb.list_namespaces():
            if ns.name == label:
                return ns.namespace_id, True
    return (await kb.create_namespace(label)).namespace_id, False


async def run_dataset(kb: Khora, name: str, modes: list[str], tally: Tally, *, reuse: bool) -> None:
    corpus = read_jsonl(DATA / "multihop" / name / "corpus.jsonl")
    queries = read_jsonl(DATA / "multihop" / name / "queries.jsonl")
    ns, reused = await _namespace(kb, name, reuse)
    if not reused:
        t0 = time.perf_counter()
        batch = await kb.remember_batch(
            [{"content": p["text"], "title": p["title"], "external_id": p["id"]} for p in corpus],
            namespace=ns,
            progress=True,
        )
        stats = await kb.stats(ns)
        failures = sum(1 for b in batch if isinstance(b, Exception))
        print(
            f"[{name}] {len(corpus)} passages in {time.perf_counter() - t0:.1f}s: {stats.chunks} chunks, "
            f"{stats.entities} entities, {stats.relationships} relationships; failures: {failures}"
        )
    for label in modes:
        for q in queries:
            res = await kb.recall(q["question"], namespace=ns, limit=K, mode=MODES[label])
            ext = {d.id: d.external_id for d in res.documents}
            ranked: list[str] = []
            for c in res.chunks:
                pid = ext.get(c.document_id)
                if pid and pid not in ranked:
                    ranked.append(pid)
            _score(tally, name, label, q["id"], set(q["gold_passage_ids"]), ranked)
    if not reuse:
        await kb.delete_namespace(ns)


def report(title: str, tally: Tally, datasets: list[str], labels: list[str]) -> None:
    header = ["retriever", *[f"{n} {f}" for n in datasets for f in FOLDS]]
    for metric, idx in (("R@5", 1), ("R@2", 0)):
        rows = []
        for label in labels:
            row: list[object] = [label]
            for n in datasets:
                for f in FOLDS:
                    cell = tally[n][label].get(f)
                    row.append(f"{100 * cell[idx] / cell[2]:.1f}" if cell else "")
            rows.append(row)
        counts = [str(int(tally[n][labels[0]].get(f, [0, 0, 0])[2])) for n in datasets for f in FOLDS]
        rows.append(["questions", *counts])
        print_table(f"{metric} (%), {title}", header, rows)


async def main_async(args: argparse.Namespace) -> None:
    embedder = CachedEmbedder()
    datasets = [d for d in args.datasets.split(",") if d]
    modes = [m.strip().upper() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"unknown mode(s) {unknown}; choose from {', '.join(MODES)}")
    baselines: Tally = defaultdict(lambda: defaultdict(dict))
    for name in datasets:
        await plain_baselines(embedder, name, baselines)
    configs = stack_configs(
        args.stack,
        data_dir=args.data_dir,
        **preset_sections(args.preset, skeleton_scope=args.skeleton_scope, adaptive_limit=False),
    )
    for stack, cfg in configs.items():
        tally: Tally = defaultdict(lambda: defaultdict(dict))
        async with Khora(config=cfg, embedder=embedder) as kb:
            for name in datasets:
                await run_dataset(kb, name, modes, tally, reuse=args.data_dir is not None)
        for name in datasets:
            tally[name].update(baselines[name])
        report(
            f"stack={stack}, preset={args.preset}", tally, datasets, [*modes, "plain cosine", "plain BM25"]
        )
    print(f"\nembedding cache: {embedder.hits} hits, {embedder.misses} misses")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="all", choices=STACK_CHOICES)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--modes", default="VECTOR,GRAPH,HYBRID,ALL", help=f"of {', '.join(MODES)}")
    parser.add_argument("--preset", default="default", help="read-path preset (khora_core.retrieval.presets)")
    parser.add_argument("--data-dir", default=None, help="keep (and reuse) the embedded store here")
    parser.add_argument(
        "--skeleton-scope",
        choices=["document", "batch"],
        default=None,
        help="VectorCypherConfig.skeleton_scope (default: the configured one)",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
