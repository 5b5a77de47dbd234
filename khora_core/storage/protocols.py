"""What the engine needs from storage, as small protocols.

A *stack* (``StorageStack``) bundles one implementation of each capability:

* ``DocumentStore``: namespaces, documents and chunks (system fields + metadata), the
  atomic ``write`` of a ``WriteBatch``, ``delete_document`` and ``stats``;
* ``VectorIndex``: chunk vector search with filter pushdown;
* ``KeywordIndex``: BM25 chunk search with filter pushdown;
* ``GraphStore``: entity and chunk nodes, ``MENTIONED_IN``, typed relationships,
  ``AT_TIME`` time nodes, neighbourhood expansion, entity vector search.

Every method takes ``namespace_id`` first and keyword-free; no method can reach across
namespaces. Filters arrive as a parsed ``RecallFilter``; a search returns a
``SearchPage`` that says which filter keys it enforced in the backend query
(``pushed_keys``) and which it re-checked in memory (``post_filtered_keys``).

Stacks in this package: ``sqlite_lance`` (embedded default) and ``postgres`` (PostgreSQL +
pgvector documents/vectors/BM25, Neo4j graph).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from khora_core.models import (
    Chunk,
    ChunkHit,
    Document,
    Entity,
    Namespace,
    NamespaceStats,
    Relationship,
    WriteBatch,
)

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter

__all__ = [
    "ChunkGraph",
    "DocumentStore",
    "EntityHit",
    "EntityRef",
    "GraphStore",
    "KeywordIndex",
    "Neighbourhood",
    "SearchPage",
    "StorageStack",
    "VectorIndex",
    "fold",
]


@dataclass
class SearchPage:
    """One channel's hits plus what it did with the filter."""

    hits: list[ChunkHit] = field(default_factory=list)
    pushed_keys: list[str] = field(default_factory=list)
    post_filtered_keys: list[str] = field(default_factory=list)


@dataclass
class EntityHit:
    entity: Entity
    score: float


@dataclass
class Neighbourhood:
    """Entities reached from seeds within ``depth`` hops, with the edges walked.

    ``distance`` maps entity id to its hop count from the nearest seed (seeds are 0).
    """

    entities: list[Entity] = field(default_factory=list)
    relationships: list[Relationship] = field(default_factory=list)
    distance: dict[str, int] = field(default_factory=dict)


class EntityRef(NamedTuple):
    """An entity a chunk mentions, as recall reads it: its id and name (what a result lists
    under the chunk), its type, and how many chunks mention it (``Entity.mention_count``)."""

    id: str
    name: str
    type: str
    mention_count: int

    @classmethod
    def of(cls, entity: Entity) -> EntityRef:
        """The ``EntityRef`` of a whole entity."""
        return cls(entity.id, entity.name, entity.type, entity.mention_count)


@dataclass
class ChunkGraph:
    """The graph around a set of chunks, as recall's result shows it (``GraphStore.chunk_graph``).

    ``chunk_entities`` maps each chunk id to the entities it mentions, as ``EntityRef``s (most
    mentions first; chunks with none are absent): a recall result lists no more than their
    ids and names per chunk. ``entities`` are the ones kept, whole and best first (see
    ``khora_core.storage.chunk_graph.rank_chunk_entities``); ``relationships`` have both
    ends among them, heaviest first.
    """

    chunk_entities: dict[str, list[EntityRef]] = field(default_factory=dict)
    entities: list[Entity] = field(default_factory=list)
    relationships: list[Relationship] = field(default_factory=list)


def fold(name: str) -> str:
    """The case-insensitive key that ``GraphStore.find_entities_by_name`` compares names and
    aliases by (stored as ``name_lower`` / ``alias_lower``)."""
    return name.strip().casefold()


@runtime_checkable
class DocumentStore(Protocol):
    async def create_namespace(self, namespace: Namespace) -> None: ...
    async def get_namespace(self, namespace_id: str) -> Namespace | None: ...
    async def list_namespaces(self) -> list[Namespace]: ...

    async def find_document_by_hash(self, namespace_id: str, content_hash: str) -> Document | None: ...
    async def find_documents_by_hashes(
        self, namespace_id: str, content_hashes: Sequence[str]
    ) -> dict[str, Document]: ...
    async def find_documents_by_external_id(self, namespace_id: str, external_id: str) -> list[Document]: ...
    async def get_documents(self, namespace_id: str, document_ids: Sequence[str]) -> list[Document]: ...
    async def list_documents(self, namespace_id: str, *, offset: int = 0, limit: int = 100) -> list[Document]:
        """A page of the namespace's documents, newest first (``created_at`` then id)."""
        ...

    async def get_chunks(self, namespace_id: str, chunk_ids: Sequence[str]) -> list[Chunk]: ...
    async def newest_occurred_at(self, namespace_id: str) -> datetime | None: ...
    async def count_chunks(self, namespace_id: str) -> int: ...


