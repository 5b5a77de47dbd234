"""Content hashing for deduplication within a namespace, the document ids built on it, the
lookup that settles a batch's items that are stored already, and the batch's own repeats.

A document's id is derived from its content (:func:`document_id`), so the namespace keeps
one document per content. An item remembered with ``dedup=False`` is keyed by its
``external_id`` instead (:func:`item_document_id`): its id is derived from the whole input,
so identical text under two external ids is two documents, and the same input written
twice is still one."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import unicodedata
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from khora_core.errors import KhoraError, StorageUnavailableError
from khora_core.ingest.items import BatchOutcome, WorkItem, as_khora_error
from khora_core.models import RememberResult

if TYPE_CHECKING:
    from khora_core.ingest.inputs import RememberInput
    from khora_core.storage.protocols import StorageStack

__all__ = [
    "content_hash",
    "document_id",
    "follow_original",
    "item_document_id",
    "normalise_content",
    "settle_stored",
    "split_repeats",
]

#: The uuid5 namespace of document ids.
KHORA_DOCUMENT_NAMESPACE = uuid.UUID("3b9a6f52-4c1d-5e8f-a2b7-646f63756d65")

_WHITESPACE = re.compile(r"\s+")


def normalise_content(text: str) -> str:
    """The form two texts must share to count as the same content.

    Unicode NFC (so composed and decomposed accents match), surrounding whitespace
    stripped, and every run of whitespace (including newlines) collapsed to one space.
    Case and punctuation are kept: they can change meaning.
    """
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def content_hash(text: str) -> str:
    """SHA-256 hex digest of :func:`normalise_content` (UTF-8)."""
    return hashlib.sha256(normalise_content(text).encode("utf-8")).hexdigest()


def document_id(namespace_id: str, digest: str) -> str:
    """The id of the document with content hash ``digest`` in ``namespace_id``: uuid5 of the
    two. Deduplication keeps one document per content per namespace, so the id is unique
    there, and the same input gets the same document, chunk and relationship ids in every
    store and on every ingest (rankings that break exact ties by id then agree)."""
    return str(uuid.uuid5(KHORA_DOCUMENT_NAMESPACE, f"{namespace_id}\x00{digest}"))


def item_document_id(namespace_id: str, inp: RememberInput, digest: str) -> str:
    """The id of the document ``inp`` is written as.

    With content dedup (``inp.dedup``, the default) it is :func:`document_id`. With
    ``dedup=False`` it is a uuid5 of the namespace and every field of the input (exact
    content, ``external_id``, metadata, the system fields, tags): deterministic like the
    content id, different for each external id, and different when anything about the
    document changes, so a new version of an ``external_id`` replaces the stored one while
    an identical one is reported as a duplicate.
    """
    if inp.dedup:
        return document_id(namespace_id, digest)
    fields = dataclasses.asdict(inp)
    fingerprint = json.dumps(fields, sort_keys=True, default=str, ensure_ascii=False)
    keyed = hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()
    return str(uuid.uuid5(KHORA_DOCUMENT_NAMESPACE, f"{namespace_id}\x00keyed\x00{keyed}"))


async def settle_stored(
    stack: StorageStack,
    namespace_id: str,
    works: Sequence[WorkItem],
    settle: Callable[[WorkItem, BatchOutcome], None],
) -> None:
    """Settle, as duplicates, the items the namespace holds already: the items with content
    dedup whose content is stored (one ``find_documents_by_hashes`` lookup), the items keyed
    by ``external_id`` whose document id is stored (one ``get_documents`` lookup). A failed
    lookup settles every item with that error."""
    by_content = [w for w in works if w.inp.dedup]
    keyed = [w.document_id for w in works if not w.inp.dedup]
    try:
        stored = (
            await stack.documents.find_documents_by_hashes(namespace_id, [w.hash for w in by_content])
            if by_content
            else {}
        )
        stored_ids = (
            {d.id for d in await stack.documents.get_documents(namespace_id, keyed)} if keyed else set()
        )
    except Exception as exc:
        for work in works:
            settle(work, as_khora_error(exc, work.index))
        return
    for work in works:
        if not work.inp.dedup:
            if work.document_id in stored_ids:
                settle(
                    work,
                    RememberResult(document_id=work.document_id, namespace_id=namespace_id, duplicate=True),
                )
            continue
        existing = stored.get(work.hash)
        if existing is not None:
            settle(work, RememberResult(document_id=existing.id, namespace_id=namespace_id, duplicate=True))


def split_repeats(works: Sequence[WorkItem]) -> tuple[list[WorkItem], list[tuple[WorkItem, WorkItem]]]:
    """The items to process, and each repeat of an earlier item paired with that original.

    A repeat has an earlier item's document id (the same content, or with ``dedup=False``
    the same input); it waits for the original (:func:`follow_original`). Items sharing an
    ``external_id`` are chained in input order through ``WorkItem.after``.
    """
    first_by_id: dict[str, WorkItem] = {}
    last_by_external: dict[str, WorkItem] = {}
    live: list[WorkItem] = []
    repeats: list[tuple[WorkItem, WorkItem]] = []
    for work in works:
        original = first_by_id.get(work.document_id)
        if original is not None:
            repeats.append((work, original))
            continue
        first_by_id[work.document_id] = work
        if work.inp.external_id:
            previous = last_by_external.get(work.inp.external_id)
            work.after = previous.done if previous else None
            last_by_external[work.inp.external_id] = work
        live.append(work)
    return live, repeats


async def follow_original(
    work: WorkItem,
    original: WorkItem,
    namespace_id: str,
    settle: Callable[[WorkItem, BatchOutcome], None],
) -> None:
    """Settle the repeat ``work`` once ``original`` is settled: as a duplicate of what was
    stored, with the original's ``StorageUnavailableError``, or as failed with it."""
    await original.done.wait()
    first = original.outcome
    if isinstance(first, RememberResult):
        settle(
            work,
            RememberResult(document_id=first.document_id, namespace_id=namespace_id, duplicate=True),
        )
    elif isinstance(first, StorageUnavailableError):
        settle(work, first)
    else:
        settle(work, KhoraError(f"Same content as batch item {original.index}, which failed: {first}"))
