"""``KhoraSync``: the sync twin of ``Khora``, one method for each of ``Khora``'s.

Each method runs its ``Khora`` counterpart through :func:`khora_core.sync.run_sync` and
returns what it returns, raising what it raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from khora_core.arguments import namespace_alias
from khora_core.client import Khora
from khora_core.config import KhoraConfig
from khora_core.errors import KhoraError
from khora_core.models import (
    EntityProjection,
    Namespace,
    NamespaceStats,
    RecallResult,
    RememberResult,
    RepairReport,
    SearchMode,
)
from khora_core.sync import run_sync

__all__ = ["KhoraSync"]


class KhoraSync:
    """The sync twin of ``Khora`` for scripts and notebooks; same arguments, same results.

    Each method runs its ``Khora`` counterpart through ``khora_core.sync.run_sync`` (one
    private event loop in a background thread, so it also works inside Jupyter)::

        with KhoraSync() as kb:
            ns = kb.create_namespace("notes")
            kb.remember("...", namespace=ns.namespace_id)

    The async ``Khora`` is ``kb.aio``. See ``Khora`` for the constructor's arguments.
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
        self.aio = Khora(
            url,
            engine=engine,
            engine_kwargs=engine_kwargs,
            config=config,
            embedder=embedder,
            data_dir=data_dir,
            preset=preset,
        )

    # -- lifecycle ---------------------------------------------------------------------
    def open(self) -> KhoraSync:
        """Build the config, the embedder and the storage stack; connect and migrate."""
        run_sync(self.aio.open())
        return self

    def close(self) -> None:
        """Close connections. Safe to call twice."""
        run_sync(self.aio.aclose())

    def __enter__(self) -> KhoraSync:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- namespaces ----------------------------------------------------------------------
    @namespace_alias
    def create_namespace(
        self,
        name: str | None = None,
        *,
        namespace: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Namespace:
        """Create a namespace (an isolated memory space) and return it.

        See ``Khora.create_namespace``."""
        return run_sync(self.aio.create_namespace(name, namespace=namespace, metadata=metadata))

    def list_namespaces(self) -> list[Namespace]:
        """All namespaces in this store."""
        return run_sync(self.aio.list_namespaces())

    @namespace_alias
    def get_namespace(self, namespace: str) -> Namespace:
        """The namespace with id ``namespace``.

        See ``Khora.get_namespace``."""
        return run_sync(self.aio.get_namespace(namespace))

    @namespace_alias
    def delete_namespace(self, namespace: str) -> bool:
        """Delete a namespace and everything in it. Returns False when it did not exist."""
        return run_sync(self.aio.delete_namespace(namespace))

    # -- write ---------------------------------------------------------------------------
    @namespace_alias
    def remember(self, content: str, *, namespace: str, **kwargs: Any) -> RememberResult:
        """Store ``content`` in ``namespace``: chunk, embed, extract entities, link the graph.

        See ``Khora.remember`` for the keyword arguments and errors."""
        return run_sync(self.aio.remember(content, namespace=namespace, **kwargs))

    @namespace_alias
    def remember_batch(
        self,
        items: Sequence[Mapping[str, Any] | str],
        *,
        namespace: str,
        concurrency: int | None = None,
        progress: bool = False,
    ) -> list[RememberResult | KhoraError]:
        """Remember many items (dicts with ``content`` plus ``remember`` keywords, or strings).

        See ``Khora.remember_batch``."""
        return run_sync(
            self.aio.remember_batch(items, namespace=namespace, concurrency=concurrency, progress=progress)
        )

    def settle(self, *, namespace: str | None = None) -> dict[str, Any]:
        """Bring the storage servers to steady reads after a large write, using what they
        offer: on PostgreSQL + Neo4j, ``VACUUM (ANALYZE)`` of Khora's tables, Neo4j's
        indexes awaited online, outdated index samples refreshed and cached query plans
        dropped. ``remember_batch`` calls it itself after storing 1,000 chunks or more
        (``engine_kwargs={"settle_after_chunks": N}`` changes that; 0 turns it off).
        Nothing to do on the embedded store. Affects every namespace on those servers.

        Given ``namespace``, it then warms the read path with recalls cut from that
        namespace's documents (no LLM is called). See ``Khora.settle``."""
        return run_sync(self.aio.settle(namespace=namespace))

    def repair(self, *, namespace: str) -> RepairReport:
        """Find and finish documents a failed write left half-stored in ``namespace``.

        Blocking form of ``Khora.repair``.
        """
        return run_sync(self.aio.repair(namespace=namespace))

    def unsettled(self) -> list[str]:
        """What the storage servers still have to do before recall latency is steady, one
        line each: after recent writes, tables autovacuum would analyze and Neo4j indexes
        still populating; after a start or a bulk load, Neo4j's JVM still compiling (10% of
        the time or more since the previous call, or since the server started). Empty when
        there is nothing (always, embedded). A readiness probe can serve on it.

        Blocking form of ``Khora.unsettled``."""
        return run_sync(self.aio.unsettled())

    @namespace_alias
    def forget(
        self, document_id: str | None = None, *, namespace: str, external_id: str | None = None
    ) -> bool:
        """Remove a document (by id or ``external_id``) everywhere, with orphaned entities.

        See ``Khora.forget``."""
        return run_sync(self.aio.forget(document_id, namespace=namespace, external_id=external_id))

    # -- read ----------------------------------------------------------------------------
    @namespace_alias
    def recall(
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

        See ``Khora.recall`` for the arguments and errors."""
        return run_sync(
            self.aio.recall(
                query,
                namespace=namespace,
                limit=limit,
                mode=mode,
                min_similarity=min_similarity,
                filter=filter,
                start_time=start_time,
                end_time=end_time,
                now=now,
            )
        )

    @namespace_alias
    def stats(self, namespace: str) -> NamespaceStats:
        """Document, chunk, entity and relationship counts of a namespace."""
        return run_sync(self.aio.stats(namespace))

    # -- entity reads (namespace= is required, keyword-only) -------------------------------
    @namespace_alias
    def get_entity(
        self, entity_id: str, *, namespace: str, include_sources: bool = False
    ) -> EntityProjection | None:
        """One entity by id, or None."""
        return run_sync(self.aio.get_entity(entity_id, namespace=namespace, include_sources=include_sources))

    @namespace_alias
    def list_entities(
        self,
        *,
        namespace: str,
        offset: int = 0,
        limit: int = 100,
        type: str | None = None,
        include_sources: bool = False,
    ) -> list[EntityProjection]:
        """A page of entities, most mentioned first."""
        return run_sync(
            self.aio.list_entities(
                namespace=namespace, offset=offset, limit=limit, type=type, include_sources=include_sources
            )
        )

    @namespace_alias
    def search_entities(
        self,
        query: str,
        *,
        namespace: str,
        limit: int = 10,
        method: str = "all",
        include_sources: bool = False,
    ) -> list[EntityProjection]:
        """Entities matching ``query`` exactly, fuzzily (edit distance) or by embedding.

        See ``Khora.search_entities``."""
        return run_sync(
            self.aio.search_entities(
                query, namespace=namespace, limit=limit, method=method, include_sources=include_sources
            )
        )

    @namespace_alias
    def find_related_entities(
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
        return run_sync(
            self.aio.find_related_entities(
                entity_id,
                namespace=namespace,
                depth=depth,
                relationship_types=relationship_types,
                limit=limit,
                include_sources=include_sources,
            )
        )
