"""``Khora``: the async facade users hold over one engine and its storage stack.

Every public method checks its arguments (``khora_core.arguments``) before it reads or
writes, and takes the namespace as ``namespace=``. ``KhoraSync``, the sync twin, lives in
``khora_core.sync_client`` and is importable from here too; the server-maintenance methods
(``settle``, ``unsettled``, ``repair``) are in ``khora_core.client_operations``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from khora_core.arguments import (
    MAX_LIMIT,
    MAX_OFFSET,
    aware,
    check_count,
    check_metadata,
    check_namespace_id,
    check_text,
    namespace_alias,
    recall_arguments,
    resolved_config,
)
from khora_core.client_operations import ServerOperations
from khora_core.config import KhoraConfig
from khora_core.errors import ConfigError, InvalidInputError, KhoraError, NamespaceNotFoundError
from khora_core.models import (
    EntityProjection,
    Namespace,
    NamespaceStats,
    RecallResult,
    RememberResult,
    SearchMode,
)

if TYPE_CHECKING:
    from khora_core.sync_client import KhoraSync

__all__ = ["MAX_LIMIT", "Khora", "KhoraSync"]


def __getattr__(name: str) -> Any:
    # ``from khora_core.client import KhoraSync`` keeps working; imported on first use, since
    # khora_core.sync_client imports this module.
    if name == "KhoraSync":
        from khora_core.sync_client import KhoraSync

        return KhoraSync
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Khora(ServerOperations):
    """Khora's memory engine: ``remember``, ``recall``, ``forget`` over one storage stack.

    Use it as an async context manager::

        async with Khora() as kb:                      # embedded store in ./.khora
            ns = await kb.create_namespace("notes")
            await kb.remember("Ada Lovelace worked with Charles Babbage.", namespace=ns.namespace_id)
            result = await kb.recall("Who did Ada work with?", namespace=ns.namespace_id)

    Every method that works on a namespace takes its id as ``namespace`` (the older spelling
    ``namespace_id=`` still works, with a ``DeprecationWarning``).

    Args:
        url: ``None`` for the embedded ``sqlite_lance`` store under ``KHORA_DATA_DIR``
            (default ``./.khora``); a ``postgresql://`` URL for PostgreSQL + pgvector with
            Neo4j from ``KHORA_NEO4J_URL`` (or ``config.storage.neo4j_url``). Defaults to
            ``KHORA_DATABASE_URL`` when set.
        engine: the engine name; ``"vectorcypher"`` (the default and only engine).
        engine_kwargs: forwarded to the engine, e.g.
            ``{"vectorcypher_config": VectorCypherConfig(skeleton_core_ratio=1.0)}``.
        config: a ``KhoraConfig``; built from the environment when omitted.
        embedder: any Khora ``Embedder``, LangChain ``Embeddings`` or LlamaIndex
            ``BaseEmbedding``; the configured sentence-transformers model when omitted.
        data_dir: the embedded store's folder; passing it (without ``url``) selects the
            embedded store even when ``KHORA_DATABASE_URL`` is set.
        preset: a read-path preset by name (``"default"``, ``"memory"``, ...; see
            ``khora_core.retrieval.presets``), for a config built here; with ``config=``,
            set ``KhoraConfig(preset=...)`` instead.

    Raises:
        ConfigError: an unknown engine, a bad URL, a wrong password or a missing
            pgvector extension (at ``open()``/``__aenter__``).
        StorageUnavailableError: a database server cannot be reached (at ``open()``).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        engine: str = "vectorcypher",
        engine_kwargs: Mapping[str, Any] | None = None,
        config: KhoraConfig | None = None,
        embedder: Any = None,
        data_dir: str | None = None,
        preset: str | None = None,
    ) -> None:
        from khora_core.engines import ENGINES

        if preset is not None and config is not None:
            raise ConfigError(
                "Pass the preset inside the config (KhoraConfig(preset=...)) or alone (Khora(preset=...)), "
                "not both",
                setting="preset",
            )
        if preset is not None:
            config = KhoraConfig(preset=preset)

        if engine not in ENGINES:
            raise ConfigError(
                f"Unknown engine {engine!r}. Available engines: {', '.join(sorted(ENGINES))}.",
                setting="engine",
            )
        self._engine_name = engine
        self._engine_kwargs = dict(engine_kwargs or {})
        self._config_arg = config
        self._url = url
        self._data_dir = data_dir
        self._embedder_arg = embedder
        self._engine: Any = None
        self._stack: Any = None

    # -- lifecycle ---------------------------------------------------------------------
    async def open(self) -> Khora:
        """Build the config, the embedder and the storage stack; connect and migrate."""
        if self._engine is not None:
            return self
        from khora_core.embedding.factory import build_embedder
        from khora_core.engines import ENGINES
        from khora_core.storage.stack import open_stack

        config = resolved_config(
            self._config_arg or KhoraConfig(),
            url=self._url,
            data_dir=self._data_dir,
            vectorcypher=self._engine_kwargs.get("vectorcypher_config"),
        )
        self.config = config
        embedder = build_embedder(config.embedding, self._embedder_arg)
        self._stack = await open_stack(config.storage, dim=embedder.dimension)
        extra = {k: v for k, v in self._engine_kwargs.items() if k != "vectorcypher_config"}
        try:
            self._engine = ENGINES[self._engine_name](
                stack=self._stack, embedder=embedder, config=config, **extra
            )
        except TypeError as exc:
            await self._stack.aclose()
            raise ConfigError(
                f"Bad engine_kwargs for {self._engine_name!r}: {exc}", setting="engine_kwargs"
            ) from exc
        return self

    async def aclose(self) -> None:
        """Close connections. Safe to call twice."""
        if self._stack is not None:
            await self._stack.aclose()
        self._stack = None
        self._engine = None

    async def __aenter__(self) -> Khora:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def engine(self) -> Any:
        if self._engine is None:
            raise ConfigError("Khora is not open: use `async with Khora() as kb:` or `await kb.open()`")
        return self._engine

    @property
    def storage_backend(self) -> str:
        """``"sqlite_lance"`` or ``"postgres"``."""
        return str(self.engine.stack.name)

    # -- namespaces ----------------------------------------------------------------------
    @namespace_alias
    async def create_namespace(
        self,
        name: str | None = None,
        *,
        namespace: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Namespace:
        """Create a namespace (an isolated memory space) and return it.

        Args:
            name: a human label (optional, not unique).
            namespace: a stable id of your choosing; a random UUID when omitted. Creating
                an id that exists returns the existing namespace.
            metadata: free-form JSON metadata kept with the namespace.
        """
        docs = self.engine.stack.documents
        if name is not None:
            if not isinstance(name, str):
                raise InvalidInputError(f"name must be a string, got {type(name).__name__}")
            check_text(name, "the namespace name")
        meta = check_metadata(metadata or {})
        if namespace is not None:
            check_namespace_id(namespace)
            existing = await docs.get_namespace(namespace)
            if existing is not None:
                return existing
        ns = Namespace(
            namespace_id=namespace or str(uuid.uuid4()),
            name=name,
            created_at=datetime.now(timezone.utc),
            metadata=meta,
        )
        await docs.create_namespace(ns)
        return ns

    async def list_namespaces(self) -> list[Namespace]:
        """All namespaces in this store."""
        return list(await self.engine.stack.documents.list_namespaces())

    @namespace_alias
    async def get_namespace(self, namespace: str) -> Namespace:
        """The namespace with id ``namespace``.

        Raises:
            NamespaceNotFoundError: it does not exist.
            InvalidInputError: ``namespace`` is not a valid id.
        """
        check_namespace_id(namespace)
        ns = await self.engine.stack.documents.get_namespace(namespace)
        if ns is None:
            raise NamespaceNotFoundError(
                f"Namespace {namespace!r} does not exist. Create it with create_namespace()."
            )
        return ns

    @namespace_alias
    async def delete_namespace(self, namespace: str) -> bool:
        """Delete a namespace and everything in it. Returns False when it did not exist."""
        check_namespace_id(namespace)
        return await self.engine.delete_namespace(namespace)

    # -- write ---------------------------------------------------------------------------
    @namespace_alias
    async def remember(self, content: str, *, namespace: str, **kwargs: Any) -> RememberResult:
        """Store ``content`` in ``namespace``: chunk, embed, extract entities, link the graph.

        Keyword arguments: ``title``, ``context`` (text that situates the content, such as
        the message it replies to: searched by keyword with every chunk, neither embedded nor
        returned), ``metadata``, ``entity_types``, ``relationship_types``,
        ``occurred_at`` (or ``metadata["occurred_at"]``), ``source_type``, ``source_name``,
        ``source_url``, ``external_id`` (re-remembering the same id replaces the old version),
        ``content_type`` (``text/plain`` or ``text/markdown``), ``source_timestamp``,
        ``tags``, ``source``. The same content twice in one namespace is stored once
        (``RememberResult.duplicate``). ``dedup=False`` (with an ``external_id``) keys the
        document by its ``external_id`` instead: identical content under another external id
        is a document of its own, as in a vector store keyed by id.

        Raises:
            InvalidInputError: empty content (``ContentTooLargeError``,
                ``UnsupportedContentError`` for the other input problems).
            NamespaceNotFoundError: the namespace does not exist.
        """
        from khora_core.ingest.inputs import REMEMBER_FIELDS

        unknown = sorted(set(kwargs) - REMEMBER_FIELDS)
        if unknown:
            raise InvalidInputError(
                f"remember() got unknown keyword(s) {unknown}; allowed: {sorted(REMEMBER_FIELDS - {'content'})}"
            )
        await self.get_namespace(namespace)
        return await self.engine.remember(content, namespace_id=namespace, **kwargs)

    @namespace_alias
    async def remember_batch(
        self,
        items: Sequence[Mapping[str, Any] | str],
        *,
        namespace: str,
        concurrency: int | None = None,
        progress: bool = False,
    ) -> list[RememberResult | KhoraError]:
        """Remember many items (dicts with ``content`` plus ``remember`` keywords, or strings).

        Items go through in windows of about 512 chunks: each window's chunks are embedded in
        one call, its items are extracted ``concurrency`` at a time, every new entity name of
        the window is embedded once (names already stored, or seen earlier in the batch, are
        not embedded again), and the window's writes run while the next window embeds.
        ``progress=True`` shows a tqdm bar.

        Returns:
            One entry per item, in input order: its ``RememberResult``, or the ``KhoraError``
            that item raised. One bad item never loses the others.

        Raises:
            InvalidInputError: ``items`` is not a list of items (a string or a single
                mapping is refused rather than taken apart).
            NamespaceNotFoundError: the namespace does not exist.
        """
        if isinstance(items, (str, bytes, bytearray, Mapping)) or not isinstance(items, Sequence):
            raise InvalidInputError(
                f"remember_batch() takes a list of items (strings or mappings), got {type(items).__name__}"
            )
        await self.get_namespace(namespace)
        normalised = [{"content": it} if isinstance(it, str) else dict(it) for it in items]
        return await self.engine.remember_batch(
            normalised, namespace_id=namespace, concurrency=concurrency, progress=progress
        )

    @namespace_alias
    async def forget(
        self, document_id: str | None = None, *, namespace: str, external_id: str | None = None
    ) -> bool:
        """Remove a document (by id or ``external_id``) everywhere, with orphaned entities.

        Returns True when something was removed.
        """
        if (document_id is None) == (external_id is None):
            raise InvalidInputError("forget() takes exactly one of document_id or external_id")
        await self.get_namespace(namespace)
        return bool(
            await self.engine.forget(namespace_id=namespace, document_id=document_id, external_id=external_id)
        )

    # -- read ----------------------------------------------------------------------------
    @namespace_alias
    async def recall(
        self,
        query: str,
        *,
        namespace: str,
        limit: int = 10,
        mode: SearchMode | str = SearchMode.HYBRID,
        min_similarity: float = 0.0,
        filter: Any = None,
        start_time: datetime | None = None,
        end_time: datetime | None = None,
        now: datetime | None = None,
    ) -> RecallResult:
        """Answer ``query`` from ``namespace``'s memory.

        Args:
            query: the question.
            namespace: the namespace id.
            limit: the most chunks to return.
            mode: which channels run (``SearchMode``).
            min_similarity: raw cosine cutoff on the vector channel (before normalisation),
                from -1 to 1.
            filter: a ``RecallFilter`` or dict; a hard gate on system fields and metadata.
            start_time: deprecated; a window over ``COALESCE(source_timestamp, created_at)``.
            end_time: deprecated; see ``start_time``.
            now: the reference for relative dates in the question ("last week"); defaults
                to the newest ``occurred_at`` in the namespace.

        Raises:
            InvalidInputError: bad arguments (an empty query, a limit, mode, namespace id,
                ``min_similarity`` or date out of range, ``filter`` combined with
                ``start_time``/``end_time``), before any search.
            RecallFilterValidationError: the filter is malformed (before any search).
            NamespaceNotFoundError: the namespace does not exist.
        """
        mode, parsed, window = recall_arguments(
            query, namespace, limit, min_similarity, mode, filter, start_time, end_time, now
        )
        # The namespace check (a round trip) runs while the question is being embedded; a
        # missing namespace cancels the recall and raises.
        recalling = asyncio.ensure_future(
            self.engine.recall(
                query,
                namespace_id=namespace,
                limit=limit,
                mode=mode,
                min_similarity=min_similarity,
                filter=parsed,
                time_window=window,
                now=aware(now),
            )
        )
        try:
            await self.get_namespace(namespace)
        except BaseException:
            recalling.cancel()
            await asyncio.gather(recalling, return_exceptions=True)
            raise
        return await recalling

    @namespace_alias
    async def stats(self, namespace: str) -> NamespaceStats:
        """Document, chunk, entity and relationship counts of a namespace."""
        await self.get_namespace(namespace)
        return await self.engine.stack.stats(namespace)

    # -- entity reads (namespace= is required, keyword-only) -------------------------------
    @namespace_alias
    async def get_entity(
        self, entity_id: str, *, namespace: str, include_sources: bool = False
    ) -> EntityProjection | None:
        """One entity by id, or None."""
        check_namespace_id(namespace)
        return await self.engine.entities.get_entity(
            entity_id, namespace_id=namespace, include_sources=include_sources
        )

    @namespace_alias
    async def list_entities(
        self,
        *,
        namespace: str,
        offset: int = 0,
        limit: int = 100,
        type: str | None = None,
        include_sources: bool = False,
    ) -> list[EntityProjection]:
        """A page of entities, most mentioned first."""
        check_namespace_id(namespace)
        check_count("offset", offset, 0, MAX_OFFSET)
        check_count("limit", limit, 1)
        return await self.engine.entities.list_entities(
            namespace_id=namespace, offset=offset, limit=limit, type=type, include_sources=include_sources
        )

    @namespace_alias
    async def search_entities(
        self,
        query: str,
        *,
        namespace: str,
        limit: int = 10,
        method: str = "all",
        include_sources: bool = False,
    ) -> list[EntityProjection]:
        """Entities matching ``query`` exactly, fuzzily (edit distance) or by embedding.

        ``method`` is ``"exact"``, ``"fuzzy"``, ``"embedding"`` or ``"all"``.
        """
        check_namespace_id(namespace)
        if not isinstance(query, str):
            raise InvalidInputError(f"search_entities() needs a query string, got {type(query).__name__}")
        check_text(query, "the entity query")
        check_count("limit", limit, 1)
        return await self.engine.entities.search_entities(
            query, namespace_id=namespace, limit=limit, method=method, include_sources=include_sources
        )

    @namespace_alias
    async def find_related_entities(
        self,
        entity_id: str,
        *,
        namespace: str,
        depth: int = 1,
        relationship_types: Sequence[str] | None = None,
        limit: int = 50,
        include_sources: bool = False,
    ) -> list[EntityProjection]:
        """Entities within ``depth`` hops of ``entity_id`` (optionally over some relationship types)."""
        check_namespace_id(namespace)
        check_count("depth", depth, 1)
        check_count("limit", limit, 1)
        return await self.engine.entities.find_related_entities(
            entity_id,
            namespace_id=namespace,
            depth=depth,
            relationship_types=relationship_types,
            limit=limit,
            include_sources=include_sources,
        )
