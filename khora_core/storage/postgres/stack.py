"""The production stack: PostgreSQL + pgvector (documents, chunk vectors, BM25) with Neo4j (graph).

Consistency across the two servers (no distributed transaction) is kept by *compensation*
with PostgreSQL as the source of truth for what recall can see:

* ``write`` lands the rows in PostgreSQL first, in one transaction (replaced versions are
  deleted in the same transaction), then the graph in one Neo4j transaction. If the graph
  write fails, the new document's rows are deleted again and the error is raised; the
  graph data of replaced versions is removed best-effort (not when Neo4j is unreachable:
  the error comes at once instead of after one more retry period per document).
* concurrent writes of one ``external_id`` keep one version: the row write replaces every
  other stored version under a lock (``PostgresDocumentStore.write_rows``), and a writer
  whose graph lands after a later version replaced its rows removes that graph again, so
  the graph holds the version PostgreSQL holds.
* every chunk the graph channel finds is re-read from PostgreSQL by id, so a chunk whose
  rows are gone (a compensated or replaced document, or a crash between the two writes)
  is never returned, and the chunk carries its embedding for MMR.
* ``delete_document`` removes the graph first, then the rows: when either server is
  unreachable the call fails with the document still stored, so the same ``forget``
  retried after the outage finishes it.

A large ``write_many`` lands its graph in transactions of about :data:`GRAPH_WRITE_ROWS`
rows each. Every Neo4j write transaction adds a segment to the Lucene indexes behind the
entity vector and name searches, and each search visits every segment until Neo4j merges
them, so a bulk load in small transactions leaves those searches slower
(``docs/operations.md``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from khora_core.config import StorageConfig
from khora_core.errors import StorageUnavailableError
from khora_core.models import ChunkHit, NamespaceStats, WriteBatch
from khora_core.storage.protocols import SearchPage

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter
    from khora_core.storage.neo4j import Neo4jGraphStore
    from khora_core.storage.postgres.documents import PostgresDocumentStore

__all__ = ["COMPILING_SHARE", "GRAPH_WRITE_ROWS", "PostgresNeo4jStack", "compiling_line", "graph_slices"]


#: Graph rows (chunks, entities, mentions, relationships) per Neo4j transaction in
#: ``write_many``: bounds a transaction's memory on the server while keeping a bulk load to
#: few transactions (module doc).
GRAPH_WRITE_ROWS = 20_000
#: Neo4j's JVM compiling for at least this share of the time is work ``unsettled`` names.
COMPILING_SHARE = 0.10
_READINGS_KEPT = 16


def compiling_line(share: float, window_s: float) -> str | None:
    """``unsettled``'s line for Neo4j's JVM compiling ``share`` of the last ``window_s``
    seconds; None below :data:`COMPILING_SHARE`."""
    if share < COMPILING_SHARE:
        return None
    return (
        f"Neo4j: its JVM compiled for {share * window_s:,.1f} s of the last {window_s:,.0f} s "
        "(its compiler threads run side by side; recall is slower until they are done, and "
        "traffic, or settle(namespace=...)'s warm-up, finishes them)"
    )


def graph_slices(
    batches: Sequence[WriteBatch], max_rows: int = GRAPH_WRITE_ROWS
) -> Iterator[list[WriteBatch]]:
    """Consecutive runs of ``batches`` holding at most ``max_rows`` graph rows each (a
    document larger than that alone), in order."""
    part: list[WriteBatch] = []
    rows = 0
    for batch in batches:
        size = len(batch.chunks) + len(batch.entities) + len(batch.mentions) + len(batch.relationships)
        if part and rows + size > max_rows:
            yield part
            part, rows = [], 0
        part.append(batch)
        rows += size
    if part:
        yield part


class _RowCheckedGraph:
    """The Neo4j graph store, with chunk results re-read from PostgreSQL (see module doc)."""

    def __init__(self, graph: Neo4jGraphStore, documents: PostgresDocumentStore) -> None:
        self._graph = graph
        self._documents = documents

    def __getattr__(self, name: str) -> Any:
        return getattr(self._graph, name)

    async def chunks_for_entities(
        self,
        namespace_id: str,
        entity_ids: Sequence[str],
        *,
        limit: int,
        filter: RecallFilter | None = None,
        temporal_sort: bool = False,
    ) -> SearchPage:
        page = await self._graph.chunks_for_entities(
            namespace_id, entity_ids, limit=limit, filter=filter, temporal_sort=temporal_sort
        )
        return (await self._rows_checked(namespace_id, [page]))[0]

    async def chunks_for_entity_groups(
        self,
        namespace_id: str,
        groups: Sequence[Sequence[str]],
        *,
        limit: int,
        filter: RecallFilter | None = None,
        temporal_sort: bool = False,
    ) -> list[SearchPage]:
        pages = await self._graph.chunks_for_entity_groups(
            namespace_id, groups, limit=limit, filter=filter, temporal_sort=temporal_sort
        )
        return await self._rows_checked(namespace_id, pages)

    async def _rows_checked(self, namespace_id: str, pages: list[SearchPage]) -> list[SearchPage]:
        """The pages with each chunk re-read from PostgreSQL (one read for all), dropping
        the chunks whose rows are gone."""
        wanted = list(dict.fromkeys(h.chunk.id for page in pages for h in page.hits))
        rows = {c.id: c for c in await self._documents.get_chunks(namespace_id, wanted)} if wanted else {}
        checked: list[SearchPage] = []
        for page in pages:
            hits: list[ChunkHit] = []
            for hit in page.hits:
                row = rows.get(hit.chunk.id)
                if row is not None:
                    hits.append(hit.model_copy(update={"chunk": row, "rank": len(hits) + 1}))
            checked.append(
                SearchPage(
                    hits=hits, pushed_keys=page.pushed_keys, post_filtered_keys=page.post_filtered_keys
                )
            )
        return checked


class PostgresNeo4jStack:
    """``StorageStack`` named ``"postgres"``. Construct, then ``await stack.open()``."""

    name = "postgres"

    def __init__(self, config: StorageConfig, *, dim: int) -> None:
        self.config = config
        self.dim = dim
        self._driver: Any = None
        #: The latest (monotonic time, JVM compile ms) readings, for ``compile_share``: enough
        #: that one is a second old after a burst of readings (a warm-up's last round).
        self._compile_readings: list[tuple[float, float]] = []

    async def open(self) -> None:
        from khora_core.storage.neo4j import Neo4jGraphStore, open_driver
        from khora_core.storage.postgres.documents import PostgresDocumentStore
        from khora_core.storage.postgres.keywords import PostgresKeywordIndex
        from khora_core.storage.postgres.vectors import PostgresVectorIndex

        documents = await PostgresDocumentStore.connect(self.config, dim=self.dim)
        try:
            self._driver = await open_driver(
                str(self.config.neo4j_url),
                self.config.neo4j_user,
                self.config.neo4j_password,
                database=self.config.neo4j_database,
                timeout=self.config.connect_timeout_s,
            )
            graph = Neo4jGraphStore(self._driver, database=self.config.neo4j_database, embedding_dim=self.dim)
            await graph.ensure_schema()
        except BaseException:
            await documents.aclose()
            if self._driver is not None:
                await self._driver.close()
            raise
        self.documents = documents
        self.vectors = PostgresVectorIndex(documents.pool, self.config)
        self.keywords = PostgresKeywordIndex(documents.pool, self.config)
        self._neo4j = graph
        self.graph = _RowCheckedGraph(graph, documents)

    async def aclose(self) -> None:
        if getattr(self, "documents", None) is not None:
            await self.documents.aclose()
        if self._driver is not None:
            await self._driver.close()
            self._driver = None

    async def write(self, namespace_id: str, batch: WriteBatch) -> None:
        await self.write_many(namespace_id, [batch])

    async def write_many(self, namespace_id: str, batches: Sequence[WriteBatch]) -> None:
        batches = list(batches)
        if not batches:
            return
        await self.documents.write_rows_many(namespace_id, batches)
        landed: set[str] = set()  # documents whose graph part is in Neo4j
        try:
            for part in graph_slices(batches):
                await self._neo4j.write_batches(namespace_id, part)
                landed.update(b.document.id for b in part)
        except BaseException as exc:
            graph_reachable = not isinstance(exc, StorageUnavailableError)
            for batch in batches:
                await self.documents.delete_document_rows(namespace_id, batch.document.id)
                stale = [*batch.replaces, *([batch.document.id] if batch.document.id in landed else [])]
                for old in stale if graph_reachable else ():
                    try:
                        await self._neo4j.delete_document(namespace_id, old)
                    except Exception:  # the rows are gone already; stale graph data is unreachable
                        pass
            raise
        await self._drop_superseded_graphs(namespace_id, batches)

    async def _drop_superseded_graphs(self, namespace_id: str, batches: Sequence[WriteBatch]) -> None:
        """Remove the graph of a document a concurrent write of its ``external_id``
        replaced while this graph was being written (its rows are gone: the later
        writer's graph delete came before this graph landed)."""
        versioned = [b.document.id for b in batches if b.document.external_id]
        if not versioned:
            return
        kept = await self.documents.stored_document_ids(namespace_id, versioned)
        for gone in (d for d in versioned if d not in kept):
            await self._neo4j.delete_document(namespace_id, gone)

    async def delete_document(self, namespace_id: str, document_id: str) -> bool:
        # The graph goes first: when either server is unreachable the call fails with the
        # document still found in PostgreSQL, so the same forget (by id or external_id)
        # retried after the outage finishes it. Rows first left a graph no retry by
        # external_id could find (issue #38 item 2).
        graph_removed = await self._neo4j.delete_document(namespace_id, document_id)
        removed = await self.documents.delete_document_rows(namespace_id, document_id)
        return bool(removed or graph_removed)

    async def graph_gaps(self, namespace_id: str) -> tuple[int, list[str], list[str]]:
        """Where the two servers disagree about the namespace's documents: the count of
        documents in PostgreSQL, the documents whose graph is in Neo4j without their rows
        (stranded by a rolled-back write), and those stored without their graph."""
        rows = await self.documents.all_document_ids(namespace_id)
        graph = await self._neo4j.document_ids(namespace_id)
        return len(rows), sorted(graph - rows), sorted(rows - graph)

    async def drop_graph(self, namespace_id: str, document_id: str) -> bool:
        """Remove one document's graph part only (its rows are gone already)."""
        return bool(await self._neo4j.delete_document(namespace_id, document_id))

    async def delete_namespace(self, namespace_id: str) -> bool:
        removed = await self.documents.delete_namespace_rows(namespace_id)
        await self._neo4j.delete_namespace(namespace_id)
        return bool(removed)

    async def settle(self, *, timeout_s: float = 300.0) -> dict[str, Any]:
        """Bring both servers to steady reads after a large write: ``VACUUM (ANALYZE)`` of
        Khora's tables (``postgres/settle.py``), then Neo4j's indexes online, outdated index
        samples refreshed and cached plans dropped (``neo4j/settle.py``). Seconds per step."""
        from khora_core.storage.neo4j.settle import settle as settle_neo4j
        from khora_core.storage.postgres.settle import settle as settle_postgres

        report = await settle_postgres(self.documents.pool)
        report.update(
            await settle_neo4j(self._driver, database=self.config.neo4j_database, timeout_s=timeout_s)
        )
        return report

    async def _jvm_reading(self) -> tuple[float, float, float] | None:
        """(monotonic time, Neo4j JVM compile ms, JVM uptime ms), kept as the latest reading."""
        from khora_core.storage.neo4j.settle import jvm_compilation

        reading = await jvm_compilation(self._driver, database=self.config.neo4j_database)
        if reading is None:
            return None
        now = time.monotonic()
        self._compile_readings = [*self._compile_readings, (now, reading[0])][-_READINGS_KEPT:]
        return now, reading[0], reading[1]

    async def compile_ms(self) -> float | None:
        """Milliseconds Neo4j's JVM has spent compiling since it started; None when it does
        not say (``neo4j/settle.py: jvm_compilation``). Khora's PostgreSQL sessions run with
        PostgreSQL's JIT off, so it has nothing to count."""
        reading = await self._jvm_reading()
        return None if reading is None else reading[1]

    async def compile_share(self) -> tuple[float, float] | None:
        """(Neo4j's JVM compile time over the time passed, over how many seconds; above 1 when
        its compiler threads ran side by side): since this stack's previous reading when that
        is at least a second old, else since the JVM started. None when Neo4j does not say."""
        before = time.monotonic()
        previous = next((r for r in reversed(self._compile_readings) if before - r[0] >= 1.0), None)
        reading = await self._jvm_reading()
        if reading is None:
            return None
        now, ms, uptime_ms = reading
        if previous is None:
            return ms / max(uptime_ms, 1.0), uptime_ms / 1000.0
        return (ms - previous[1]) / max((now - previous[0]) * 1000.0, 1.0), now - previous[0]

    async def unsettled(self) -> list[str]:
        """Work the servers still have before recall is at its steady speed: tables autovacuum
        would analyze and Neo4j indexes not online (left by recent writes), and Neo4j's JVM
        still compiling (a tenth of the time or more since the previous call, or since it
        started: minutes of traffic after a start or a bulk load). Empty when there is none."""
        from khora_core.storage.neo4j.settle import pending_indexes
        from khora_core.storage.postgres.settle import unanalyzed_tables

        pending = [f"PostgreSQL: {t}" for t in await unanalyzed_tables(self.documents.pool)]
        pending += [
            f"Neo4j index {i}"
            for i in await pending_indexes(self._driver, database=self.config.neo4j_database)
        ]
        share = await self.compile_share()
        line = None if share is None else compiling_line(*share)
        return pending + ([line] if line is not None else [])

    async def stats(self, namespace_id: str) -> NamespaceStats:
        return NamespaceStats(
            namespace_id=namespace_id,
            documents=await self.documents.count_documents(namespace_id),
            chunks=await self.documents.count_chunks(namespace_id),
            entities=await self._neo4j.count_entities(namespace_id),
            relationships=await self._neo4j.count_relationships(namespace_id),
        )
