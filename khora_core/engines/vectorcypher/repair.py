"""Finding and finishing documents that a failed write left half-stored.

On a stack whose rows and graph live on two servers (PostgreSQL + Neo4j) a write lands in
two steps. When the graph server is unreachable, the write's rows are rolled back, but a
slice of its graph that had already landed cannot be removed (a *stranded graph*: invisible
to recall, yet counted in entity mention counts). When the process itself dies between the
two steps, the rows stay without their graph (recall finds the chunks by vector and keyword,
never by the graph). ``repair_namespace`` compares the two servers and fixes both:
stranded graphs are removed, and documents without their graph are remembered again from
their stored content and fields. A document whose repair fails is left as it was and
reported. A stack that writes in one transaction (the embedded store) has nothing to
repair.
"""

from __future__ import annotations

from typing import Any

from khora_core.errors import KhoraError
from khora_core.ingest.dedup import document_id as content_document_id
from khora_core.models import Document, RememberResult, RepairReport, WriteBatch
from khora_core.storage.protocols import StorageStack

__all__ = ["repair_namespace"]


async def repair_namespace(stack: StorageStack, ingest: Any, namespace_id: str) -> RepairReport:
    """Remove stranded graphs and rebuild missing ones in ``namespace_id`` (module docstring).

    Args:
        stack: the storage stack; one without ``graph_gaps`` is consistent by construction.
        ingest: the ``IngestPipeline`` that remembers documents again.
        namespace_id: the namespace to check.
    """
    gaps = getattr(stack, "graph_gaps", None)
    if gaps is None:
        return RepairReport(namespace_id=namespace_id, documents_checked=await _count(stack, namespace_id))
    checked, stranded, missing = await gaps(namespace_id)
    report = RepairReport(namespace_id=namespace_id, documents_checked=checked)
    for doc_id in stranded:
        try:
            await stack.drop_graph(namespace_id, doc_id)  # type: ignore[attr-defined]
            report.stranded_graphs.append(doc_id)
        except Exception as exc:
            report.failed[doc_id] = _describe(exc)
    for doc in await stack.documents.get_documents(namespace_id, missing):
        try:
            await _rebuild(stack, ingest, namespace_id, doc)
            report.rebuilt.append(doc.id)
        except Exception as exc:
            report.failed[doc.id] = _describe(exc)
    return report


async def _rebuild(stack: StorageStack, ingest: Any, namespace_id: str, doc: Document) -> None:
    """Remember ``doc`` again from its stored fields; on failure put its rows back."""
    chunk_ids = (await stack.documents.chunk_ids_for_documents(namespace_id, [doc.id])).get(doc.id, [])  # type: ignore[attr-defined]
    chunks = await stack.documents.get_chunks(namespace_id, chunk_ids)
    vectors = await stack.vectors.embeddings(namespace_id, chunk_ids)
    saved = WriteBatch(
        document=doc,
        chunks=[c.model_copy(update={"embedding": vectors.get(c.id)}) for c in chunks],
    )
    await stack.delete_document(namespace_id, doc.id)
    try:
        [outcome] = await ingest.remember_batch([_as_item(namespace_id, doc)], namespace_id=namespace_id)
        if not isinstance(outcome, RememberResult):
            raise outcome
    except BaseException:
        await stack.documents.write_rows_many(namespace_id, [saved])  # type: ignore[attr-defined]
        raise


def _as_item(namespace_id: str, doc: Document) -> dict[str, Any]:
    """The ``remember`` item that stores ``doc`` again under the same id."""
    item: dict[str, Any] = {
        "content": doc.content,
        "content_type": doc.content_type,
        "title": doc.title,
        "metadata": dict(doc.metadata),
        "tags": list(doc.tags),
        "occurred_at": doc.occurred_at,
        "source_timestamp": doc.source_timestamp,
        "source_type": doc.source_type,
        "source_name": doc.source_name,
        "source_url": doc.source_url,
        "external_id": doc.external_id,
        "source": doc.source,
    }
    if doc.external_id and doc.id != content_document_id(namespace_id, doc.content_hash):
        item["dedup"] = False  # keyed by external id, not by content
    return {k: v for k, v in item.items() if v is not None}


def _describe(exc: BaseException) -> str:
    kind = type(exc).__name__ if isinstance(exc, KhoraError) else f"unexpected {type(exc).__name__}"
    return f"{kind}: {exc}"


async def _count(stack: StorageStack, namespace_id: str) -> int:
    return int((await stack.stats(namespace_id)).documents)
