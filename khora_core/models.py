"""Khora's data: plain pydantic models with no behaviour that touches storage.

Two families live here:

* stored records (``Document``, ``Chunk``, ``Entity``, ``Mention``, ``Relationship``), the
  rows the write path hands to a storage stack in one ``WriteBatch``;
* the read-side projections a caller gets back from ``recall()`` (``RecallResult`` and
  its ``RecallChunk``, ``EntityProjection``, ``RelationshipProjection``,
  ``DocumentProjection``).

All datetimes are timezone-aware UTC.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from khora_core.errors import InvalidInputError

__all__ = [
    "SYSTEM_DATE_KEYS",
    "SYSTEM_STRING_KEYS",
    "Chunk",
    "ChunkHit",
    "Document",
    "DocumentProjection",
    "Entity",
    "EntityProjection",
    "Mention",
    "Namespace",
    "NamespaceStats",
    "RecallChunk",
    "RecallResult",
    "Relationship",
    "RelationshipProjection",
    "RememberResult",
    "RepairReport",
    "SearchMode",
    "WriteBatch",
    "check_properties",
]

#: System keys typed as datetimes (denormalised onto every chunk).
SYSTEM_DATE_KEYS: tuple[str, ...] = ("occurred_at", "created_at", "source_timestamp")
#: System keys typed as strings (denormalised onto every chunk).
SYSTEM_STRING_KEYS: tuple[str, ...] = (
    "source_type",
    "source_name",
    "source_url",
    "external_id",
    "content_type",
    "source",
    "title",
)


class SearchMode(str, enum.Enum):
    """Which retrieval channels ``recall()`` runs.

    ``VECTOR``: semantic similarity only. ``GRAPH``: entity traversal only. ``KEYWORD``:
    BM25 only. ``HYBRID`` (default): vector + graph fused with RRF, plus BM25 when
    ``enable_bm25_channel`` is set. ``ALL``: every channel.
    """

    VECTOR = "vector"
    GRAPH = "graph"
    KEYWORD = "keyword"
    HYBRID = "hybrid"
    ALL = "all"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class Namespace(_Model):
    """An isolated memory space. Every read and write names one."""

    namespace_id: str
    name: str | None = None
    created_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)


class NamespaceStats(_Model):
    """Counts of what a namespace holds."""

    namespace_id: str
    documents: int = 0
    chunks: int = 0
    entities: int = 0
    relationships: int = 0


class RepairReport(_Model):
    """What ``Khora.repair`` found and did in one namespace.

    ``stranded_graphs`` are documents whose graph part is in the graph store while their
    rows are not (a write whose rows were rolled back while the graph server was
    unreachable): removed. ``rebuilt`` are documents stored without their graph part (the
    process died between the two writes): remembered again. ``failed`` maps a document id
    to the error that stopped its repair; such a document is left as it was.
    """

    namespace_id: str
    documents_checked: int = 0
    stranded_graphs: list[str] = Field(default_factory=list)
    rebuilt: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)

    @property
    def clean(self) -> bool:
        """True when the namespace needed no repair, or every repair succeeded."""
        return not self.failed


class _SystemFields(_Model):
    """The system fields a recall filter can address, shared by documents and chunks."""

    occurred_at: datetime | None = None
    created_at: datetime
    source_timestamp: datetime | None = None
    source_type: str | None = None
    source_name: str | None = None
    source_url: str | None = None
    external_id: str | None = None
    content_type: str = "text/plain"
    source: str | None = None
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)


class Document(_SystemFields):
    """One remembered piece of content."""

    id: str
    namespace_id: str
    content: str
    content_hash: str


class Chunk(_SystemFields):
    """A slice of a document: the unit of retrieval.

    The system fields are copied from the document so every channel can filter on them
    without a join. ``created_at`` is Khora's ingest time (``ingested_at``).
    """

    id: str
    namespace_id: str
    document_id: str
    index: int
    content: str
    start_char: int
    end_char: int
    token_count: int = 0
    embedding: list[float] | None = None
    #: True when full extraction failed or was skipped and should be retried.
    needs_extraction: bool = False
    #: True when this chunk was in the skeleton core sent to full extraction.
    is_core: bool = False
    #: What is searched with the chunk without being part of it: the ``context`` given to
    #: ``remember`` (keyword search only), then its document's title and, in Markdown, the
    #: heading path above it (``IngestConfig.chunk_context``; these are also embedded). Reads
    #: return it; chunks that PostgreSQL stored before schema 7 read back ``None``.
    context: str | None = None

    @property
    def search_text(self) -> str:
        """The text indexed for BM25: ``context``, then ``content``."""
        return f"{self.context}\n{self.content}" if self.context else self.content

    @property
    def ingested_at(self) -> datetime:
        return self.created_at

    def filter_record(self) -> dict[str, Any]:
        """The dict the in-memory filter evaluator reads (system keys + ``metadata``)."""
        return {
            "occurred_at": self.occurred_at,
            "created_at": self.created_at,
            "source_timestamp": self.source_timestamp,
            "source_type": self.source_type,
            "source_name": self.source_name,
            "source_url": self.source_url,
            "external_id": self.external_id,
            "content_type": self.content_type,
            "source": self.source,
            "title": self.title,
            "metadata": self.metadata,
        }


def _json_value(value: Any, where: str) -> Any:
    """``value`` as plain JSON (tuples become lists), or ``InvalidInputError`` naming ``where``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{where} is {value!r}; JSON has no NaN or infinity")
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(f"{where} has the key {key!r}; JSON object keys are strings")
            out[key] = _json_value(item, f"{where}[{key!r}]")
        return out
    raise InvalidInputError(
        f"{where} is of type {type(value).__name__} ({value!r}), not a JSON value: use strings, numbers, "
        "booleans, None, lists and dicts (a datetime as an ISO-8601 string)"
    )


