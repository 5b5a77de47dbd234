"""Content hashing for deduplication within a namespace, the document ids built on it, and
the lookup that settles a batch's items whose content is stored already."""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from khora_core.ingest.items import BatchOutcome, WorkItem, as_khora_error
from khora_core.models import RememberResult

if TYPE_CHECKING:
    from khora_core.storage.protocols import StorageStack

__all__ = ["content_hash", "document_id", "normalise_content", "settle_stored"]

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


async def settle_stored(
    stack: StorageStack,
    namespace_id: str,
    works: Sequence[WorkItem],
    settle: Callable[[WorkItem, BatchOutcome], None],
) -> None:
    """Settle, as duplicates, the items whose content the namespace holds already: one
    lookup for all of them (``find_documents_by_hashes``). A failed lookup settles every
    item with that error."""
    try:
        stored = await stack.documents.find_documents_by_hashes(namespace_id, [w.hash for w in works])
    except Exception as exc:
        for work in works:
            settle(work, as_khora_error(exc, work.index))
        return
    for work in works:
        existing = stored.get(work.hash)
        if existing is not None:
            settle(work, RememberResult(document_id=existing.id, namespace_id=namespace_id, duplicate=True))
