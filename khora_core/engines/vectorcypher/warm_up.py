"""Warming a stack's read path before it takes traffic.

A Neo4j server plans each Cypher statement on its first call, and again for each size class
of its list parameters (1, 2-10, 11-100 and 101-1,000 items), at about 70 ms a plan on a
warm JVM; its JVM compiles the read paths over the first several hundred queries; and
``settle`` drops the cached plans on purpose, so that they are made against the loaded
graph. Without a warm-up the first users' recalls pay for all of it: right after a bulk
load, HYBRID recall's p95 over the first 100 questions was 1.7-2.5x its p95 a minute later
(``docs/operations.md``). The embedded store loads its vectors on its first search.

:func:`warm_up` runs recalls whose questions are word windows cut from the namespace's own
documents, cycling HYBRID, VECTOR and ALL, through a read path without an LLM (whatever the
configuration, no model is called), for at most :data:`WARM_UP_MAX_S` seconds, and discards
the results. It reads and writes nothing else.
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

__all__ = ["QUESTION_WORDS", "WARM_UP_MAX_S", "WARM_UP_RECALLS", "warm_up", "warm_up_questions"]

#: Recalls a warm-up runs unless told otherwise.
WARM_UP_RECALLS = 300
#: A warm-up stops after this many seconds even if recalls are left.
WARM_UP_MAX_S = 30.0
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


async def warm_up(
    stack: StorageStack,
    embedder: Embedder,
    config: KhoraConfig,
    namespace_id: str,
    *,
    recalls: int = WARM_UP_RECALLS,
    max_s: float = WARM_UP_MAX_S,
) -> dict[str, Any]:
    """Run up to ``recalls`` recalls in ``namespace_id`` (module doc), stopping after
    ``max_s`` seconds, and say how many ran and how long they took.

    Returns:
        ``{"warm_up_recalls": n, "warm_up_s": seconds}``; ``n`` is 0 when the namespace has
        no documents.
    """
    from khora_core.retrieval.pipeline import RecallPipeline

    t0 = time.perf_counter()
    documents = await stack.documents.list_documents(namespace_id, limit=max(1, min(recalls, 1000)))
    questions = warm_up_questions([d.content for d in documents], recalls)
    pipeline = RecallPipeline(stack=stack, embedder=embedder, config=config, llm=None)
    done = 0
    for question in questions:
        if time.perf_counter() - t0 >= max_s:
            break
        await pipeline.recall(question, namespace_id=namespace_id, limit=10, mode=_MODES[done % len(_MODES)])
        done += 1
    return {"warm_up_recalls": done, "warm_up_s": round(time.perf_counter() - t0, 3)}
