"""A walkthrough of Khora on its sample corpus: ``python -m khora_core.demo`` (``make demo``).

Runs on the embedded store with the local embedder and the offline extractor: no server,
no API key, no network. It remembers the sample corpus (a fictional world of robotics and
biotech companies, 2022-2025), shows what was extracted, then asks the demo questions
(a lookup, multi-hop questions, filtered questions and questions the corpus cannot answer)
and prints, for each, the chunks, entities, relationships, the routing decision, the
filter pushdown report and the abstention verdict.

The store lives in a fresh temporary folder that is deleted afterwards, unless
``KHORA_DATA_DIR`` is set (then the demo's own namespace there is rebuilt).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from khora_core.errors import KhoraError

__all__ = ["NAMESPACE", "main", "run_demo"]

#: The namespace the demo owns (and rebuilds on every run).
NAMESPACE = "khora-demo"
_RULE = "=" * 100
_THIN = "-" * 100


def _section(title: str) -> None:
    print(f"\n{_RULE}\n{title}\n{_RULE}")


def _expected_report(question: dict[str, Any], result: Any) -> str:
    expected = question["expected_external_ids"]
    if not expected:
        verdict = "abstained, as it should" if result.should_abstain else "did NOT abstain"
        return f"expected: nothing in memory covers this -> Khora {verdict}"
    chunk_docs = {c.document_id for c in result.chunks}
    retrieved = {d.external_id for d in result.documents if d.id in chunk_docs}
    found = [e for e in expected if e in retrieved]
    answer = f"  (answer: {question['answer']})" if question.get("answer") else ""
    return f"expected documents: {', '.join(expected)} -> {len(found)}/{len(expected)} in the chunks{answer}"


async def _show_graph(kb: Any) -> None:
    from khora_core.render import format_entities

    _section("2. What the offline extractor found")
    entities = await kb.list_entities(namespace=NAMESPACE, limit=15)
    print("most mentioned entities:")
    for e in entities:
        print(f"   {e.name} ({e.type}), {e.mention_count} mentions")
    for name in ("Kestrel Dynamics", "Priya Raman", "Project Lighthouse"):
        matches = await kb.search_entities(name, namespace=NAMESPACE, limit=1)
        if not matches:
            print(f"\n{name}: not extracted")
            continue
        entity = matches[0]
        related = await kb.find_related_entities(entity.id, namespace=NAMESPACE, depth=1, limit=12)
        print(f"\nrelated to {entity.name} ({entity.type}), one hop: {format_entities(related)}")


async def _ask(kb: Any, question: dict[str, Any], number: int) -> None:
    from khora_core.render import format_result

    print(f"\n{_THIN}\nQ{number} [{question['kind']}] {question['question']}")
    if question.get("filter") is not None:
        print(f"filter: {json.dumps(question['filter'])}")
    started = time.perf_counter()
    # Multi-hop answers span documents: give them the room the "broad" adaptive limit asks for.
    limit = 8 if question["kind"] == "multi-hop" else 5
    result = await kb.recall(
        question["question"], namespace=NAMESPACE, limit=limit, filter=question.get("filter")
    )
    elapsed_ms = (time.perf_counter() - started) * 1000
    print(f"{_THIN}")
    print(format_result(result, excerpt_chars=200, max_entities=10, max_relationships=8))
    print(f"{_expected_report(question, result)}  [{elapsed_ms:.0f} ms]")


async def run_demo(data_dir: str | Path, *, progress: bool = True) -> int:
    """Remember the sample corpus in ``data_dir`` and walk through the demo questions.

    Args:
        data_dir: the embedded store's folder.
        progress: show a progress bar while remembering.

    Returns:
        0 on success.
    """
    from khora_core import Khora
    from khora_core.config import KhoraConfig
    from khora_core.render import format_stats, summarize_batch
    from khora_core.sample import load_sample_corpus, load_sample_questions, to_remember_items

    # Force the embedded store and the offline extractor whatever the environment says:
    # the demo must run without servers or API keys.
    config = KhoraConfig(storage={"database_url": None, "data_dir": str(data_dir)}, llm={"model": None})
    documents = load_sample_corpus()
    async with Khora(config=config) as kb:
        _section(f"1. Remembering {len(documents)} sample documents into {data_dir}")
        await kb.delete_namespace(NAMESPACE)
        await kb.create_namespace("Khora demo: sample corpus", namespace=NAMESPACE)
        started = time.perf_counter()
        batch = await kb.remember_batch(to_remember_items(documents), namespace=NAMESPACE, progress=progress)
        summary, failed = summarize_batch(batch, [d["external_id"] for d in documents])
        print(summary)
        print(f"took {time.perf_counter() - started:.1f} s")
        print(format_stats(await kb.stats(NAMESPACE)))

        await _show_graph(kb)

        _section("3. Asking questions")
        for number, question in enumerate(load_sample_questions(), start=1):
            await _ask(kb, question, number)
    print(f"\n{_RULE}\ndone.")
    return 0 if failed == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m khora_core.demo``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m khora_core.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("KHORA_DATA_DIR"), help="keep the store here")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        if args.data_dir:
            return asyncio.run(run_demo(args.data_dir, progress=not args.no_progress))
        with tempfile.TemporaryDirectory(prefix="khora-demo-") as tmp:
            return asyncio.run(run_demo(tmp, progress=not args.no_progress))
    except KhoraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