def check_properties(properties: Any, owner: str) -> dict[str, Any]:
    """Free-form ``properties`` of an entity or relationship, checked: a dict with non-empty
    string keys whose values are JSON (nested lists and dicts too).

    Raises:
        InvalidInputError: not a dict, a key that is not a non-empty string, or a value JSON
            cannot hold (a datetime, a set, NaN, an object...), named by its key.
    """
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        raise InvalidInputError(f"{owner} properties must be a dict, got {type(properties).__name__}")
    out: dict[str, Any] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"{owner} property keys must be non-empty strings, got {key!r}")
        out[key] = _json_value(value, f"{owner} property {key!r}")
    return out


class _WithProperties(_Model):
    """A stored graph record with free-form ``properties``, checked when built.

    The check runs in ``__init__`` so a bad value raises ``InvalidInputError`` (a pydantic
    validator would turn it into a ``ValidationError``); ``model_validate`` still checks,
    raising ``ValidationError``.
    """

    def __init__(self, **data: Any) -> None:
        if data.get("properties"):
            data["properties"] = check_properties(data["properties"], type(self).__name__)
        super().__init__(**data)

    @field_validator("properties", mode="after", check_fields=False)
    @classmethod
    def _json_properties(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_properties(value, cls.__name__) if value else value


#: Free-form properties of entities and relationships: string keys, JSON values (what a
#: LlamaIndex ``EntityNode`` or ``Relation`` carries, for instance). Upserting a stored
#: record updates them key by key: a later value wins for its key, keys it does not name
#: are kept.
_PROPERTIES_DOC = "Free-form JSON properties; an upsert updates them key by key."


class Entity(_WithProperties):
    """A resolved entity: one node per namespace per real-world thing."""

    id: str
    namespace_id: str
    name: str
    type: str = "CONCEPT"
    aliases: list[str] = Field(default_factory=list)
    description: str | None = None
    embedding: list[float] | None = None
    mention_count: int = 0
    properties: dict[str, Any] = Field(default_factory=dict, description=_PROPERTIES_DOC)


class Mention(_Model):
    """``(:Entity)-[:MENTIONED_IN]->(:Chunk)``."""

    entity_id: str
    chunk_id: str
    document_id: str
    count: int = 1


class Relationship(_WithProperties):
    """A typed edge between two entities, learned from one chunk of one document."""

    id: str
    namespace_id: str
    source_id: str
    target_id: str
    type: str
    description: str | None = None
    weight: float = 1.0
    document_id: str
    chunk_id: str | None = None
    properties: dict[str, Any] = Field(default_factory=dict, description=_PROPERTIES_DOC)


class WriteBatch(_Model):
    """Everything one ``remember`` lands, in one atomic ``stack.write``."""

    document: Document
    chunks: list[Chunk]
    entities: list[Entity] = Field(default_factory=list)
    mentions: list[Mention] = Field(default_factory=list)
    relationships: list[Relationship] = Field(default_factory=list)
    #: Document ids this write replaces (same ``external_id``); removed in the same write.
    replaces: list[str] = Field(default_factory=list)


class ChunkHit(_Model):
    """A chunk found by one channel, with that channel's raw score and rank (1-based)."""

    chunk: Chunk
    score: float
    rank: int


class RememberResult(_Model):
    """What ``remember`` stored."""

    document_id: str
    namespace_id: str
    chunk_ids: list[str] = Field(default_factory=list)
    entity_count: int = 0
    relationship_count: int = 0
    duplicate: bool = False
    #: Ids of the documents this one replaced (same ``external_id``).
    replaced_document_ids: list[str] = Field(default_factory=list)
    #: Chunk ids whose extraction failed; they are stored and flagged for re-extraction.
    extraction_failed_chunk_ids: list[str] = Field(default_factory=list)
    #: Chunks sent to full extraction (the skeleton core) vs all chunks.
    core_chunk_count: int = 0


class DocumentProjection(_Model):
    """A document as recall returns it (no embedding; content included)."""

    id: str
    namespace_id: str
    title: str | None = None
    content: str | None = None
    occurred_at: datetime | None = None
    created_at: datetime
    source_timestamp: datetime | None = None
    source_type: str | None = None
    source_name: str | None = None
    source_url: str | None = None
    external_id: str | None = None
    content_type: str = "text/plain"
    source: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)


