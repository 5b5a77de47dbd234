"""``IngestPipeline``: ``remember`` and ``remember_batch``.

One document goes: validate -> dedup (content hash in the namespace) -> chunk -> embed
chunks -> skeleton core (PageRank) -> extract core chunks -> look up matching stored
entities -> resolve entities -> keyword-link every chunk to the known names -> embed
entity names -> build mentions and relationships -> ONE ``stack.write`` that lands
everything (and removes the documents it replaces, same ``external_id``) or nothing.

``remember_batch`` looks the items' content hashes up in one call (not one per item),
chunks every item, then works through them in *windows* of
about one embedding slice of chunks (``max(256, 8 * embedding.batch_size)``). Per window:
embed its chunks in one call; per item (bounded concurrency) select the skeleton core and
extract; look up the stored entities that the window's items may name, in one call (one
round trip per window instead of one per item); resolve and assemble each item's graph in
input order, against stored entities and those built earlier in the batch
(:class:`~khora_core.ingest.names.BatchEntities`), embedding only the few names whose
vector decides a merge; embed the window's entity names that the batch has not embedded
yet in one call (:class:`~khora_core.ingest.names.NameVectors`, seeded with stored
entities' embeddings; which entities get one is ``IngestConfig.entity_vectors``, and
``DATE`` entities never do); then start the window's write, which runs while the next
window embeds: ONE ``stack.write_many`` for all its items (one transaction per server
instead of one per document), retried item by item if the store rejects it, so a bad item
costs only itself. That write lands before the next window looks up stored entities, so
the same batch builds the same graph however fast the store is.
Each item ends as a ``RememberResult`` or the ``KhoraError`` that stopped it, at its input
index: no item is lost, and one failure does not stop the others, except a server that
cannot be reached: once an item fails with ``StorageUnavailableError``, every item not yet
written fails with one too, without trying (so a batch whose server died returns within
about one driver retry period, ``StorageConfig.connect_timeout_s`` and at least 5 s, not
one per item). Items with the same
``external_id`` are written in input order (a later one is written on its own, after the
earlier one); an item repeating an earlier item's content waits for it and reports it as a
duplicate.

A core chunk whose extraction fails is still stored, flagged ``needs_extraction``, and
listed in ``RememberResult.extraction_failed_chunk_ids``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from khora_core.config import KhoraConfig
from khora_core.embedding.base import Embedder
from khora_core.errors import InvalidInputError, KhoraError, NamespaceNotFoundError, StorageUnavailableError
from khora_core.ingest.candidates import candidate_names
from khora_core.ingest.chunking import TextSpan, chunk_context, chunk_text
from khora_core.ingest.dedup import (
    content_hash,
    follow_original,
    item_document_id,
    settle_stored,
    split_repeats,
)
from khora_core.ingest.extract_base import ChunkExtraction, Extractor
from khora_core.ingest.graph_build import extracted_mentions
from khora_core.ingest.inputs import RememberInput, prepare_input
from khora_core.ingest.items import BatchOutcome, WorkItem, as_khora_error, windows
from khora_core.ingest.names import BatchEntities, NameVectors
from khora_core.ingest.resolve import EntityResolver
from khora_core.ingest.skeleton import select_core_chunks
from khora_core.ingest.window_graph import build_graphs, find_stored
from khora_core.ingest.writes import write_window
from khora_core.models import RememberResult
from khora_core.storage.protocols import StorageStack

__all__ = ["BatchOutcome", "IngestPipeline"]

logger = logging.getLogger("khora.ingest")


class IngestPipeline:
    """The write path (see the module docstring).

    Args:
        stack: the storage stack to write to.
        embedder: embeds chunks and entity names.
        extractor: extracts entities and relations from core chunks (LLM or offline).
        config: Khora's configuration (``ingest``, ``embedding`` and ``vectorcypher`` sections).
        resolver: entity resolver; built from ``config.ingest`` when None.
    """

    def __init__(
        self,
        *,
        stack: StorageStack,
        embedder: Embedder,
        extractor: Extractor,
        config: KhoraConfig,
        resolver: EntityResolver | None = None,
    ) -> None:
        self.stack = stack
        self.embedder = embedder
        self.extractor = extractor
        self.config = config
        self.resolver = resolver or EntityResolver.from_config(config.ingest)

    async def remember(
        self,
        content: str,
        *,
        namespace_id: str,
        title: str | None = None,
        context: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        entity_types: Sequence[str] | None = None,
        relationship_types: Sequence[str] | None = None,
        occurred_at: datetime | str | None = None,
        source_type: str | None = None,
        source_name: str | None = None,
        source_url: str | None = None,
        external_id: str | None = None,
        content_type: str | None = None,
        source_timestamp: datetime | str | None = None,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        dedup: bool = True,
        extract: bool = True,
    ) -> RememberResult:
        """Store one document (see :mod:`khora_core.ingest.inputs` for the input rules).

        Returns:
            What was stored; ``duplicate=True`` with the existing id when the same content
            is already in the namespace.

        Raises:
            NamespaceNotFoundError: the namespace does not exist.
            InvalidInputError: bad arguments (``ContentTooLargeError``, ``UnsupportedContentError``).
            StorageError: the write failed; nothing was stored.
        """
        work = self._work(
            0,
            prepare_input(
                self.config.ingest,
                content=content,
                title=title,
                context=context,
                metadata=metadata,
                entity_types=entity_types,
                relationship_types=relationship_types,
                occurred_at=occurred_at,
                source_type=source_type,
                source_name=source_name,
                source_url=source_url,
                external_id=external_id,
                content_type=content_type,
                source_timestamp=source_timestamp,
                tags=tags,
                source=source,
                dedup=dedup,
                extract=extract,
            ),
            namespace_id,
        )
        await self._require_namespace(namespace_id)
        outcome = (await self._run([work], namespace_id, concurrency=1, progress=None))[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def remember_batch(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        namespace_id: str,
        concurrency: int | None = None,
        progress: bool = False,
    ) -> list[BatchOutcome]:
        """Store many documents; each item holds ``remember``'s keywords (``content`` required).

        Args:
            items: one mapping per document.
            namespace_id: where to store them.
            concurrency: items extracted and written at once (``IngestConfig.batch_concurrency``).
            progress: show a tqdm progress bar.

        Returns:
            One outcome per item, in input order: a ``RememberResult`` or the ``KhoraError``
            that stopped that item.

        Raises:
            NamespaceNotFoundError: the namespace does not exist (nothing is attempted).
        """
        await self._require_namespace(namespace_id)
        outcomes: list[BatchOutcome | None] = [None] * len(items)
        works: list[WorkItem] = []
        for i, item in enumerate(items):
            try:
                if not isinstance(item, Mapping):
                    raise InvalidInputError(f"batch item {i} must be a mapping with a 'content' key")
                works.append(self._work(i, prepare_input(self.config.ingest, **item), namespace_id))
            except KhoraError as exc:
                outcomes[i] = exc
            except TypeError as exc:  # e.g. non-string keys
                outcomes[i] = InvalidInputError(f"batch item {i}: {exc}")
        bar = _progress_bar(len(items)) if progress else None
        if bar is not None:
            bar.update(sum(o is not None for o in outcomes))
        done = await self._run(works, namespace_id, concurrency=concurrency, progress=bar)
        for work, outcome in zip(works, done, strict=True):
            outcomes[work.index] = outcome
        if bar is not None:
            bar.close()
        return [o for o in outcomes if o is not None]

    # -- stages ---------------------------------------------------------------------------

    async def _require_namespace(self, namespace_id: str) -> None:
        if not isinstance(namespace_id, str) or not namespace_id:
            raise InvalidInputError("namespace_id must be a non-empty string")
        if await self.stack.documents.get_namespace(namespace_id) is None:
            raise NamespaceNotFoundError(
                f"Namespace {namespace_id!r} does not exist. Create it first with "
                "`await khora.create_namespace(...)` and pass its namespace_id."
            )

    def _work(self, index: int, inp: RememberInput, namespace_id: str) -> WorkItem:
        digest = content_hash(inp.content)
        return WorkItem(
            index=index,
            inp=inp,
            hash=digest,
            document_id=item_document_id(namespace_id, inp, digest),
            created_at=datetime.now(timezone.utc),
        )

    async def _run(
        self, works: list[WorkItem], namespace_id: str, *, concurrency: int | None, progress: Any
    ) -> list[BatchOutcome]:
        """Take ``works`` through the stages of the module docstring; one outcome each, in order."""
        width = max(1, concurrency or self.config.ingest.batch_concurrency)
        limit = asyncio.Semaphore(width)  # lookups and extraction
        write_limit = asyncio.Semaphore(width)  # writes (they overlap the next window)

        lost: list[StorageUnavailableError] = []  # the first unreachable-server error

        def settle(work: WorkItem, outcome: BatchOutcome) -> None:
            if isinstance(outcome, StorageUnavailableError) and not lost:
                lost.append(outcome)
            if work.outcome is None:
                work.outcome = outcome
                work.done.set()
                if progress is not None:
                    progress.update(1)
            # Nothing of a finished item is needed any more.
            work.spans, work.vectors, work.extractions = [], [], {}
            work.candidates, work.stored, work.graph = [], [], None

        # Repeats inside the batch wait for the first copy; same external_id runs in order.
        live, repeats = split_repeats(works)
        followed = [asyncio.ensure_future(follow_original(w, o, namespace_id, settle)) for w, o in repeats]
        writing: asyncio.Future[None] | None = None  # the previous window's write
        try:
            await settle_stored(self.stack, namespace_id, live, settle)
            live = [w for w in live if w.outcome is None]
            for work in live:
                self._chunk(work)
            names = NameVectors(self.embedder)
            built = BatchEntities()
            batch_skeleton = self.config.vectorcypher.skeleton_scope == "batch" and len(live) > 1
            if batch_skeleton:  # the core is chosen among all chunks: embed them all first
                await self._embed_chunks(live, settle)
                self._select_batch_core([w for w in live if w.outcome is None])
            for window in windows(live, self._slice_size()):
                if lost:
                    _give_up(window, lost[0], settle)
                    continue
                if not batch_skeleton:
                    await self._embed_chunks(window, settle)
                # The previous window's write runs while this one embeds and extracts; it
                # lands before this window looks up stored entities, so what is built never
                # depends on how fast a write was.
                ready = [w for w in window if w.outcome is None]
                await asyncio.gather(*(self._prepare(w, limit, settle) for w in ready))
                if writing is not None:
                    await writing
                ready = [w for w in ready if w.outcome is None]
                if lost:
                    _give_up(ready, lost[0], settle)
                    continue
                await find_stored(self.stack, ready, namespace_id, settle)
                ready = [w for w in ready if w.outcome is None]
                await build_graphs(
                    ready,
                    namespace_id,
                    resolver=self.resolver,
                    names=names,
                    built=built,
                    entity_vectors=self.config.ingest.entity_vectors,
                    settle=settle,
                )
                writing = asyncio.ensure_future(
                    write_window(
                        self.stack, [w for w in ready if w.outcome is None], namespace_id, write_limit, settle
                    )
                )
            if writing is not None:
                await writing
            await asyncio.gather(*followed)
        except BaseException:
            pending = [*followed, *([writing] if writing is not None else [])]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            raise
        return [w.outcome for w in works if w.outcome is not None]

    def _chunk(self, work: WorkItem) -> None:
        """Cut the item into chunks, with their ids and (``IngestConfig.chunk_context``) contexts."""
        work.spans = chunk_text(
            work.inp.content,
            max_tokens=self.config.ingest.chunk_tokens,
            overlap_tokens=self.config.ingest.chunk_overlap_tokens,
        ) or [TextSpan(0, len(work.inp.content), work.inp.content, 1)]
        base = uuid.UUID(work.document_id)
        work.chunk_ids = [str(uuid.uuid5(base, str(i))) for i in range(len(work.spans))]
        work.contexts = (
            [chunk_context(work.inp.title, work.inp.content, s) for s in work.spans]
            if self.config.ingest.chunk_context
            else [None] * len(work.spans)
        )

    def _slice_size(self) -> int:
        return max(256, self.config.embedding.batch_size * 8)

    def _select_batch_core(self, works: list[WorkItem]) -> None:
        """``skeleton_scope="batch"``: the core is the most central chunks of all ``works``."""
        vc = self.config.vectorcypher
        core = set(
            select_core_chunks(
                [v for w in works for v in w.vectors],
                core_ratio=vc.skeleton_core_ratio,
                similarity_threshold=vc.skeleton_similarity_threshold,
                segments=[len(w.vectors) for w in works],
            )
        )
        offset = 0
        for work in works:
            work.core = [i for i in range(len(work.vectors)) if offset + i in core]
            offset += len(work.vectors)

    async def _prepare(self, work: WorkItem, limit: asyncio.Semaphore, settle: Any) -> None:
        """Skeleton core, extraction, and the names the item may share with stored entities."""
        async with limit:
            try:
                vc = self.config.vectorcypher
                if work.core is None:
                    work.core = select_core_chunks(
                        work.vectors,
                        core_ratio=vc.skeleton_core_ratio,
                        similarity_threshold=vc.skeleton_similarity_threshold,
                    )
                work.extractions = await self._extract(work, work.core)
                core_set = set(work.core)
                non_core_text = [s.text for i, s in enumerate(work.spans) if i not in core_set]
                mentions = extracted_mentions(work.extractions)
                work.candidates = candidate_names([m.name for m in mentions], non_core_text)
            except Exception as exc:  # keep the batch going; report it on the item
                settle(work, as_khora_error(exc, work.index))

    async def _embed_chunks(self, works: list[WorkItem], settle: Any) -> None:
        """Embed every chunk of every item in large slices (fast across small items)."""
        slice_size = self._slice_size()
        flat = [(w, i) for w in works for i in range(len(w.spans))]
        for work in works:
            work.vectors = [[] for _ in work.spans]
        for start in range(0, len(flat), slice_size):
            part = flat[start : start + slice_size]
            part = [(w, i) for w, i in part if w.outcome is None]
            if not part:
                continue
            try:
                vectors = await self.embedder.embed_documents([_search_text(w, i) for w, i in part])
                if len(vectors) != len(part):
                    raise KhoraError(f"The embedder returned {len(vectors)} vectors for {len(part)} chunks.")
            except Exception as exc:
                for w, _ in part:
                    settle(w, as_khora_error(exc, w.index))
                continue
            for (w, i), vector in zip(part, vectors, strict=True):
                w.vectors[i] = vector

    async def _extract(self, work: WorkItem, core: list[int]) -> dict[str, ChunkExtraction]:
        pairs = [(work.chunk_ids[i], work.spans[i].text) for i in core]
        if not pairs or not work.inp.extract:
            return {}
        try:
            results = await self.extractor.extract(
                pairs, entity_types=work.inp.entity_types, relationship_types=work.inp.relationship_types
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # extraction never costs the document: flag the chunks instead
            logger.warning("extraction failed for document %s: %s", work.document_id, exc)
            results = [ChunkExtraction(chunk_id=cid, failed=True, error=str(exc)) for cid, _ in pairs]
        by_id = {r.chunk_id: r for r in results}
        return {
            cid: by_id.get(cid)
            or ChunkExtraction(chunk_id=cid, failed=True, error="extractor returned no result")
            for cid, _ in pairs
        }


def _give_up(works: list[WorkItem], cause: StorageUnavailableError, settle: Any) -> None:
    """Fail the items not yet written: an earlier one found a server unreachable."""
    for work in works:
        if work.outcome is None:
            error = StorageUnavailableError(
                f"Not written: an earlier item of this batch could not reach the server ({cause})",
                setting=cause.setting,
            )
            error.__cause__ = cause
            settle(work, error)


def _search_text(work: WorkItem, i: int) -> str:
    """What is embedded for chunk ``i``: its title and heading path (``chunking.chunk_context``),
    then its text; the caller's ``context`` is searched by keyword only (``records``)."""
    context = work.contexts[i] if i < len(work.contexts) else None
    return f"{context}\n{work.spans[i].text}" if context else work.spans[i].text


def _progress_bar(total: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="remember", unit="doc")
