"""LoCoMo memory benchmark: turn-level evidence recall@5/10/15 and recall latency.

    python -m benchmarks.locomo [--stack sqlite_lance|postgres|all] [--modes vector,hybrid]
                                [--preset default|memory|...] [--data-dir DIR]

Each dialogue turn of the development split (``shared/data/locomo/dev``) is remembered as
one document in its conversation's namespace (``occurred_at`` = the session date, the
speaker in metadata, the image caption appended as ``[shares ...]``, and the turn before it
in the session as ``context``, as a chat application knows what a message replies to;
``--no-context`` leaves it out). Every question of
categories 1-4 with resolvable evidence is recalled against its own conversation;
``recall@k = |E ∩ R_k| / |E|`` averaged per category and overall (the official scoring,
see the data README). Questions fall into two fixed folds by a hash of their
conversation and question index (``fold_of``): settings are chosen on fold A, fold B is
printed beside it. Latency is the ``recall()`` call alone, the question embedded live by
the model (only passages come from the embedding cache). The same questions are scored against two plain baselines over each conversation's turn
texts, per category: cosine top-k (the same embedder) and Okapi BM25 (``k1 = 1.2``,
``b = 0.75``, lower-cased word tokens) over the turns alone and over each turn with its
context, computed in the same run. ``--data-dir`` keeps the
embedded store in a folder and reuses conversations already remembered there.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone

import numpy as np

from benchmarks._common import (
    DATA,
    FOLDS,
    STACK_CHOICES,
    CachedEmbedder,
    PlainBM25,
    fold_of,
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


def replied_to(turns: list[dict]) -> list[str | None]:
    """For each turn, the turn before it in the same session (what it replies to), as text."""
    return [
        turn_text(turns[i - 1])
        if i and (turns[i - 1]["conv_id"], turns[i - 1]["session"]) == (t["conv_id"], t["session"])
        else None
        for i, t in enumerate(turns)
    ]


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


def question_id(q: dict) -> str:
    """A stable id for a LoCoMo question (its conversation and its text), for its fold."""
    return f"{q['conv_id']}|{q['question']}"


class Scores:
    """recall@5/10/15 sums per fold and category."""

    def __init__(self) -> None:
        self.sums: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0] * len(KS))
        self.counts: dict[tuple[str, int], int] = defaultdict(int)

    def add(self, q: dict, evidence: set[str], ranked: list[str]) -> None:
        key = (fold_of(question_id(q)), q["category"])
        for i, k in enumerate(KS):
            self.sums[key][i] += len(evidence & set(ranked[:k])) / len(evidence)
        self.counts[key] += 1

    def by_category(self, fold: str) -> dict[str, list[float]]:
        """``{"cat N": [R@5, R@10, R@15], ..., "overall 1-4": [...]}`` for one fold."""
        cats = sorted(c for f, c in self.counts if f == fold)
        out = {f"cat {c}": [s / self.counts[(fold, c)] for s in self.sums[(fold, c)]] for c in cats}
        n = sum(self.counts[(fold, c)] for c in cats)
        out["overall 1-4"] = [sum(self.sums[(fold, c)][i] for c in cats) / n for i in range(len(KS))]
        return out

    def count(self, fold: str, cat: str) -> int:
        if cat.startswith("cat "):
            return self.counts[(fold, int(cat[4:]))]
        return sum(n for (f, _), n in self.counts.items() if f == fold)


async def plain_baselines(
    embedder: CachedEmbedder, turns: list[dict], asked: list[tuple[dict, set[str]]]
) -> dict[str, Scores]:
    """Cosine top-k and BM25 over each conversation's turns (same texts, same embedder), and
    BM25 over each turn with the turn it replies to (what Khora's keyword channel searches)."""
    by_conv: dict[str, list[dict]] = defaultdict(list)
    for t in turns:
        by_conv[t["conv_id"]].append(t)
    vectors = {}
    indexes = {}
    for conv_id, conv_turns in by_conv.items():
        texts = [turn_text(t) for t in conv_turns]
        matrix = np.asarray(await embedder.embed_documents(texts), dtype=np.float32)
        vectors[conv_id] = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        with_context = [f"{c}\n{t}" if c else t for c, t in zip(replied_to(conv_turns), texts, strict=True)]
        indexes[conv_id] = (PlainBM25(texts), PlainBM25(with_context))
    cosine, bm25, bm25_context = Scores(), Scores(), Scores()
    for q, evidence in asked:
        conv_turns = by_conv[q["conv_id"]]
        qv = np.asarray(await embedder.embed_query(q["question"]), dtype=np.float32)
        order = np.argsort(-(vectors[q["conv_id"]] @ qv), kind="stable")[: max(KS)]
        cosine.add(q, evidence, [conv_turns[i]["dia_id"] for i in order])
        for scores, index in zip((bm25, bm25_context), indexes[q["conv_id"]], strict=True):
            top = index.rank(q["question"], max(KS))
            scores.add(q, evidence, [conv_turns[i]["dia_id"] for i in top])
    return {"cosine top-k": cosine, "BM25": bm25, "BM25 + context": bm25_context}


async def ingest(kb: Khora, turns: list[dict], *, reuse: bool, with_context: bool = True) -> dict[str, str]:
    """Each conversation in its namespace (reused by name with ``reuse``): conv id -> namespace id."""
    by_conv: dict[str, list[dict]] = defaultdict(list)
    for t in turns:
        by_conv[t["conv_id"]].append(t)
    existing = {ns.name: ns.namespace_id for ns in await kb.list_namespaces()} if reuse else {}
    namespaces: dict[str, str] = {}
    t0 = time.perf_counter()
    for conv_id, conv_turns in by_conv.items():
        if f"locomo-{conv_id}" in existing:
            namespaces[conv_id] = existing[f"locomo-{conv_id}"]
            continue
        ns = (await kb.create_namespace(f"locomo-{conv_id}")).namespace_id
        namespaces[conv_id] = ns
        contexts = replied_to(conv_turns) if with_context else [None] * len(conv_turns)
        await kb.remember_batch(
            [
                {
                    "content": turn_text(t),
                    "context": context,
                    "external_id": f"{conv_id}:{t['dia_id']}",
                    "occurred_at": datetime.fromisoformat(t["occurred_at"]).replace(tzinfo=timezone.utc),
                    "metadata": {"speaker": t["speaker"], "dia_id": t["dia_id"], "session": t["session"]},
                    "source_type": "dialogue",
                }
                for t, context in zip(conv_turns, contexts, strict=True)
            ],
            namespace=ns,
            progress=True,
        )
    print(f"ingested {len(turns)} turns in {time.perf_counter() - t0:.1f}s")
    return namespaces


async def run(
    kb: Khora, mode: SearchMode, asked: list[tuple[dict, set[str]]], namespaces: dict[str, str]
) -> Scores:
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
        scores.add(q, evidence, ranked)
    print(
        f"\n{mode.value} recall latency over {len(latencies)} queries: mean "
        f"{sum(latencies) / len(latencies):.1f} ms, p50 {pct(latencies, 50):.1f} ms, p95 {pct(latencies, 95):.1f} ms"
    )
    return scores


def report(title: str, ours: dict[str, Scores], baselines: dict[str, Scores]) -> None:
    """R@10 (R@5, R@15 beside) per category and fold, every retriever, and where a Khora
    mode falls below the best plain baseline at R@10."""
    every = {**{f"Khora {m}": s for m, s in ours.items()}, **baselines}
    cats = list(next(iter(ours.values())).by_category(FOLDS[0]))
    rows = []
    for cat in cats:
        for i, (name, scores) in enumerate(every.items()):
            row: list[object] = [cat if i == 0 else "", name]
            for fold in FOLDS:
                values = scores.by_category(fold).get(cat)
                row += [round(values[1], 3) if values else "", scores.count(fold, cat) if i == 0 else ""]
            row.append(" / ".join(f"{v:.3f}" for v in scores.by_category("A")[cat]))
            rows.append(row)
    print_table(
        f"LoCoMo evidence recall@10, {title}",
        ["category", "retriever", "fold A", "n", "fold B", "n", "fold A R@5 / R@10 / R@15"],
        rows,
    )
    for fold in FOLDS:
        plain = {name: b.by_category(fold) for name, b in baselines.items()}
        for mode, scores in ours.items():
            values = scores.by_category(fold)
            below = [
                f"{cat} ({values[cat][1]:.3f} < {max(p[cat][1] for p in plain.values()):.3f})"
                for cat in values
                if values[cat][1] < max(p[cat][1] for p in plain.values())
            ]
            print(f"fold {fold}, {mode}: below the best plain baseline at R@10: {', '.join(below) or 'none'}")


async def main_async(args: argparse.Namespace) -> None:
    embedder = CachedEmbedder()
    turns = read_jsonl(DATA / "locomo" / "dev" / "turns.jsonl")
    asked = questions(turns, args.max_questions)
    baselines = await plain_baselines(embedder, turns, asked)
    modes = [SearchMode(m.strip().lower()) for m in args.modes.split(",") if m.strip()]
    for stack, cfg in stack_configs(
        args.stack,
        data_dir=args.data_dir,
        **preset_sections(args.preset, skeleton_scope=args.skeleton_scope, adaptive_limit=False),
    ).items():
        print(f"\n# stack: {stack}, preset: {args.preset}")
        async with Khora(config=cfg, embedder=embedder.live()) as kb:
            namespaces = await ingest(
                kb, turns, reuse=args.data_dir is not None, with_context=not args.no_context
            )
            ours = {m.value: await run(kb, m, asked, namespaces) for m in modes}
            if args.data_dir is None:
                for ns in namespaces.values():
                    await kb.delete_namespace(ns)
        report(f"stack={stack}, preset={args.preset}", ours, baselines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="sqlite_lance", choices=STACK_CHOICES)
    parser.add_argument("--modes", default="vector,hybrid", help="comma-separated search modes")
    parser.add_argument("--data-dir", default=None, help="keep (and reuse) the embedded store here")
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument(
        "--no-context", action="store_true", help="remember turns without the turn they reply to"
    )
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