class RecallChunk(_Model):
    """One chunk in a recall result.

    ``score`` is the normalised fused rank within this result (top hit ~1.0), not a
    confidence. ``channel_scores`` / ``channel_ranks`` hold each channel's raw score and
    1-based rank; ``vector_similarity`` is the raw cosine when the vector channel saw it.
    """

    id: str
    document_id: str
    content: str
    score: float
    index: int = 0
    start_char: int = 0
    end_char: int = 0
    occurred_at: datetime | None = None
    created_at: datetime | None = None
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    channels: list[str] = Field(default_factory=list)
    channel_scores: dict[str, float] = Field(default_factory=dict)
    channel_ranks: dict[str, int] = Field(default_factory=dict)
    vector_similarity: float | None = None
    rerank_score: float | None = None
    entity_ids: list[str] = Field(default_factory=list)
    entity_names: list[str] = Field(default_factory=list)


class EntityProjection(_Model):
    """An entity as recall and the entity read APIs return it."""

    id: str
    name: str
    type: str
    aliases: list[str] = Field(default_factory=list)
    description: str | None = None
    mention_count: int = 0
    score: float | None = None
    document_ids: list[str] = Field(default_factory=list)
    source_documents: list[DocumentProjection] | None = None
    #: Free-form properties stored with the entity (``Entity.properties``).
    properties: dict[str, Any] = Field(default_factory=dict)


class RelationshipProjection(_Model):
    """A relationship between two entities in the result set."""

    id: str
    source_id: str
    source_name: str | None = None
    target_id: str
    target_name: str | None = None
    type: str
    description: str | None = None
    weight: float = 1.0
    document_id: str
    #: Free-form properties stored with the relationship (``Relationship.properties``).
    properties: dict[str, Any] = Field(default_factory=dict)


class RecallResult(_Model):
    """What ``recall()`` returns.

    ``documents`` holds every document that a chunk, entity or relationship references.
    ``engine_info`` carries the routing decision, channel timings, ``max_raw_vector_score``,
    the filter pushdown report under ``"filter"`` and ``"abstention_signals"``.
    """

    query: str
    namespace_id: str
    chunks: list[RecallChunk] = Field(default_factory=list)
    entities: list[EntityProjection] = Field(default_factory=list)
    relationships: list[RelationshipProjection] = Field(default_factory=list)
    documents: list[DocumentProjection] = Field(default_factory=list)
    engine_info: dict[str, Any] = Field(default_factory=dict)

    @property
    def should_abstain(self) -> bool:
        """Shortcut for ``engine_info["abstention_signals"]["should_abstain"]``."""
        return bool(self.engine_info.get("abstention_signals", {}).get("should_abstain", False))
