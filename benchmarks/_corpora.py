"""Corpus, question and process helpers shared by the storage, ingest and latency benchmarks.

The development corpora in ``shared/data`` become ``remember`` items the same way the
multi-hop and LoCoMo benchmarks build them (``title`` + text per passage, one LoCoMo turn
per document), so the embedding cache is shared between all benchmarks.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks._common import DATA, CachedEmbedder, read_jsonl

MULTIHOP = ("musique", "hotpotqa", "2wikimultihopqa")
CORPORA = (*MULTIHOP, "locomo")


def corpus_names(spec: str) -> list[str]:
    """``"all"`` or a comma-separated list of corpus names, validated."""
    names = list(CORPORA) if spec == "all" else [n for n in spec.split(",") if n]
    unknown = [n for n in names if n not in CORPORA]
    if unknown:
        raise SystemExit(f"unknown corpus {unknown}; choose from {', '.join(CORPORA)} or 'all'")
    return names


def _turn_text(t: dict[str, Any]) -> str:
    text = f"{t['speaker']}: {t['text']}"
    if t.get("blip_caption"):
        text += f" [shares {t['blip_caption']}]"
    return text


def passages(names: Sequence[str], limit: int | None = None) -> list[dict[str, Any]]:
    """``remember`` items for the named corpora, in file order (``limit`` caps the total).

    ``source_type`` is the corpus name, so a filter on it selects one corpus.
    """
    items: list[dict[str, Any]] = []
    for name in names:
        if name == "locomo":
            for t in read_jsonl(DATA / "locomo" / "dev" / "turns.jsonl"):
                items.append(
                    {
                        "content": _turn_text(t),
                        "external_id": f"{t['conv_id']}:{t['dia_id']}",
                        "occurred_at": datetime.fromisoformat(t["occurred_at"]).replace(tzinfo=timezone.utc),
                        "metadata": {"speaker": t["speaker"], "session": t["session"]},
                        "source_type": "locomo",
                    }
                )
        else:
            for p in read_jsonl(DATA / "multihop" / name / "corpus.jsonl"):
                items.append(
                    {
                        "content": f"{p['title']}\n{p['text']}",
                        "title": p["title"],
                        "external_id": p["id"],
                        "source_type": name,
                    }
                )
    return items[:limit] if limit is not None else items


def questions(
    names: Sequence[str] = CORPORA, limit: int | None = None, *, seed: int = 0
) -> list[dict[str, str]]:
    """Development questions of the named corpora (``{"source", "question"}``), shuffled
    deterministically so that any prefix mixes the sources."""
    out: list[dict[str, str]] = []
    for name in names:
        if name == "locomo":
            rows = read_jsonl(DATA / "locomo" / "dev" / "qa.jsonl")
        else:
            rows = read_jsonl(DATA / "multihop" / name / "queries.jsonl")
        out += [{"source": name, "question": r["question"]} for r in rows if r.get("question")]
    random.Random(seed).shuffle(out)
    return out[:limit] if limit is not None else out


class SwitchableEmbedder(CachedEmbedder):
    """A ``CachedEmbedder`` that can be switched to the real model for everything.

    Latency benchmarks ingest from the cache (fast re-runs), then set ``live = True`` so
    every embedding on the read path (the query, entity mentions) runs the model.
    """

    live = False

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.live:
            return await self.inner.embed_documents(texts)
        return await super().embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        if self.live:
            return await self.inner.embed_query(text)
        return await super().embed_query(text)


def reset_peak_rss() -> bool:
    """Reset the process's peak resident set (Linux ``clear_refs``); False when unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mib() -> float:
    """Peak resident memory of this process since start (or the last reset), in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine_busy_seconds(stat: str | Path = "/proc/stat") -> float | None:
    """CPU-seconds the whole machine has spent busy since boot, all cores together (Linux
    ``/proc/stat``: user, nice, system, irq, softirq and steal time; idle and I/O wait are
    not busy), or None where that file is missing. It counts every process, the database
    servers included, so a difference between two readings is the work of everything that
    ran between them."""
    try:
        fields = Path(stat).read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def remove_dir(path: Any) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)
