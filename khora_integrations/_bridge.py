"""Framework-neutral helpers shared by the LangChain and LlamaIndex integrations.

These live here so each framework adapter stays a thin translation layer:

* ``KhoraRef``: how an integration holds a Khora (an async ``Khora``, a ``KhoraSync`` or a
  config to open lazily) and runs one async implementation from both sync and async entry
  points through the one bridge, ``khora_core.sync.run_sync``;
* the abstention policy (``"flag"``, ``"empty"``, ``"raise"``) applied to a ``RecallResult``;
* ``chunk_metadata``: the flat metadata dict an integration attaches to a recalled chunk;
* one-document-per-id operations for vector-store adapters: ``store_texts``,
  ``forget_ids``, ``documents_by_ids`` and ``best_documents`` (vector search grouped by
  document).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from khora_core import Khora, KhoraSync
from khora_core.config import KhoraConfig
from khora_core.errors import (
    ConfigError,
    InvalidInputError,
    KhoraAbstention,
    KhoraError,
    NamespaceNotFoundError,
)
from khora_core.models import (
    SYSTEM_DATE_KEYS,
    SYSTEM_STRING_KEYS,
    ChunkHit,
    Document,
    RecallChunk,
    RecallResult,
)
from khora_core.sync import run_sync

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter

__all__ = [
    "ABSTAIN_POLICIES",
    "PROMOTED_KEYS",
    "AbstainPolicy",
    "KhoraRef",
    "apply_abstention_policy",
    "best_documents",
    "chunk_metadata",
    "documents_by_ids",
    "forget_ids",
    "jsonable",
    "namespace_hint",
    "store_texts",
]

T = TypeVar("T")

logger = logging.getLogger("khora.integrations")

AbstainPolicy = Literal["flag", "empty", "raise"]
#: The abstention policies an integration retriever accepts.
ABSTAIN_POLICIES: tuple[str, ...] = ("flag", "empty", "raise")


class KhoraRef:
    """A handle on a Khora that both sync and async framework entry points can use.

    Objects that hold connections (asyncpg pools, the Neo4j driver) belong to the event loop
    that opened them, so the handle remembers where its Khora lives:

    * a ``KhoraSync`` (or a Khora this handle opens itself from ``config``) lives on the
      bridge's background loop: sync calls go through ``run_sync`` and async calls await the
      same ``run_sync`` in a worker thread, so both work from any thread or loop;
    * an async ``Khora`` lives on the loop that opened it. A call runs there when it can:
      directly when that is the running loop, handed over when that loop runs in another
      thread (the bridge's included). When it cannot (PostgreSQL + Neo4j opened in an
      ``asyncio.run`` that has finished, or a sync call made inside the very loop that opened
      it, which that call blocks), the handle opens its own connections with the same config
      and embedder on the bridge's loop and uses them from then on (logged once, closed by
      ``close``). The embedded store's connections belong to no loop: it is used as is.

    Args:
        kb: a ``Khora`` or ``KhoraSync``; when ``None`` one is built from the other
            arguments and opened on first use (no I/O here).
        config: the ``KhoraConfig`` for a Khora this handle owns.
        url: the database URL for a Khora this handle owns (see ``Khora``).
        data_dir: the embedded store folder for a Khora this handle owns.
        embedder: the embedder for a Khora this handle owns (any Khora ``Embedder``,
            LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``).
        preset: the read-path preset of a Khora this handle owns (``"memory"``, ...).

    Raises:
        ConfigError: ``kb`` is not a Khora, or ``kb`` is combined with owner arguments.
    """

    def __init__(
        self,
        kb: Khora | KhoraSync | None = None,
        *,
        config: KhoraConfig | None = None,
        url: str | None = None,
        data_dir: str | None = None,
        embedder: Any = None,
        preset: str | None = None,
    ) -> None:
        owner_args = {
            "config": config,
            "url": url,
            "data_dir": data_dir,
            "embedder": embedder,
            "preset": preset,
        }
        given = sorted(k for k, v in owner_args.items() if v is not None)
        if kb is not None and given:
            raise ConfigError(
                f"Pass either an opened Khora (kb=) or the arguments to build one ({', '.join(given)}=), "
                "not both: a Khora already has its storage and embedder, e.g. Khora(embedder=...)",
                setting=given[0],
            )
        self.owned = kb is None
        if kb is None:
            kb = KhoraSync(url, config=config, data_dir=data_dir, embedder=embedder, preset=preset)
        if isinstance(kb, KhoraSync):
            self.aio: Khora = kb.aio
            self.on_bridge = True
        elif isinstance(kb, Khora):
            self.aio = kb
            self.on_bridge = False
        else:
            raise ConfigError(f"Expected a Khora or KhoraSync, got {type(kb).__name__}", setting="kb")
        self._open_lock = threading.Lock()
        self._opened = False
        self._own_copy: Khora | None = None  # see _adopted

    def _open_blocking(self) -> None:
        # One open per handle even when several threads make their first call at once
        # (Khora.open is idempotent but not guarded against concurrent first calls).
        with self._open_lock:
            if not self._opened:
                run_sync(self.aio.open())
                self._opened = True

    def _usable_loop(self, current: asyncio.AbstractEventLoop | None) -> asyncio.AbstractEventLoop | None:
        """Where a call on ``self.aio`` must run: ``current`` (the caller's running loop, or
        None from sync code) when its connections belong there or to no loop, the loop they
        belong to when it runs in another thread, or None when they cannot be used (then
        :meth:`_adopted` is)."""
        bound = _bound_loop(self.aio)
        if bound is None or bound is current:
            return current
        if bound.is_running() and not bound.is_closed() and bound is not _thread_loop():
            return bound
        return None

    def _adopted(self) -> Khora:
        """This handle's own Khora on the bridge loop, with ``self.aio``'s config and embedder."""
        with self._open_lock:
            if self._own_copy is None:
                logger.warning(
                    "The Khora passed to a Khora integration holds connections of an event loop "
                    "that is closed or blocked by this call; opening another set on Khora's sync "
                    "loop. Pass a KhoraSync, or use the async methods on the loop that opened it."
                )
                copy = Khora(config=self.aio.config, embedder=self.aio.engine.embedder)
                run_sync(copy.open())
                self._own_copy = copy
            return self._own_copy

    def call(self, fn: Callable[[Khora], Coroutine[Any, Any, T]]) -> T:
        """Run ``await fn(kb)`` from sync code and return its result (see the class)."""
        self._open_blocking()
        if self.on_bridge or self._own_copy is not None:
            return run_sync(fn(self._own_copy or self.aio))
        loop = self._usable_loop(None)
        if loop is not None:  # the Khora's loop runs in another thread: hand the call over
            return asyncio.run_coroutine_threadsafe(fn(self.aio), loop).result()
        if _bound_loop(self.aio) is None:  # embedded store: no loop of its own
            return run_sync(fn(self.aio))
        return run_sync(fn(self._adopted()))

    async def acall(self, fn: Callable[[Khora], Coroutine[Any, Any, T]]) -> T:
        """Run ``await fn(kb)`` from async code, without blocking the caller's loop."""
        if self.on_bridge or self._own_copy is not None:
            # The Khora lives on the bridge loop: block a worker thread on it, not our loop.
            return await asyncio.to_thread(self.call, fn)
        await self.aio.open()  # idempotent: returns at once when already open
        current = asyncio.get_running_loop()
        loop = self._usable_loop(current)
        if loop is current:
            return await fn(self.aio)
        if loop is not None:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(fn(self.aio), loop))
        await asyncio.to_thread(self._adopted)
        return await asyncio.to_thread(self.call, fn)

    def close(self) -> None:
        """Close the Khora when this handle opened it (and the connections it opened for a
        Khora you passed in); a Khora you passed in stays open."""
        with self._open_lock:
            if self._own_copy is not None:
                run_sync(self._own_copy.aclose())
                self._own_copy = None
            if self.owned:
                run_sync(self.aio.aclose())
                self._opened = False

    async def aclose(self) -> None:
        """Async twin of ``close``."""
        await asyncio.to_thread(self.close)