@runtime_checkable
class VectorIndex(Protocol):
    async def search(
        self,
        namespace_id: str,
        vector: Sequence[float],
        *,
        limit: int,
        filter: RecallFilter | None = None,
        min_similarity: float = 0.0,
        ef_search: int | None = None,
    ) -> SearchPage:
        """Top ``limit`` chunks by cosine similarity (``score`` is the raw cosine)."""
        ...

    async def embeddings(self, namespace_id: str, chunk_ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored embeddings of the given chunks of the namespace (unknown ids are absent)."""
        ...

    async def similarities(
        self, namespace_id: str, vector: Sequence[float], chunk_ids: Sequence[str]
    ) -> dict[str, float]:
        """Raw cosine of ``vector`` with each given chunk of the namespace (unknown ids are
        absent); computed where the vectors live, so no embedding travels."""
        ...

    async def similarities_many(
        self, namespace_id: str, vectors: Sequence[Sequence[float]], chunk_ids: Sequence[str]
    ) -> list[dict[str, float]]:
        """``similarities`` for each of ``vectors`` (one mapping per vector, in order), reading
        each chunk once."""
        ...


@runtime_checkable
class KeywordIndex(Protocol):
    async def search(
        self,
        namespace_id: str,
        query: str,
        *,
        limit: int,
        filter: RecallFilter | None = None,
    ) -> SearchPage:
        """Top ``limit`` chunks by BM25 (k1 and b from the stack's config)."""
        ...


@runtime_checkable
class GraphStore(Protocol):
    async def get_entity(self, namespace_id: str, entity_id: str) -> Entity | None: ...
    async def get_entities(self, namespace_id: str, entity_ids: Sequence[str]) -> list[Entity]: ...
    async def list_entities(
        self, namespace_id: str, *, offset: int = 0, limit: int = 100, type: str | None = None
    ) -> list[Entity]: ...
    async def find_entities_by_name(self, namespace_id: str, names: Sequence[str]) -> list[Entity]:
        """Exact, case-insensitive matches on name or alias."""
        ...

    async def find_entities_by_words(
        self, namespace_id: str, texts: Sequence[str], *, limit: int
    ) -> list[list[Entity]]:
        """For each text, up to ``limit`` entities whose name shares a word with it
        (:func:`~khora_core.storage.words.name_words`), best first: the candidates that
        linking scores by edit distance, found without vectors."""
        ...

    async def search_entities_by_vector(
        self, namespace_id: str, vector: Sequence[float], *, limit: int, min_similarity: float = 0.0
    ) -> list[EntityHit]:
        """Entities by raw cosine similarity of their embedding, best first; a vector with
        no direction (all zeros) finds nothing. The hits' entities come without their
        embedding (``get_entities`` reads it): recall needs only the ids, names and scores."""
        ...

    async def search_entities_by_vectors(
        self,
        namespace_id: str,
        vectors: Sequence[Sequence[float]],
        *,
        limit: int,
        min_similarity: float = 0.0,
    ) -> list[list[EntityHit]]:
        """``search_entities_by_vector`` for several vectors in one call, one list per vector."""
        ...

    async def chunk_mentions(
        self, namespace_id: str, entity_ids: Sequence[str], *, per_entity: int
    ) -> dict[str, dict[str, int]]:
        """For each entity, its ``per_entity`` most-mentioning chunks: ``{entity id: {chunk id:
        mention count}}`` (most mentions first, then chunk id); entities with none are absent."""
        ...

    async def neighbourhood(
        self,
        namespace_id: str,
        entity_ids: Sequence[str],
        *,
        depth: int,
        max_fanout: int = 50,
        relationship_types: Sequence[str] | None = None,
        max_entities: int | None = None,
        max_mentions: int | None = None,
    ) -> Neighbourhood:
        """Entities within ``depth`` hops of the seeds; with ``max_entities``, the walk stops
        once that many entities beyond the seeds are reached (nearest hops first, heaviest
        edges first within a hop). With ``max_mentions``, an entity (seed or reached)
        mentioned more often than that is not walked through: it is in the result, its
        other neighbours are not reached through it (a chat's speaker or a country links
        everything to everything, and expanding it costs its whole degree)."""
        ...

    async def walk_distances(
        self,
        namespace_id: str,
        entity_ids: Sequence[str],
        *,
        depth: int,
        max_fanout: int = 50,
        relationship_types: Sequence[str] | None = None,
        max_entities: int | None = None,
        max_mentions: int | None = None,
    ) -> dict[str, int]:
        """The walk of ``neighbourhood`` with the same arguments, returning only its
        ``distance`` (entity id -> hops from the nearest seed; stored seeds at 0), for a
        caller that needs neither the entities' fields nor the edges (the graph channel)."""
        ...

    async def chunks_for_entities(
        self,
        namespace_id: str,
        entity_ids: Sequence[str],
        *,
        limit: int,
        filter: RecallFilter | None = None,
        temporal_sort: bool = False,
    ) -> SearchPage:
        """Chunks linked by ``MENTIONED_IN`` to the entities, best first.

        Ordered by total mentions of the given entities (``temporal_sort``: by
        ``occurred_at`` DESC first). ``score`` is the mention count.
        """
        ...

    async def chunks_for_entity_groups(
        self,
        namespace_id: str,
        groups: Sequence[Sequence[str]],
        *,
        limit: int,
        filter: RecallFilter | None = None,
        temporal_sort: bool = False,
    ) -> list[SearchPage]:
        """``chunks_for_entities`` for each group, one page per group in order, read in one
        round trip where the store can (the graph channel reaches by several groups at once)."""
        ...

    async def entities_for_chunks(
        self, namespace_id: str, chunk_ids: Sequence[str]
    ) -> dict[str, list[Entity]]: ...
    async def entity_refs_for_chunks(
        self, namespace_id: str, chunk_ids: Sequence[str]
    ) -> dict[str, list[EntityRef]]:
        """``entities_for_chunks`` as ``EntityRef``s, in the same order: what the read path
        needs of them, without reading each entity whole."""
        ...

    async def relationships_among(
        self,
        namespace_id: str,
        entity_ids: Sequence[str],
        *,
        limit: int = 100,
        per_pair: int | None = None,
    ) -> list[Relationship]:
        """Relationships with both ends among ``entity_ids``: the ``limit`` heaviest (ties by
        id), of which at most ``per_pair`` (the heaviest) between one ordered pair when given."""
        ...

    async def chunk_graph(
        self,
        namespace_id: str,
        chunk_ids: Sequence[str],
        *,
        entity_scores: Mapping[str, float] | None = None,
        max_entities: int = 30,
        max_relationships: int = 100,
        per_pair: int | None = None,
    ) -> ChunkGraph:
        """The chunks' entities (``EntityRef``s), the ``max_entities`` best of them whole (by
        how many of the chunks mention each, then ``entity_scores``, total mentions, name and
        id), and at most ``max_relationships`` relationships among those, ``per_pair`` between
        one ordered pair: ``entities_for_chunks`` followed by ``relationships_among``, which a
        store may answer in one round trip."""
        ...

    async def documents_for_entities(
        self, namespace_id: str, entity_ids: Sequence[str]
    ) -> dict[str, list[str]]: ...
    async def time_nodes_for_chunk(self, namespace_id: str, chunk_id: str) -> list[str]:
        """The ``AT_TIME`` time-node keys (ISO dates, ``YYYY-MM-DD``) of a chunk."""
        ...

    async def list_relationships(
        self,
        namespace_id: str,
        *,
        entity_ids: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        limit: int = 1000,
    ) -> list[Relationship]:
        """Relationships touching any of ``entity_ids`` (all when None), optionally by type."""
        ...

    async def upsert_graph(
        self,
        namespace_id: str,
        *,
        entities: Sequence[Entity] = (),
        relationships: Sequence[Relationship] = (),
    ) -> None:
        """Insert or update entities and relationships that are not tied to a new document
        (used by the LlamaIndex property graph store). Entities merge by id."""
        ...

    async def delete_entities(self, namespace_id: str, entity_ids: Sequence[str]) -> int:
        """Delete entities with their mentions and relationships; returns how many went."""
        ...

    async def delete_relationships(self, namespace_id: str, relationship_ids: Sequence[str]) -> int:
        """Delete relationships by id (their entities stay); returns how many went."""
        ...


class StorageStack(Protocol):
    """A complete storage stack; ``name`` is ``"sqlite_lance"`` or ``"postgres"``."""

    name: str

    # Read-only, so a stack may hold its own store types (PostgresDocumentStore, ...).
    @property
    def documents(self) -> DocumentStore: ...
    @property
    def vectors(self) -> VectorIndex: ...
    @property
    def keywords(self) -> KeywordIndex: ...
    @property
    def graph(self) -> GraphStore: ...

    async def open(self) -> None:
        """Connect, check, migrate. Raises ``ConfigError``/``StorageUnavailableError``."""
        ...

    async def aclose(self) -> None: ...

    async def write(self, namespace_id: str, batch: WriteBatch) -> None:
        """Land a whole batch (document, chunks, vectors, keyword terms, graph) or none of it.

        Document ids in ``batch.replaces`` are deleted in the same write, and so is every
        other stored version of the document's ``external_id`` (added to
        ``batch.replaces``), so concurrent writers of one external id keep one version. A
        document id that is stored already raises ``InvalidInputError`` (a concurrent write
        of the same content landed first). On a stack that spans two servers, a failure on
        one side is compensated so recall never sees a half-written document.
        """
        ...

    async def write_many(self, namespace_id: str, batches: Sequence[WriteBatch]) -> None:
        """Land several batches as one write: all of them, or none.

        The same as calling :meth:`write` for each batch in order, in one transaction per
        server (far fewer round trips for many small documents). Document ids must differ.
        """
        ...

    async def delete_document(self, namespace_id: str, document_id: str) -> bool:
        """Remove a document everywhere: chunks, vectors, keyword terms, chunk and time
        links, relationships learned from it, and entities left with no mention."""
        ...

    async def delete_namespace(self, namespace_id: str) -> bool:
        """Remove a namespace and everything in it."""
        ...

    async def stats(self, namespace_id: str) -> NamespaceStats: ...
