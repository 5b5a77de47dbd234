"""``IngestPipeline``: ``remember`` and ``remember_batch``.

One document goes: validate -> dedup (content hash in the namespace) -> chunk -> embed
chunks -> skeleton core (PageRank) -> extract core chunks -> look up matching stored
entities -> resolve entities -> keyword-link every chunk to the known names -> embed
entity names -> build mentions and relationships -> ONE ``stack.write`` that lands
everything (and removes the documents it replaces, same ``external_id``) or nothing.

``remember_batch`` chunks every item first and embeds all chunks in large batches
across items, then extracts and writes item by item with bounded concurrency. Each item
ends as a ``RememberResult`` or the ``KhoraError`` that stopped it, at its input index:
no item is lost, and one failure does not stop the others.

A core chunk whose extraction fails is still stored, flagged ``needs_extraction``, and
listed in ``RememberResult.extraction_failed_chunk_ids``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from khora_core.config import KhoraConfig
from khora_core.embedding.base import Embedder
from khora_core.errors import InvalidInputError, KhoraError, NamespaceNotFoundError
from khora_core.ingest.chunking import TextSpan, chunk_text
from khora_core.ingest.dedup import content_hash
from khora_core.ingest.extract_base import ChunkExtraction, Extractor
from khora_core.ingest.graph_build import build_graph
from khora_core.ingest.inputs import RememberInput, prepare_input
from khora_core.ingest.resolve import EntityResolver
from khora_core.ingest.skeleton import select_core_chunks
from khora_core.models import Chunk, Document, RememberResult, WriteBatch
from khora_core.storage.protocols import StorageStack

__all__ = ["BatchOutcome", "IngestPipeline"]

logger = logging.getLogger("khora.ingest")

#: One remember_batch result: what was stored, or why the item was not.
BatchOutcome = RememberResult | KhoraError

_CANDIDATE = re.compile(r"\b[A-Z][\w&'’-]*(?:[ \t]+(?:of[ \t]+|&[ \t]+)?[A-Z][\w&'’-]*){0,4}")
_MAX_CANDIDATES = 5000


@dataclass
class _Work:
    index: int
    inp: RememberInput
    hash: str
    document_id: str
    created_at: datetime
    spans: list[TextSpan] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)
    vectors: list[list[float]] = field(default_factory=list)
    after: asyncio.Event | None = None  # an earlier item with the same external_id
    done: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: BatchOutcome | None = None


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
            ),
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
        works: list[_Work] = []
        for i, item in enumerate(items):
            try:
                if not isinstance(item, Mapping):
                    raise InvalidInputError(f"batch item {i} must be a mapping with a 'content' key")
                works.append(self._work(i, prepare_input(self.config.ingest, **item)))
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

    def _work(self, index: int, inp: RememberInput) -> _Work:
        return _Work(
            index=index,
            inp=inp,
            hash=content_hash(inp.content),
            document_id=str(uuid.uuid4()),
            created_at=datetime.now(timezone.utc),
        )

    async def _run(
        self, works: list[_Work], namespace_id: str, *, concurrency: int | None, progress: Any
    ) -> list[BatchOutcome]:
        limit = asyncio.Semaphore(max(1, concurrency or self.config.ingest.batch_concurrency))

        def settle(work: _Work, outcome: BatchOutcome) -> None:
            if work.outcome is None:
                work.outcome = outcome
                work.done.set()
                if progress is not None:
                    progress.update(1)

        # Duplicates inside the batch wait for the first copy; same external_id runs in order.
        first_by_hash: dict[str, _Work] = {}
        last_by_external: dict[str, _Work] = {}
        live: list[_Work] = []
        followers: list[tuple[_Work, _Work]] = []
        for work in works:
            original = first_by_hash.get(work.hash)
            if original is not None:
                followers.append((work, original))
                continue
            first_by_hash[work.hash] = work
            if work.inp.external_id:
                previous = last_by_external.get(work.inp.external_id)
                work.after = previous.done if previous else None
                last_by_external[work.inp.external_id] = work
            live.append(work)

        async def dedup(work: _Work) -> None:
            async with limit:
                try:
                    existing = await self.stack.documents.find_document_by_hash(namespace_id, work.hash)
                except Exception as exc:
                    settle(work, _as_khora(exc, work.index))
                    return
            if existing is not None:
                settle(
                    work, RememberResult(document_id=existing.id, namespace_id=namespace_id, duplicate=True)
                )

        await asyncio.gather(*(dedup(w) for w in live))
        live = [w for w in live if w.outcome is None]
        for work in live:
            work.spans = chunk_text(
                work.inp.content,
                max_tokens=self.config.ingest.chunk_tokens,
                overlap_tokens=self.config.ingest.chunk_overlap_tokens,
            ) or [TextSpan(0, len(work.inp.content), work.inp.content, 1)]
            base = uuid.UUID(work.document_id)
            work.chunk_ids = [str(uuid.uuid5(base, str(i))) for i in range(len(work.spans))]
        await self._embed_chunks(live, settle)

        async def finish(work: _Work) -> None:
            if work.outcome is not None:
                return
            async with limit:
                try:
                    outcome: BatchOutcome = await self._finish(work, namespace_id)
                except Exception as exc:  # keep the batch going; report it on the item
                    outcome = _as_khora(exc, work.index)
            settle(work, outcome)

        async def follow(work: _Work, original: _Work) -> None:
            await original.done.wait()
            first = original.outcome
            if isinstance(first, RememberResult):
                settle(
                    work,
                    RememberResult(document_id=first.document_id, namespace_id=namespace_id, duplicate=True),
                )
            else:
                settle(
                    work, KhoraError(f"Same content as batch item {original.index}, which failed: {first}")
                )

        await asyncio.gather(*(finish(w) for w in live), *(follow(w, o) for w, o in followers))
        return [w.outcome for w in works if w.outcome is not None]

    async def _embed_chunks(self, works: list[_Work], settle: Any) -> None:
        """Embed every chunk of every item in large slices (fast across small items)."""
        slice_size = max(256, self.config.embedding.batch_size * 8)
        flat = [(w, i) for w in works for i in range(len(w.spans))]
        for work in works:
            work.vectors = [[] for _ in work.spans]
        for start in range(0, len(flat), slice_size):
            part = flat[start : start + slice_size]
            part = [(w, i) for w, i in part if w.outcome is None]
            if not part:
                continue
            try:
                vectors = await self.embedder.embed_documents([w.spans[i].text for w, i in part])
                if len(vectors) != len(part):
                    raise KhoraError(f"The embedder returned {len(vectors)} vectors for {len(part)} chunks.")
            except Exception as exc:
                for w, _ in part:
                    settle(w, _as_khora(exc, w.index))
                continue
            for (w, i), vector in zip(part, vectors, strict=True):
                w.vectors[i] = vector

    async def _extract(self, work: _Work, core: list[int]) -> dict[str, ChunkExtraction]:
        pairs = [(work.chunk_ids[i], work.spans[i].text) for i in core]
        if not pairs:
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

    async def _finish(self, work: _Work, namespace_id: str) -> RememberResult:
        inp = work.inp
        vc = self.config.vectorcypher
        core = select_core_chunks(
            work.vectors,
            core_ratio=vc.skeleton_core_ratio,
            similarity_threshold=vc.skeleton_similarity_threshold,
        )
        extractions = await self._extract(work, core)
        failed = {cid for cid, ex in extractions.items() if ex.failed}
        core_set = set(core)
        non_core_text = [s.text for i, s in enumerate(work.spans) if i not in core_set]
        mentions = [e for ex in extractions.values() if not ex.failed for e in ex.entities]
        candidates = _candidate_names([m.name for m in mentions], non_core_text)
        existing = (
            await self.stack.graph.find_entities_by_name(namespace_id, candidates) if candidates else []
        )
        graph = await build_graph(
            namespace_id=namespace_id,
            document_id=work.document_id,
            chunk_ids=work.chunk_ids,
            chunk_texts=[s.text for s in work.spans],
            extractions=extractions,
            existing=existing,
            resolver=self.resolver,
            embedder=self.embedder,
        )
        system: dict[str, Any] = {
            "occurred_at": inp.occurred_at,
            "created_at": work.created_at,
            "source_timestamp": inp.source_timestamp,
            "source_type": inp.source_type,
            "source_name": inp.source_name,
            "source_url": inp.source_url,
            "external_id": inp.external_id,
            "content_type": inp.content_type,
            "source": inp.source,
            "title": inp.title,
            "metadata": inp.metadata,
            "tags": inp.tags,
        }
        document = Document(
            id=work.document_id,
            namespace_id=namespace_id,
            content=inp.content,
            content_hash=work.hash,
            **system,
        )
        chunks = [
            Chunk(
                id=cid,
                namespace_id=namespace_id,
                document_id=work.document_id,
                index=i,
                content=span.text,
                start_char=span.start,
                end_char=span.end,
                token_count=span.token_count,
                embedding=work.vectors[i],
                needs_extraction=cid in failed,
                is_core=i in core_set,
                **{**system, "metadata": dict(inp.metadata), "tags": list(inp.tags)},
            )
            for i, (cid, span) in enumerate(zip(work.chunk_ids, work.spans, strict=True))
        ]
        replaces: list[str] = []
        if inp.external_id:
            if work.after is not None:
                await work.after.wait()
            previous = await self.stack.documents.find_documents_by_external_id(namespace_id, inp.external_id)
            replaces = [d.id for d in previous if d.id != work.document_id]
        batch = WriteBatch(
            document=document,
            chunks=chunks,
            entities=graph.entities,
            mentions=graph.mentions,
            relationships=graph.relationships,
            replaces=replaces,
        )
        await self.stack.write(namespace_id, batch)
        return RememberResult(
            document_id=work.document_id,
            namespace_id=namespace_id,
            chunk_ids=list(work.chunk_ids),
            entity_count=len(graph.entities),
            relationship_count=len(graph.relationships),
            replaced_document_ids=replaces,
            extraction_failed_chunk_ids=[cid for cid in work.chunk_ids if cid in failed],
            core_chunk_count=len(core),
        )


def _candidate_names(extracted: list[str], texts: list[str]) -> list[str]:
    """Names to look up among stored entities: what was extracted plus the capitalised
    phrases (and their sub-phrases) of the non-core chunks; the lookup is exact, so cheap."""
    counts: Counter[str] = Counter()
    for name in extracted:
        counts[name.strip()] += 1000  # extracted names first
        words = name.split()
        if len(words) > 1 and words[0].rstrip(".").lower() in ("dr", "mr", "mrs", "ms", "prof"):
            counts[" ".join(words[1:])] += 1000
    for text in texts:
        for match in _CANDIDATE.finditer(text):
            words = match.group().split()
            for n in range(1, min(4, len(words)) + 1):
                for i in range(len(words) - n + 1):
                    phrase = " ".join(words[i : i + n])
                    if len(phrase) > 1:
                        counts[phrase] += 1
    return [name for name, _ in counts.most_common(_MAX_CANDIDATES) if name]


def _as_khora(exc: Exception, index: int) -> KhoraError:
    """The item's error as a KhoraError (unexpected exceptions are wrapped, cause kept)."""
    if isinstance(exc, KhoraError):
        return exc
    logger.error("remember failed for item %d", index, exc_info=exc)
    wrapped = KhoraError(f"remember failed: {type(exc).__name__}: {exc}")
    wrapped.__cause__ = exc
    return wrapped


def _progress_bar(total: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="remember", unit="doc")