def _bound_loop(kb: Khora) -> asyncio.AbstractEventLoop | None:
    """The event loop ``kb``'s connections belong to: its PostgreSQL pool's (asyncpg keeps
    it as ``Pool._loop`` on ``PgPool.raw``; Neo4j's driver is opened on the same loop); None when it has no
    pool (the embedded store, or a Khora not opened yet)."""
    stack = getattr(kb, "_stack", None)
    pool = getattr(getattr(stack, "documents", None), "pool", None)
    loop = getattr(getattr(pool, "raw", pool), "_loop", None)
    return loop if isinstance(loop, asyncio.AbstractEventLoop) else None


def _thread_loop() -> asyncio.AbstractEventLoop | None:
    """The loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def namespace_hint(kb: Khora, namespace: str, exc: NamespaceNotFoundError) -> NamespaceNotFoundError:
    """The error to raise when ``namespace`` is not a namespace id: ``exc`` itself, or, when
    ``namespace`` is the *name* of a namespace (``create_namespace("team")`` gives the name
    ``"team"`` and a random id), a ``NamespaceNotFoundError`` that shows the id to pass.

    Namespaces are addressed by id everywhere and names are not unique, so a name is never
    taken for an id silently.
    """
    try:
        named = [ns.namespace_id for ns in await kb.list_namespaces() if ns.name == namespace]
    except KhoraError:
        return exc
    if not named:
        return exc
    which = (
        f"namespace {named[0]!r} is"
        if len(named) == 1
        else f"namespaces {', '.join(repr(n) for n in named)} are"
    )
    return NamespaceNotFoundError(
        f"No namespace has the id {namespace!r}, but {which} named {namespace!r}. Namespaces are "
        f"addressed by id: pass namespace={named[0]!r}, or create one with that id "
        f"(create_namespace(namespace={namespace!r}))."
    )


def apply_abstention_policy(result: RecallResult, policy: str) -> tuple[bool, dict[str, Any]]:
    """Decide what a retriever does with a recall that says it should abstain.

    Args:
        result: the recall result; its ``engine_info["abstention_signals"]`` is read.
        policy: ``"flag"`` keeps the chunks (the caller marks the signals on each one);
            ``"empty"`` drops them when ``should_abstain``; ``"raise"`` raises.

    Returns:
        ``(keep_docs, signals)``: whether to return the chunks, and a copy of the signals
        (``{}`` when the engine reported none), always with a boolean ``should_abstain``.

    Raises:
        InvalidInputError: an unknown policy.
        KhoraAbstention: ``policy == "raise"`` and the result says it should abstain.
    """
    if policy not in ABSTAIN_POLICIES:
        raise InvalidInputError(f"abstain must be one of {list(ABSTAIN_POLICIES)}, got {policy!r}")
    signals = dict((result.engine_info or {}).get("abstention_signals") or {})
    signals["should_abstain"] = bool(signals.get("should_abstain", False))
    if not signals["should_abstain"] or policy == "flag":
        return True, signals
    if policy == "empty":
        return False, signals
    raise KhoraAbstention(result.query, signals)


def jsonable(value: Any) -> Any:
    """``value`` with datetimes turned into ISO-8601 strings, recursively (metadata is JSON)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def chunk_metadata(result: RecallResult, chunk: RecallChunk) -> dict[str, Any]:
    """The flat metadata dict for one recalled chunk.

    The user's metadata comes first; Khora's keys are laid over it, so these names are
    always Khora's:

    * the document's system fields (``title``, ``occurred_at``, ``created_at``,
      ``source_timestamp``, ``source_type``, ``source_name``, ``source_url``,
      ``external_id``, ``content_type``, ``source``; dates as ISO-8601 strings) and ``tags``,
      each only when set;
    * ``namespace_id``, ``document_id``, ``chunk_id``, ``chunk_index``, ``start_char``,
      ``end_char``;
    * ``score`` (the normalised fused rank within this result, top hit ~1.0, not a
      confidence), ``channel_scores`` (each channel's raw score), ``channel_ranks``,
      ``vector_similarity`` (raw cosine; ``None`` when the vector channel did not see the
      chunk) and ``rerank_score``;
    * ``channels``: the channels that found it; ``entities`` and ``entity_ids``: the
      entities it mentions.
    """
    doc = next((d for d in result.documents if d.id == chunk.document_id), None)
    meta: dict[str, Any] = dict(jsonable(doc.metadata if doc is not None else chunk.metadata))
    if doc is not None:
        for key in (*SYSTEM_STRING_KEYS, *SYSTEM_DATE_KEYS):
            value = getattr(doc, key, None)
            if value is not None:
                meta[key] = jsonable(value)
        if doc.tags:
            meta["tags"] = list(doc.tags)
    else:
        for key in ("title", "occurred_at", "created_at"):
            value = getattr(chunk, key, None)
            if value is not None:
                meta[key] = jsonable(value)
    meta.update(
        namespace_id=result.namespace_id,
        document_id=chunk.document_id,
        chunk_id=chunk.id,
        chunk_index=chunk.index,
        start_char=chunk.start_char,
        end_char=chunk.end_char,
        score=chunk.score,
        channel_scores=dict(chunk.channel_scores),
        channel_ranks=dict(chunk.channel_ranks),
        vector_similarity=chunk.vector_similarity,
        rerank_score=chunk.rerank_score,
        channels=list(chunk.channels),
        entities=list(chunk.entity_names),
        entity_ids=list(chunk.entity_ids),
    )
    return meta


