"""Eight concurrent writers with forget and recall beside them (issue #38 item 3), on every stack.

Eight asyncio writers in one process remember 250 documents each (two of them one at a
time, the others in batches of 25) while a ninth task forgets documents stored before
they started and three more recall in a loop. Writers 2k and 2k+1 share a tenth of
their contents and write them at the same moment. Afterwards: every write reported a
``RememberResult``; each shared content is one document (both writers get its id, exactly
one of them as new); the store holds exactly the distinct contents (0 lost, 0 duplicated,
each with its one chunk, in the graph too on Neo4j); the forgotten documents are gone;
each entity is one node whose mention count is the number of stored contents naming it;
and no reader or the forgetter met an untyped error.

Two processes on one embedded folder (the second gets the typed lock error) are tested in
``tests/storage/test_shared_stack.py``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from khora_core import Khora, KhoraConfig, RememberResult
from khora_core.errors import KhoraError, StorageError
from tests.fixtures.embedders import RecordingEmbedder
from tests.fixtures.stacks import config_for

pytestmark = pytest.mark.slow

WRITERS = 8
PER_WRITER = 250
#: Every tenth item of a writer is shared with its partner writer (2k <-> 2k+1).
SHARED_EVERY = 10
BATCH = 25
FORGOTTEN = 60

PEOPLE = ["Maya Chen", "Omar Haddad", "Lena Ortiz", "Ravi Patel", "Ines Moreau", "Tomas Berg"]
PLACES = ["Lisbon", "Oslo", "Nairobi", "Kyoto", "Lima"]


def _content(tag: str, i: int) -> str:
    a, b = PEOPLE[i % len(PEOPLE)], PEOPLE[(i * 7 + 1) % len(PEOPLE)]
    if a == b:
        b = PEOPLE[(i + 1) % len(PEOPLE)]
    return f"Report {tag}-{i}. {a} met {b} in {PLACES[i % len(PLACES)]} about the Northwind contract."


def _writer_contents(w: int) -> list[str]:
    pair = w // 2
    return [
        _content(f"shared{pair}", j) if j % SHARED_EVERY == 0 else _content(f"w{w}", j)
        for j in range(PER_WRITER)
    ]


@pytest.fixture
async def kb(stack_name: str, request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Khora]:
    config: KhoraConfig = config_for(stack_name, request, tmp_path / "khora-data")
    async with Khora(config=config, embedder=RecordingEmbedder(384)) as k:
        yield k


async def _new_namespace(kb: Khora, name: str) -> str:
    return (await kb.create_namespace(name, namespace=f"{name}-{uuid.uuid4().hex[:12]}")).namespace_id


async def _all_documents(kb: Khora, ns: str) -> list[Any]:
    docs: list[Any] = []
    while page := await kb.engine.stack.documents.list_documents(ns, offset=len(docs), limit=500):
        docs += page
    return docs


async def _mention_counts(kb: Khora, ns: str) -> list[tuple[str, int]]:
    # names are unique per namespace unless a race created one twice: kept as a list
    entities = await kb.list_entities(namespace=ns, limit=1000)
    return sorted((e.name, e.mention_count) for e in entities)


async def test_eight_writers_with_forget_and_recall(kb: Khora) -> None:
    ns = await _new_namespace(kb, "conc")
    try:
        await _run(kb, ns)
    finally:
        await kb.delete_namespace(ns)


async def _run(kb: Khora, ns: str) -> None:
    seeded = await kb.remember_batch([_content("old", i) for i in range(FORGOTTEN)], namespace=ns)
    old_ids = [r.document_id for r in seeded if isinstance(r, RememberResult)]
    assert len(old_ids) == FORGOTTEN
    errors: list[BaseException] = []

    async def write(w: int) -> list[Any]:
        contents = _writer_contents(w)
        if w < 2:  # one remember() at a time
            return [await kb.remember(c, namespace=ns) for c in contents]
        out: list[Any] = []
        for start in range(0, len(contents), BATCH):
            out += await kb.remember_batch(contents[start : start + BATCH], namespace=ns)
        return out

    async def forget_old() -> int:
        gone = 0
        for doc_id in old_ids:
            gone += bool(await kb.forget(doc_id, namespace=ns))
            await asyncio.sleep(0.01)
        return gone

    async def recall_until(done: asyncio.Future[Any]) -> int:
        n = 0
        while not done.done():
            for mode in ("vector", "graph", "keyword"):
                try:
                    await kb.recall("Who did Maya Chen meet in Lisbon?", namespace=ns, mode=mode)
                except StorageError:  # typed, allowed; anything else is the defect
                    pass
                except BaseException as exc:
                    errors.append(exc)
                n += 1
            await asyncio.sleep(0.05)  # beside the writers, not starving them
        return n

    writing = asyncio.gather(*(write(w) for w in range(WRITERS)), forget_old())
    written, *recalls = await asyncio.wait_for(
        asyncio.gather(writing, *(recall_until(writing) for _ in range(3))), timeout=600
    )
    results, forgotten_count = written[:WRITERS], written[WRITERS]
    assert errors == [], errors[:3]
    assert sum(recalls) >= 3, "no recall ran beside the writers"
    assert forgotten_count == FORGOTTEN

    by_content: dict[str, list[RememberResult]] = {}
    for w, writer_results in enumerate(results):
        bad = [r for r in writer_results if not isinstance(r, RememberResult)]
        assert not bad, f"writer {w}: {bad[:3]}"
        for content, result in zip(_writer_contents(w), writer_results, strict=True):
            by_content.setdefault(content, []).append(result)

    # The same content from two writers at once: one document, new for exactly one of them.
    shared = {c: rs for c, rs in by_content.items() if len(rs) > 1}
    assert len(shared) == (WRITERS // 2) * (PER_WRITER // SHARED_EVERY)
    for content, rs in shared.items():
        assert len({r.document_id for r in rs}) == 1, content
        assert sum(not r.duplicate for r in rs) == 1, (content, rs)
    assert all(not rs[0].duplicate for rs in by_content.values() if len(rs) == 1)

    # 0 lost, 0 duplicated: exactly the distinct contents, each once, each with its chunk.
    expected = {rs[0].document_id for rs in by_content.values()}
    docs = await _all_documents(kb, ns)
    assert len(docs) == len(expected) == WRITERS * PER_WRITER - len(shared)
    assert {d.id for d in docs} == expected
    assert sorted(d.content for d in docs) == sorted(by_content)
    stats = await kb.stats(ns)
    assert (stats.documents, stats.chunks) == (len(expected), len(expected))
    if kb.storage_backend == "postgres":
        records, _, _ = await kb.engine.stack._driver.execute_query(
            "MATCH (c:Chunk {namespace_id: $ns}) RETURN c.document_id AS doc, count(*) AS n",
            {"ns": ns},
        )
        graph_docs = {r["doc"]: r["n"] for r in records}
        assert set(graph_docs) == expected  # the forgotten graphs are gone too
        assert set(graph_docs.values()) == {1}

    # Entities: one node per name, mentioned once by each stored content that names it.
    counts = await _mention_counts(kb, ns)
    names = [name for name, _ in counts]
    assert len(names) == len(set(names)), "an entity was created twice"
    found = dict(counts)
    for name in PEOPLE + PLACES:
        assert found.get(name) == sum(name in c for c in by_content), name


async def test_concurrent_writers_raise_only_typed_errors_on_bad_items(kb: Khora) -> None:
    """Bad items among concurrent batches fail alone and typed; the good ones all land."""
    ns = await _new_namespace(kb, "conc")
    try:
        batches = [[_content(f"b{w}", i) if i % 5 else "\x00 bad" for i in range(20)] for w in range(WRITERS)]
        results = await asyncio.gather(*(kb.remember_batch(b, namespace=ns) for b in batches))
        for batch in results:
            for i, r in enumerate(batch):
                if i % 5:
                    assert isinstance(r, RememberResult), r
                else:
                    assert isinstance(r, KhoraError) and not isinstance(r, StorageError), r
        assert (await kb.stats(ns)).documents == WRITERS * 16
    finally:
        await kb.delete_namespace(ns)
