"""``VectorCypherEngine``: the spec's engine, wiring ingest and retrieval to one stack."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from khora_core.config import KhoraConfig
from khora_core.embedding.base import Embedder
from khora_core.engines.vectorcypher.entities import EntityReader
from khora_core.engines.vectorcypher.warm_up import WARM_UP_RECALLS, warm_up
from khora_core.models import RecallResult, RememberResult, RepairReport, SearchMode
from khora_core.storage.protocols import StorageStack

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter
    from khora_core.llm.client import LLMClient

__all__ = ["SETTLE_AFTER_CHUNKS", "VectorCypherEngine"]

#: A ``remember_batch`` that stores at least this many new chunks settles the stack after
#: it (``VectorCypherEngine.settle``); smaller batches leave it to the servers' own rounds.
SETTLE_AFTER_CHUNKS = 1000


class VectorCypherEngine:
    """Hybrid memory over a ``StorageStack``.

    Args:
        stack: an opened storage stack.
        embedder: the embedder for chunks, entities and queries.
        config: the global configuration; ``config.vectorcypher`` holds the engine knobs.
        llm: an ``LLMClient``; built from ``config.llm`` when a model is configured.
        extractor: an entity extractor; the LLM extractor when an LLM is configured,
            otherwise the offline extractor.
        settle_after_chunks: a ``remember_batch`` storing at least this many new chunks
            ends with ``settle()``; 0 never settles on its own.
        warm_up_recalls: the most recalls that ``settle(namespace_id)`` runs to warm the
            read path (``warm_up.py``: 300, then more while Neo4j's JVM is still compiling,
            for 120 s at most); 0 turns the warm-up off.
    """

    name = "vectorcypher"

    def __init__(
        self,
        *,
        stack: StorageStack,
        embedder: Embedder,
        config: KhoraConfig,
        llm: LLMClient | None = None,
        extractor: Any = None,
        settle_after_chunks: int = SETTLE_AFTER_CHUNKS,
        warm_up_recalls: int = WARM_UP_RECALLS,
    ) -> None:
        from khora_core.ingest.pipeline import IngestPipeline
        from khora_core.retrieval.pipeline import RecallPipeline

        self.stack = stack
        self.settle_after_chunks = int(settle_after_chunks)
        self.warm_up_recalls = int(warm_up_recalls)
        #: What the last ``settle()`` did (seconds per step), empty before the first.
        self.last_settle: dict[str, Any] = {}
        self.embedder = embedder
        self.config = config
        if llm is None and config.llm.model:
            from khora_core.llm.client import LLMClient

            llm = LLMClient(config.llm)
        self.llm = llm
        if extractor is None:
            if llm is not None:
                from khora_core.ingest.extract_llm import LLMExtractor

                extractor = LLMExtractor(llm, concurrency=config.llm.concurrency)
            else:
                from khora_core.ingest.extract_offline import OfflineExtractor

                extractor = OfflineExtractor()
        self.extractor = extractor
        self.ingest = IngestPipeline(stack=stack, embedder=embedder, extractor=extractor, config=config)
        self.retrieval = RecallPipeline(stack=stack, embedder=embedder, config=config, llm=llm)
        self.entities = EntityReader(stack=stack, embedder=embedder, config=config)

    async def remember(self, content: str, *, namespace_id: str, **kwargs: Any) -> RememberResult:
        with self._writing(namespace_id):
            return await self.ingest.remember(content, namespace_id=namespace_id, **kwargs)

    async def remember_batch(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        namespace_id: str,
        concurrency: int | None = None,
        progress: bool = False,
    ) -> Any:
        with self._writing(namespace_id):
            results = await self.ingest.remember_batch(
                items, namespace_id=namespace_id, concurrency=concurrency, progress=progress
            )
        stored = sum(len(r.chunk_ids) for r in results if isinstance(r, RememberResult) and not r.duplicate)
        if self.settle_after_chunks > 0 and stored >= self.settle_after_chunks:
            await self.settle()
        return results

    async def settle(self, namespace_id: str | None = None) -> dict[str, Any]:
        """Bring the stack to steady reads after a large write (a stack without background
        work, the embedded one, has nothing to settle) and, given a namespace, warm its read
        path with ``warm_up_recalls`` recalls from that namespace's documents
        (``warm_up.py``). Returns seconds per step."""
        settle = getattr(self.stack, "settle", None)
        report = dict(await settle()) if settle is not None else {}
        if namespace_id is not None and self.warm_up_recalls > 0:
            report.update(
                await warm_up(
                    self.stack, self.embedder, self.config, namespace_id, recalls=self.warm_up_recalls
                )
            )
        self.last_settle = report
        return report

    async def repair(self, namespace_id: str) -> RepairReport:
        """Remove stranded graphs and rebuild missing ones (``repair.repair_namespace``)."""
        from khora_core.engines.vectorcypher.repair import repair_namespace

        with self._writing(namespace_id):
            return await repair_namespace(self.stack, self.ingest, namespace_id)

    async def unsettled(self) -> list[str]:
        """Background work the stack's servers still have (from recent writes, or a JVM
        still compiling); empty when reads should be steady (always, on a stack without
        servers)."""
        unsettled = getattr(self.stack, "unsettled", None)
        return list(await unsettled()) if unsettled is not None else []

    async def recall(
        self,
        query: str,
        *,
        namespace_id: str,
        limit: int,
        mode: SearchMode,
        min_similarity: float,
        filter: RecallFilter | None,
        time_window: tuple[datetime | None, datetime | None] | None,
        now: datetime | None,
    ) -> RecallResult:
        return await self.retrieval.recall(
            query,
            namespace_id=namespace_id,
            limit=limit,
            mode=mode,
            min_similarity=min_similarity,
            filter=filter,
            time_window=time_window,
            now=now,
        )

    async def forget(
        self, *, namespace_id: str, document_id: str | None = None, external_id: str | None = None
    ) -> bool:
        with self._writing(namespace_id):
            return await self._forget(namespace_id, document_id, external_id)

    async def delete_namespace(self, namespace_id: str) -> bool:
        with self._writing(namespace_id):
            return bool(await self.stack.delete_namespace(namespace_id))

    @contextlib.contextmanager
    def _writing(self, namespace_id: str) -> Iterator[None]:
        """Around a write to ``namespace_id``: the read path's cached chunk count of that
        namespace is dropped afterwards, whether the write succeeded or not."""
        try:
            yield
        finally:
            self.retrieval.chunk_counts.invalidate(namespace_id)

    async def _forget(self, namespace_id: str, document_id: str | None, external_id: str | None) -> bool:
        if document_id is not None:
            return bool(await self.stack.delete_document(namespace_id, document_id))
        docs = await self.stack.documents.find_documents_by_external_id(namespace_id, str(external_id))
        removed = False
        for doc in docs:
            removed = bool(await self.stack.delete_document(namespace_id, doc.id)) or removed
        return removed