# -- one document per id, for vector-store adapters ---------------------------------------

#: Metadata keys also set as Khora system fields (when they hold strings), so a filter on
#: ``source`` or ``title`` means the same thing on every Khora channel.
PROMOTED_KEYS: tuple[str, ...] = ("source", "source_type", "source_name", "source_url", "title")
#: The most chunk hits one search fetches while collecting ``k`` distinct documents.
_MAX_FETCH = 2000


async def store_texts(
    kb: Khora,
    namespace: str,
    texts: Sequence[str],
    metadatas: Sequence[dict[str, Any]] | None,
    ids: Sequence[str | None] | None,
) -> list[str]:
    """Store each text as the document keyed by its id (a new UUID for a ``None`` id), as
    a vector store does; returns the ids, in order.

    The documents are written with ``remember_batch(..., dedup=False)``: identical texts
    under different ids are separate documents, an id stored already is replaced (the
    same text with new metadata included), and a later copy of an id in the batch replaces
    an earlier one. String metadata values of :data:`PROMOTED_KEYS` are also set as
    Khora's system fields.

    Every item is validated before anything is written, so bad input stores nothing.

    Raises:
        InvalidInputError: ``metadatas`` or ``ids`` of another length than ``texts``, or an
            item ``remember`` refuses (nothing is stored).
        PartialWriteError: the store failed part-way; ``.stored`` and ``.failed`` say which
            items were written.
    """
    from khora_core.errors import KhoraError, PartialWriteError
    from khora_core.ingest.inputs import prepare_input

    if metadatas is not None and len(metadatas) != len(texts):
        raise InvalidInputError(f"got {len(texts)} texts but {len(metadatas)} metadatas")
    if ids is not None and len(ids) != len(texts):
        raise InvalidInputError(f"got {len(texts)} texts but {len(ids)} ids")
    out = [
        str(ids[i]) if ids is not None and ids[i] is not None else str(uuid.uuid4())
        for i in range(len(texts))
    ]
    items: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        metadata = dict(metadatas[i]) if metadatas is not None else {}
        promoted = {k: metadata[k] for k in PROMOTED_KEYS if isinstance(metadata.get(k), str) and metadata[k]}
        item = {"content": text, "metadata": metadata, "external_id": out[i], "dedup": False, **promoted}
        try:
            prepare_input(kb.config.ingest, **item)
        except InvalidInputError as exc:
            raise type(exc)(f"item {i} (id {out[i]!r}): {exc}; nothing was stored") from exc
        items.append(item)
    if not items:
        return []
    outcomes = await kb.remember_batch(items, namespace=namespace)
    failed = {i: o for i, o in enumerate(outcomes) if isinstance(o, KhoraError)}
    if failed:
        stored = {i: out[i] for i in range(len(out)) if i not in failed}
        first = next(iter(failed.items()))
        raise PartialWriteError(
            f"{len(failed)} of {len(items)} documents were not stored (item {first[0]}, id "
            f"{out[first[0]]!r}: {first[1]}); the other {len(stored)} were. Retry the failed ids.",
            stored=stored,
            failed=failed,
        )
    return out


