"""Hostile input, concurrency and dates at the ``Khora`` facade, on every storage stack.

Each test names the defect it guards: bad arguments get a typed ``InvalidInputError``
(never a crash, an untyped error or a silent misreading) and leave the store as it was;
concurrent writers of the same content or ``external_id`` keep one copy; dates at the
edges of the calendar are refused or handled, never turned into infinities or overflows.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

import pytest

from khora_core import Khora, KhoraConfig, RememberResult
from khora_core.errors import InvalidInputError, KhoraError, StorageError
from tests.fixtures.embedders import RecordingEmbedder
from tests.fixtures.stacks import config_for

#: The PostgreSQL test database holds 384-dimensional vectors.
DIM = 384


@pytest.fixture
async def kb(stack_name: str, request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Khora]:
    config: KhoraConfig = config_for(stack_name, request, tmp_path / "khora-data")
    async with Khora(config=config, embedder=RecordingEmbedder(DIM)) as k:
        yield k


@pytest.fixture
async def ns(kb: Khora) -> AsyncIterator[str]:
    namespace = (
        await kb.create_namespace("reliability", namespace=f"rel-{uuid.uuid4().hex[:12]}")
    ).namespace_id
    yield namespace
    await kb.delete_namespace(namespace)


def _passage(i: int) -> str:
    return f"Report {i}. Maya Chen met Omar Haddad at Northwind Robotics in Lisbon."


async def _documents(kb: Khora, ns: str) -> int:
    return (await kb.stats(ns)).documents


# -- 1. limits -------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [-1, 0, 10**9, True, 2.5, "3"])
async def test_read_limits_are_validated(kb: Khora, ns: str, limit: Any) -> None:
    """``search_entities(limit=-1)`` crashed the process (rapidfuzz) or raised RuntimeError."""
    await kb.remember(_passage(0), namespace=ns)
    with pytest.raises(InvalidInputError, match="limit"):
        await kb.search_entities("Maya Chen", namespace=ns, limit=limit)
    with pytest.raises(InvalidInputError, match="limit"):
        await kb.list_entities(namespace=ns, limit=limit)
    with pytest.raises(InvalidInputError, match="limit"):
        await kb.find_related_entities("any", namespace=ns, limit=limit)
    with pytest.raises(InvalidInputError, match="limit"):
        await kb.recall("Who is Maya Chen?", namespace=ns, limit=limit)
    with pytest.raises(InvalidInputError, match="offset"):
        await kb.list_entities(namespace=ns, offset=-1)
    with pytest.raises(InvalidInputError, match="depth"):
        await kb.find_related_entities("any", namespace=ns, depth=0)
    # The same reads with good arguments answer.
    assert [e.name for e in await kb.search_entities("Maya Chen", namespace=ns, limit=1)]
    assert len(await kb.list_entities(namespace=ns, offset=1, limit=2)) <= 2


# -- 8. hostile strings and metadata ---------------------------------------------------------

LONE = "\ud800"


def _deep(levels: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(levels):
        out = {"k": out}
    return out


def _self_referencing() -> dict[str, Any]:
    meta: dict[str, Any] = {"a": 1}
    meta["me"] = meta
    return meta


def _cyclic_list() -> dict[str, Any]:
    items: list[Any] = [1]
    items.append(items)
    return {"items": items}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"content": f"text with a lone surrogate {LONE} inside"},
        {"content": "fine text", "title": f"title {LONE}"},
        {"content": "fine text", "external_id": f"ext{LONE}"},
        {"content": "fine text", "tags": [f"tag{LONE}"]},
        {"content": "fine text", "metadata": {f"key{LONE}": 1}},
        {"content": "fine text", "metadata": {"key": f"value{LONE}"}},
        {"content": "fine text", "metadata": {"key": ["ok", {"deeper": LONE}]}},
        {"content": "fine text", "metadata": {"key": "a\x00b"}},
        {"content": "fine text", "metadata": {"a\x00": "b"}},
        {"content": "text with a NUL \x00 inside"},
        {"content": "fine text", "metadata": _deep(5000)},
        {"content": "fine text", "metadata": _self_referencing()},
        {"content": "fine text", "metadata": _cyclic_list()},
    ],
    ids=[
        "content-surrogate",
        "title-surrogate",
        "external-id-surrogate",
        "tag-surrogate",
        "meta-key-surrogate",
        "meta-value-surrogate",
        "meta-nested-surrogate",
        "meta-value-nul",
        "meta-key-nul",
        "content-nul",
        "meta-5000-deep",
        "meta-self-reference",
        "meta-cyclic-list",
    ],
)
async def test_hostile_input_is_refused_alike_and_loses_nothing(
    kb: Khora, ns: str, kwargs: dict[str, Any]
) -> None:
    kept = await kb.remember("Ada Lovelace wrote the first program.", namespace=ns)
    kwargs = dict(kwargs)  # the parameter dict is shared by the cases of both stacks
    content = kwargs.pop("content")
    with pytest.raises(InvalidInputError):
        await kb.remember(content, namespace=ns, **kwargs)
    (outcome,) = await kb.remember_batch([{"content": content, **kwargs}], namespace=ns)
    assert isinstance(outcome, InvalidInputError)
    assert await _documents(kb, ns) == 1
    hits = await kb.recall("Who wrote the first program?", namespace=ns, mode="vector")
    assert [c.document_id for c in hits.chunks] == [kept.document_id]


async def test_metadata_at_the_depth_limit_is_stored(kb: Khora, ns: str) -> None:
    from khora_core.ingest.inputs import MAX_METADATA_DEPTH

    # MAX_METADATA_DEPTH mappings, the metadata itself the first of them
    result = await kb.remember("deep but allowed", namespace=ns, metadata=_deep(MAX_METADATA_DEPTH - 1))
    assert not result.duplicate
    with pytest.raises(InvalidInputError, match="nested"):
        await kb.remember("one level too deep", namespace=ns, metadata=_deep(MAX_METADATA_DEPTH))


async def test_hostile_namespace_ids_and_queries(kb: Khora, ns: str) -> None:
    with pytest.raises(InvalidInputError):
        await kb.create_namespace("x", namespace=f"ns{LONE}")
    with pytest.raises(InvalidInputError):
        await kb.create_namespace("x", namespace="ns\x00")
    for call in (
        kb.get_namespace(f"ns{LONE}"),
        kb.remember("fine", namespace=f"ns{LONE}"),
        kb.recall("fine", namespace=f"ns{LONE}"),
        kb.stats(f"ns{LONE}"),
        kb.list_entities(namespace=f"ns{LONE}"),
        kb.recall(f"question {LONE}", namespace=ns),
        kb.search_entities(f"name {LONE}", namespace=ns),
    ):
        with pytest.raises(InvalidInputError):
            await call
    assert ns in [n.namespace_id for n in await kb.list_namespaces()]


# -- 9. smaller ------------------------------------------------------------------------------


async def test_remember_keywords_and_batch_shapes(kb: Khora, ns: str) -> None:
    with pytest.raises(InvalidInputError, match="unknown_kw"):
        await kb.remember("some text", namespace=ns, unknown_kw=1)
    with pytest.raises(InvalidInputError, match="list of items"):
        await kb.remember_batch("hello", namespace=ns)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="list of items"):
        await kb.remember_batch({"content": "one item"}, namespace=ns)  # type: ignore[arg-type]
    assert await _documents(kb, ns) == 0
    (bad,) = await kb.remember_batch([{"content": "x", "unknown_kw": 1}], namespace=ns)
    assert isinstance(bad, InvalidInputError)


async def test_text_without_whitespace_is_cut_into_chunks(kb: Khora, ns: str) -> None:
    """2 MB without a space became one 2 MB chunk."""
    blob = "A" * 2_000_000
    result = await kb.remember(blob, namespace=ns)
    assert len(result.chunk_ids) > 100
    chunks = await kb.engine.stack.documents.get_chunks(ns, result.chunk_ids)
    assert max(len(c.content) for c in chunks) <= 24 * kb.config.ingest.chunk_tokens
    assert sum(len(c.content) for c in chunks) >= len(blob)  # every character is in a chunk


# -- 7. dates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "when",
    [
        datetime(1, 1, 1, tzinfo=timezone.utc),
        datetime.min,
        datetime.max,
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc),
        "0001-06-01T00:00:00Z",
        "9999-12-31T23:59:59.999999+00:00",
        -62135596800,  # 0001-01-01 as epoch seconds
    ],
)
async def test_dates_off_the_calendar_edge_are_refused(kb: Khora, ns: str, when: Any) -> None:
    with pytest.raises(InvalidInputError, match="date range"):
        await kb.remember("an ancient event", namespace=ns, occurred_at=when)
    if isinstance(when, datetime):  # the reference of relative dates in a question
        with pytest.raises(InvalidInputError, match="date range"):
            await kb.recall("what happened last year?", namespace=ns, now=when)
    assert await _documents(kb, ns) == 0


@pytest.mark.parametrize(
    "when", [datetime(2, 1, 1, tzinfo=timezone.utc), datetime(9998, 12, 31, 12, tzinfo=timezone.utc)]
)
async def test_dates_near_the_edge_round_trip_and_temporal_recall_works(
    kb: Khora, ns: str, when: datetime
) -> None:
    """Year 1 / 9999 were stored as -infinity/infinity on PostgreSQL; temporal recall then
    failed with 'year 0 is out of range', and relative dates overflowed."""
    result = await kb.remember(
        "The harvest festival took place in the old town.", namespace=ns, occurred_at=when
    )
    (doc,) = await kb.engine.stack.documents.get_documents(ns, [result.document_id])
    assert doc.occurred_at == when
    questions = [
        "What happened last year at the festival?",
        "Which festival was yesterday?",
        "Which festival was 12345678901234567890 days ago?",
        "Which festival happened after 9999-12-31?",
        "Which festival happened before 0002-01-01?",
        "What is the latest festival?",
    ]
    for question in questions:  # "now" is the newest occurred_at: ``when``
        recalled = await kb.recall(question, namespace=ns, mode="keyword")
        assert [c.document_id for c in recalled.chunks] == [result.document_id]
        assert recalled.chunks[0].occurred_at == when
    with_now = await kb.recall("Which festival was last week?", namespace=ns, mode="keyword", now=when)
    assert [c.document_id for c in with_now.chunks] == [result.document_id]


# -- 4 and 5. concurrent writers -------------------------------------------------------------


async def _mention_counts(kb: Khora, ns: str) -> dict[str, int]:
    return {e.name: e.mention_count for e in await kb.list_entities(namespace=ns, limit=1000)}


async def test_concurrent_batches_of_the_same_content_store_it_once(kb: Khora, ns: str) -> None:
    """PostgreSQL reported duplicate=False for most and inflated mention counts 3-4x."""
    items = [{"content": _passage(i)} for i in range(12)]
    results = await asyncio.gather(*(kb.remember_batch(items, namespace=ns) for _ in range(4)))
    for i in range(len(items)):
        outcomes = [r[i] for r in results]
        assert all(isinstance(o, RememberResult) for o in outcomes), outcomes
        assert sum(not o.duplicate for o in outcomes) == 1, outcomes  # type: ignore[union-attr]
        assert len({o.document_id for o in outcomes}) == 1  # type: ignore[union-attr]
    assert await _documents(kb, ns) == len(items)
    concurrent = await _mention_counts(kb, ns)

    once = (await kb.create_namespace("once", namespace=f"rel-{uuid.uuid4().hex[:12]}")).namespace_id
    try:
        await kb.remember_batch(items, namespace=once)
        assert concurrent == await _mention_counts(kb, once)
        assert concurrent, "the offline extractor found no entities"
    finally:
        await kb.delete_namespace(once)


async def test_concurrent_remembers_of_one_external_id_keep_one_version(kb: Khora, ns: str) -> None:
    """Embedded kept 4 versions of 4, PostgreSQL 2 of 4."""
    for _ in range(3):
        contents = [f"Version {uuid.uuid4().hex[:6]} of the Lisbon report by Maya Chen." for _ in range(4)]
        results = await asyncio.gather(
            *(kb.remember(c, namespace=ns, external_id="report-1") for c in contents), return_exceptions=True
        )
        assert all(isinstance(r, RememberResult) for r in results), results
        stored = await kb.engine.stack.documents.find_documents_by_external_id(ns, "report-1")
        assert len(stored) == 1
        assert stored[0].content in contents
        stats = await kb.stats(ns)
        assert (stats.documents, stats.chunks) == (1, 1)
        if kb.storage_backend == "postgres":
            records, _, _ = await kb.engine.stack._driver.execute_query(
                "MATCH (c:Chunk {namespace_id: $ns}) RETURN collect(DISTINCT c.document_id) AS docs",
                {"ns": ns},
            )
            assert records[0]["docs"] == [stored[0].id]


# -- 6. recall racing forget -----------------------------------------------------------------


async def test_recall_racing_forget_raises_nothing_untyped(kb: Khora, ns: str) -> None:
    """PostgreSQL + Neo4j raised ``KeyError: 'id'`` from a neighbourhood read."""
    items = [
        {"content": f"Report {i}. Maya Chen met Omar Haddad and Lena Ortiz in Lisbon."} for i in range(40)
    ]
    ids = [
        r.document_id for r in await kb.remember_batch(items, namespace=ns) if isinstance(r, RememberResult)
    ]
    assert len(ids) == len(items)
    errors: list[BaseException] = []

    async def forget_all() -> None:
        for doc_id in ids:
            await kb.forget(doc_id, namespace=ns)
            await asyncio.sleep(0)

    async def recall_until(done: asyncio.Task[None]) -> int:
        n = 0
        while not done.done():
            try:
                await kb.recall("Who did Maya Chen meet with Omar Haddad?", namespace=ns, mode="graph")
            except KhoraError as exc:  # typed errors are allowed; untyped ones are the defect
                if not isinstance(exc, StorageError):
                    errors.append(exc)
            except Exception as exc:
                errors.append(exc)
            n += 1
        return n

    forgetting = asyncio.ensure_future(forget_all())
    counts = await asyncio.gather(*(recall_until(forgetting) for _ in range(3)))
    await forgetting
    assert errors == []
    assert sum(counts) >= 3
    assert await _documents(kb, ns) == 0


async def test_a_question_longer_than_the_limit_is_refused_at_once(tmp_path) -> None:
    """A pasted megabyte as a question raises InvalidInputError naming the setting; one at
    the limit is answered."""
    from khora_core import Khora, KhoraConfig
    from khora_core.errors import InvalidInputError

    cfg = KhoraConfig(
        storage={"data_dir": str(tmp_path), "database_url": None}, query={"max_question_chars": 500}
    )
    async with Khora(config=cfg, embedder=RecordingEmbedder(DIM)) as kb:
        ns = (await kb.create_namespace("long")).namespace_id
        await kb.remember("Maya Chen leads Northwind Robotics.", namespace=ns)
        with pytest.raises(InvalidInputError, match="max_question_chars"):
            await kb.recall("Who leads Northwind? " * 1000, namespace=ns)
        result = await kb.recall(("Who leads Northwind? " * 30)[:500], namespace=ns)
        assert result.chunks
