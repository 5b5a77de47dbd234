"""What ``Khora`` offers a service that loads, serves and recovers: settling the storage
servers after a large write (and warming the read path before traffic), the work they still
have pending, and repair of documents a failed write left half-stored.

``ServerOperations`` is a part of ``Khora``, not a class to use alone: it relies on
``Khora``'s ``engine`` and ``get_namespace``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from khora_core.models import RepairReport

if TYPE_CHECKING:
    from khora_core.models import Namespace

__all__ = ["ServerOperations"]


class ServerOperations:
    """``Khora``'s server-maintenance methods (module doc)."""

    if TYPE_CHECKING:

        @property
        def engine(self) -> Any: ...

        async def get_namespace(self, namespace: str) -> Namespace: ...

    async def settle(self, *, namespace: str | None = None) -> dict[str, Any]:
        """Bring the storage servers to steady reads after a large write, using what they
        offer: on PostgreSQL + Neo4j, ``VACUUM (ANALYZE)`` of Khora's tables, Neo4j's
        indexes awaited online, outdated index samples refreshed and cached query plans
        dropped. ``remember_batch`` calls it itself after storing 1,000 chunks or more
        (``engine_kwargs={"settle_after_chunks": N}`` changes that; 0 turns it off).
        Nothing to do on the embedded store. Affects every namespace on those servers.

        Given ``namespace``, it then warms the read path before traffic comes, on every
        stack: 300 recalls whose questions are cut from that namespace's documents, so that
        Neo4j plans its statements and compiles its read paths, and the embedded store loads
        its vectors, on them rather than on the first users' questions. On PostgreSQL +
        Neo4j it goes on while Neo4j's JVM still spends 5% or more of the time compiling
        (over the last 300 recalls), up to 3,000 recalls and 120 seconds in all
        (``engine_kwargs={"warm_up_recalls": N}`` sets the most; 0 turns it off): on 2 cores
        that took one to two minutes after a bulk load, and recall traffic without it paid
        for the same compiling over its first two to three minutes. The warm-up never calls
        an LLM and discards its results. Call it once a service has loaded its data (or has
        just started) and before it takes traffic.

        Returns:
            Seconds per step (none on the embedded store) and, when it warmed up,
            ``warm_up_recalls``, ``warm_up_s`` and ``warm_up_stop`` (why it stopped:
            ``"servers_settled"``, ``"no_compile_reading"`` (a stack whose servers do not
            say), ``"recalls"``, ``"time"`` or ``"no_documents"``); on PostgreSQL + Neo4j
            also ``warm_up_compile_s`` (Neo4j's JIT time meanwhile) and
            ``warm_up_last_compile_share`` (its share of the last 300 recalls' time; 0.05 or
            more after a ``"time"`` stop: the JVM is still compiling, and recall is not yet
            at its steady speed; ``unsettled()`` names it while it lasts).

        Raises:
            NamespaceNotFoundError: ``namespace`` does not exist.
        """
        if namespace is not None:
            await self.get_namespace(namespace)
        return dict(await self.engine.settle(namespace))

    async def repair(self, *, namespace: str) -> RepairReport:
        """Find and finish documents a failed write left half-stored in ``namespace``.

        On PostgreSQL + Neo4j, a graph whose rows were rolled back while Neo4j was down is
        removed, and a document stored without its graph (the process died between the two
        writes) is remembered again; one whose repair fails is left as it was, in
        ``failed``. Nothing to repair on the embedded store. ``khora repair -n NS`` runs it.
        """
        await self.get_namespace(namespace)
        return await self.engine.repair(namespace)

    async def unsettled(self) -> list[str]:
        """What the storage servers still have to do before recall latency is steady, one
        line each: after recent writes, tables autovacuum would analyze and Neo4j indexes
        still populating; after a start or a bulk load, Neo4j's JVM still compiling (10% of
        the time or more since the previous call, or since the server started). Empty when
        there is nothing (always, embedded). A readiness probe can serve on it."""
        return list(await self.engine.unsettled())