async def forget_ids(kb: Khora, namespace: str, ids: Sequence[str]) -> None:
    """Forget the documents with these ids (external ids, or Khora ids of documents stored
    without one); unknown ids are ignored."""
    for doc_id in ids:
        if not await kb.forget(namespace=namespace, external_id=doc_id):
            docs = await kb.engine.stack.documents.get_documents(namespace, [doc_id])
            if docs and docs[0].external_id is None:
                await kb.forget(doc_id, namespace=namespace)


async def documents_by_ids(kb: Khora, namespace: str, ids: Sequence[str]) -> list[Document]:
    """The documents with these ids (see ``forget_ids``), in order; unknown ids are skipped."""
    store = kb.engine.stack.documents
    out: list[Document] = []
    for doc_id in ids:
        found = await store.find_documents_by_external_id(namespace, doc_id)
        if not found:
            found = [d for d in await store.get_documents(namespace, [doc_id]) if d.external_id is None]
        out.extend(found[:1])
    return out


async def best_documents(
    kb: Khora, namespace: str, vector: Sequence[float], k: int, filter: RecallFilter | None
) -> list[tuple[Document, ChunkHit]]:
    """The ``k`` documents nearest to ``vector`` (raw cosine), each with its best chunk hit.

    Runs the stack's vector index directly (no fusion, no threshold) and over-fetches
    chunks until ``k`` distinct documents are found or the namespace is exhausted.
    """
    arr = np.asarray(vector, dtype=float)
    norm = float(np.linalg.norm(arr))
    query = (arr / norm).tolist() if norm > 0 else arr.tolist()
    limit = max(4 * k, 20)
    while True:
        # min_similarity=-1: rank everything; a LangChain similarity search never thresholds.
        page = await kb.engine.stack.vectors.search(
            namespace, query, limit=limit, filter=filter, min_similarity=-1.0
        )
        best: dict[str, ChunkHit] = {}
        for hit in sorted(page.hits, key=lambda h: -h.score):
            best.setdefault(hit.chunk.document_id, hit)
        if len(best) >= k or len(page.hits) < limit or limit >= _MAX_FETCH:
            break
        limit = min(limit * 4, _MAX_FETCH)
    top = list(best.values())[:k]
    docs = {
        d.id: d
        for d in await kb.engine.stack.documents.get_documents(namespace, [h.chunk.document_id for h in top])
    }
    return [(docs[h.chunk.document_id], h) for h in top if h.chunk.document_id in docs]
