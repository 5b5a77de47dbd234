"""Warming a stack's read path before it takes traffic.

A Neo4j server plans each Cypher statement on its first call, and again for each size class
of its list parameters (1, 2-10, 11-100 and 101-1,000 items), at about 70 ms a plan on a
warm JVM; its JVM compiles the read paths as queries make them hot, for minutes after a start
or a bulk load; and ``settle`` drops the cached plans on purpose, so that they are made
against the loaded graph. Without a warm-up the first users' recalls pay for all of it:
right after a bulk load, HYBRID recall's p95 over the first 100 questions was 1.7-2.5x its
p95 a minute later (``docs/operations.md``). The embedded store loads its vectors on its
first search.

:func:`warm_up` runs recalls whose questions are word windows cut from the namespace's own
documents, cycling HYBRID, VECTOR and ALL, through a read path without an LLM (whatever the
configuration, no model is called), and discards the results. It reads and writes nothing
else. It runs :data:`WARM_UP_MIN_RECALLS` recalls; then, on a stack whose servers say how
long they have compiled (``StorageStack.compile_ms``: Neo4j's JIT), it goes on in rounds of
:data:`ROUND` recalls while the servers compiled for at least :data:`SETTLED_SHARE` of the
time of the last :data:`WINDOW_ROUNDS` rounds, up to ``recalls`` in all and
:data:`WARM_UP_MAX_S` seconds. Its report says why it stopped. On 2 cores, after a bulk load
of 2,884 passages, Neo4j's JVM compiled for 8-16% of recall traffic's time for about two
and a half minutes after a 300-recall warm-up, and for 1-2% after that, when recall was
1.2-1.35x the embedded store's p95 instead of 1.4-1.56x (``docs/operations.md``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from khora_core.models import SearchMode

if TYPE_CHECKING:
    from khora_core.config import KhoraConfig
    from khora_core.embedding.base import Embedder
    from khora_core.storage.protocols import StorageStack

__all__ = [
    "QUESTION_WORDS",
    "ROUND",
    "SETTLED_SHARE",
    "WARM_UP_MAX_S",
    "WARM_UP_MIN_RECALLS",
    "WARM_UP_RECALLS",
    "WINDOW_ROUNDS",
    "warm_up",
    "warm_up_questions",
    "warm_up_stop",
]

#: The most recalls a warm-up runs unless told otherwise.
WARM_UP_RECALLS = 3000
#: Recalls every warm-up runs (fewer only when ``recalls`` is smaller).
WARM_UP_MIN_RECALLS = 300
#: Recalls between two readings of the servers' compile time.
ROUND = 60
#: The compile share is measured over the last this many rounds (300 recalls): a JIT
#: compiles in bursts, and one round's share swings between 3% and 50% while it is busy.
WINDOW_ROUNDS = 5
#: Servers that compiled for less than this share of the window's time have settled (a
#: JVM done with its start-up compiling spends 1-2% of recall traffic's time on it).
SETTLED_SHARE = 0.05
#: A warm-up stops after this many seconds even if recalls are left.
WARM_UP_MAX_S = 120.0
#: Words in a warm-up question, about a user's question.
QUESTION_WORDS = 12
_MODES = (SearchMode.HYBRID, SearchMode.VECTOR, SearchMode.ALL)


def warm_up_questions(texts: Sequence[str], count: int, *, seed: int = 0) -> list[str]:
    """``count`` questions of up to :data:`QUESTION_WORDS` consecutive words, each from one of
    ``texts`` in turn (a random window of it; the same ``seed`` gives the same questions).
    Blank texts give none; no texts give an empty list."""
    pool = [t.split() for t in texts if t and t.strip()]
    if not pool or count <= 0:
        return []
    rng = random.Random(seed)
    out: list[str] = []
    for i in range(count):
        words = pool[i % len(pool)]
        start = rng.randrange(max(1, len(words) - QUESTION_WORDS + 1))
        out.append(" ".join(words[start : start + QUESTION_WORDS]))
    return out


def warm_up_stop(
    *, done: int, recalls: int, elapsed_s: float, max_s: float, compile_share: float | None
) -> str | None:
    """Why a warm-up that has run ``done`` recalls in ``elapsed_s`` seconds stops now, or None
    to go on: ``"recalls"`` (``recalls`` reached), ``"time"`` (``max_s`` passed),
    ``"no_compile_reading"`` (past the minimum, and the stack does not say how long its
    servers compile) or ``"servers_settled"`` (past the minimum, and they compiled for less
    than :data:`SETTLED_SHARE` of the last :data:`WINDOW_ROUNDS` rounds' time,
    ``compile_share``)."""
    if done >= recalls:
        return "recalls"
    if elapsed_s >= max_s:
        return "time"
    if done < WARM_UP_MIN_RECALLS:
        return None
    if compile_share is None:
        return "no_compile_reading"
    return "servers_settled" if compile_share < SETTLED_SHARE else None


async def _compile_ms(stack: StorageStack) -> float | None:
    reading = getattr(stack, "compile_ms", None)
    return await reading() if reading is not None else None


async def warm_up(
    stack: StorageStack,
    embedder: Embedder,
    config: KhoraConfig,
    namespace_id: str,
    *,
    recalls: int = WARM_UP_RECALLS,
    max_s: float = WARM_UP_MAX_S,
) -> dict[str, Any]:
    """Warm ``namespace_id``'s read path (module doc): at least :data:`WARM_UP_MIN_RECALLS`
    recalls (or ``recalls``, when fewer), then on while the stack's servers are still
    compiling, up to ``recalls`` and ``max_s`` seconds.

    Returns:
        ``warm_up_recalls`` (how many ran; 0 when the namespace has no documents),
        ``warm_up_s``, ``warm_up_stop`` (``warm_up_stop``'s reason) and, on a stack whose
        servers say how long they compile, ``warm_up_compile_s`` (their compile time during
        the warm-up) and ``warm_up_last_compile_share`` (its share of the time of the last
        :data:`WINDOW_ROUNDS` rounds; None before a whole round).
    """
    from khora_core.retrieval.pipeline import RecallPipeline

    t0 = time.perf_counter()
    documents = await stack.documents.list_documents(namespace_id, limit=1000)
    questions = warm_up_questions([d.content for d in documents], max(0, recalls))
    pipeline = RecallPipeline(stack=stack, embedder=embedder, config=config, llm=None)
    first = await _compile_ms(stack) if questions else None
    # (time, compile ms) at the start and after each round, the last WINDOW_ROUNDS + 1 kept
    readings: list[tuple[float, float]] = [] if first is None else [(t0, first)]
    share: float | None = None
    done, reason = 0, "no_documents" if not questions else "recalls"
    while questions:
        stop = warm_up_stop(
            done=done,
            recalls=len(questions),
            elapsed_s=time.perf_counter() - t0,
            max_s=max_s,
            compile_share=share,
        )
        if stop is not None:
            reason = stop
            break
        await pipeline.recall(
            questions[done], namespace_id=namespace_id, limit=10, mode=_MODES[done % len(_MODES)]
        )
        done += 1
        if done % ROUND == 0 and readings:  # the servers' compile share of the window
            now_ms = await _compile_ms(stack)
            if now_ms is None:
                readings, share = [], None
                continue
            readings = [*readings, (time.perf_counter(), now_ms)][-(WINDOW_ROUNDS + 1) :]
            (t_a, ms_a), (t_b, ms_b) = readings[0], readings[-1]
            share = (ms_b - ms_a) / max((t_b - t_a) * 1000.0, 1e-9)
    report: dict[str, Any] = {
        "warm_up_recalls": done,
        "warm_up_s": round(time.perf_counter() - t0, 3),
        "warm_up_stop": reason,
    }
    if first is not None:
        end_ms = await _compile_ms(stack)
        if end_ms is not None:
            report["warm_up_compile_s"] = round((end_ms - first) / 1000.0, 3)
            report["warm_up_last_compile_share"] = None if share is None else round(share, 3)
    return report
