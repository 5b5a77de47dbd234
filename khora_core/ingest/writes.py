"""The write stage of ``remember_batch``: a window's items land with one
``stack.write_many``; an item that must follow an earlier same-``external_id`` item, or
every item of a group the store rejected, is written on its own. A server that cannot be
reached fails the whole window at once (``StorageUnavailableError`` on every item): one by
one, each item would wait out the driver's retry period again."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from khora_core.errors import StorageUnavailableError
from khora_core.ingest.items import BatchOutcome, WorkItem, as_khora_error
from khora_core.ingest.records import document_records
from khora_core.models import RememberResult, WriteBatch
from khora_core.storage.protocols import StorageStack

__all__ = ["write_window"]

logger = logging.getLogger("khora.ingest")


async def write_window(
    stack: StorageStack, works: list[WorkItem], namespace_id: str, limit: asyncio.Semaphore, settle: Any
) -> None:
    """Land a window's items with one ``stack.write_many``. Items that must wait for an
    earlier item with the same ``external_id`` are written one by one after it; if the
    grouped write fails, every item is retried alone, so a bad item costs only itself."""
    grouped = [w for w in works if w.after is None]
    alone = [w for w in works if w.after is not None]
    if len(grouped) > 1:
        try:
            batches = list(await asyncio.gather(*(_batch(stack, w, namespace_id, limit) for w in grouped)))
            await stack.write_many(namespace_id, batches)
        except StorageUnavailableError as exc:
            for work in grouped + alone:
                settle(work, exc)
            return
        except Exception as exc:
            logger.info(
                "grouped write of %d documents failed (%s); writing them one by one", len(grouped), exc
            )
        else:
            for work, batch in zip(grouped, batches, strict=True):
                settle(work, _result(work, batch))
            grouped = []
    await asyncio.gather(*(_write_one(stack, w, namespace_id, limit, settle) for w in grouped + alone))


async def _write_one(
    stack: StorageStack, work: WorkItem, namespace_id: str, limit: asyncio.Semaphore, settle: Any
) -> None:
    """Land one item with its own ``stack.write`` (after an earlier same-``external_id`` item)."""
    try:
        if work.after is not None:
            await work.after.wait()
        batch = await _batch(stack, work, namespace_id, limit)
        async with limit:
            await stack.write(namespace_id, batch)
        outcome: BatchOutcome = _result(work, batch)
    except StorageUnavailableError as exc:
        outcome = exc  # the lookup below would wait on the same server
    except Exception as exc:  # keep the batch going; report it on the item
        outcome = await _stored_meanwhile(stack, work, namespace_id) or as_khora_error(exc, work.index)
    settle(work, outcome)


async def _stored_meanwhile(stack: StorageStack, work: WorkItem, namespace_id: str) -> RememberResult | None:
    """A concurrent call that remembered the same document first owns its id (derived from
    the content, or with ``dedup=False`` from the whole input), so this write collides with
    it: report a duplicate."""
    try:
        existing = await stack.documents.get_documents(namespace_id, [work.document_id])
    except Exception:
        return None
    if not existing:
        return None
    return RememberResult(document_id=work.document_id, namespace_id=namespace_id, duplicate=True)


async def _batch(
    stack: StorageStack, work: WorkItem, namespace_id: str, limit: asyncio.Semaphore
) -> WriteBatch:
    """The item's ``WriteBatch``, replacing the stored versions of its ``external_id``."""
    inp = work.inp
    graph = work.graph
    assert graph is not None
    failed = {cid for cid, ex in work.extractions.items() if ex.failed}
    document, chunks = document_records(
        inp,
        namespace_id=namespace_id,
        document_id=work.document_id,
        content_hash=work.hash,
        created_at=work.created_at,
        chunk_ids=work.chunk_ids,
        spans=work.spans,
        contexts=work.contexts,
        vectors=work.vectors,
        core=set(work.core or []),
        needs_extraction=failed,
    )
    replaces: list[str] = []
    if inp.external_id:
        async with limit:
            previous = await stack.documents.find_documents_by_external_id(namespace_id, inp.external_id)
        replaces = [d.id for d in previous if d.id != work.document_id]
    return WriteBatch(
        document=document,
        chunks=chunks,
        entities=graph.entities,
        mentions=graph.mentions,
        relationships=graph.relationships,
        replaces=replaces,
    )


def _result(work: WorkItem, batch: WriteBatch) -> RememberResult:
    return RememberResult(
        document_id=work.document_id,
        namespace_id=batch.document.namespace_id,
        chunk_ids=list(work.chunk_ids),
        entity_count=len(batch.entities),
        relationship_count=len(batch.relationships),
        replaced_document_ids=list(batch.replaces),
        extraction_failed_chunk_ids=[c.id for c in batch.chunks if c.needs_extraction],
        core_chunk_count=len(work.core or []),
    )
