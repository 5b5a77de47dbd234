"""Pure conversions between LlamaIndex graph objects and Khora's records.

How ids map (documented on ``KhoraPropertyGraphStore`` too):

* ``EntityNode`` <-> Khora ``Entity``: the node id is the entity name; the Khora id is
  ``khora_core.ingest.resolve.entity_id(namespace, name)`` (deterministic, so the same name
  written by LlamaIndex and by ``Khora.remember`` is one node). ``label`` is the entity
  ``type``; LlamaIndex's default label ``"entity"`` is Khora's default type ``"CONCEPT"``.
* ``ChunkNode`` <-> Khora ``Document``: the node id is the document's ``external_id`` (a
  LlamaIndex node id when LlamaIndex wrote it), else the Khora document id. A Khora chunk
  id asked for explicitly comes back as a ``ChunkNode`` of that one chunk.
* ``Relation`` <-> Khora ``Relationship`` between two entities: ``label`` is the type; the
  Khora id is a uuid5 of (namespace, source entity, label, target entity), so writing the
  same triple twice updates one edge.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from llama_index.core.graph_stores.types import TRIPLET_SOURCE_KEY, ChunkNode, EntityNode, Relation
from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS, Chunk, Document, Entity, Relationship
from khora_integrations._bridge import jsonable

__all__ = [
    "CHUNK_LABEL",
    "DEFAULT_LABEL",
    "DEFAULT_TYPE",
    "KHORA_CHUNK_KEY",
    "KHORA_DOCUMENT_KEY",
    "KHORA_ID_KEY",
    "NO_SOURCE_DOCUMENT_ID",
    "READ_ONLY_KEYS",
    "chunk_node_id",
    "chunk_to_node",
    "document_to_node",
    "entity_to_node",
    "label_to_type",
    "llama_node",
    "properties_match",
    "relation_id",
    "relationship_to_relation",
    "remember_arguments",
    "type_to_label",
]

#: LlamaIndex's label for an untyped entity, and Khora's type for one.
DEFAULT_LABEL = "entity"
DEFAULT_TYPE = "CONCEPT"
#: The label of text-chunk nodes (LlamaIndex's ``ChunkNode`` default).
CHUNK_LABEL = "text_chunk"
#: Property keys the store adds when it reads; ignored when a node comes back to be written.
KHORA_ID_KEY = "khora_id"
KHORA_DOCUMENT_KEY = "khora_document_id"
KHORA_CHUNK_KEY = "khora_chunk_id"
READ_ONLY_KEYS = frozenset({KHORA_ID_KEY, KHORA_DOCUMENT_KEY, KHORA_CHUNK_KEY, "mention_count"})
#: ``Relationship.document_id`` of an edge written without a known source chunk.
NO_SOURCE_DOCUMENT_ID = "llama_index"
_RELATION_NAMESPACE = uuid.UUID("3c1f6a52-9d0e-5b7a-8e44-6c6c616d6169")


def label_to_type(label: str) -> str:
    return DEFAULT_TYPE if not label or label == DEFAULT_LABEL else label


def type_to_label(type_: str) -> str:
    return DEFAULT_LABEL if type_ == DEFAULT_TYPE else type_


def entity_to_node(entity: Entity, source: str | None = None) -> EntityNode:
    """An ``EntityNode`` for a Khora entity: its stored ``properties``, then Khora's fields
    and read-only keys laid over them; ``source`` is its ``triplet_source_id`` (the stored
    one, if any, when Khora knows no source)."""
    props: dict[str, Any] = {
        **entity.properties,
        KHORA_ID_KEY: entity.id,
        "mention_count": entity.mention_count,
    }
    if entity.description:
        props["description"] = entity.description
    if entity.aliases:
        props["aliases"] = list(entity.aliases)
    if source is not None:
        props[TRIPLET_SOURCE_KEY] = source
    return EntityNode(name=entity.name, label=type_to_label(entity.type), properties=props)


def chunk_node_id(doc: Document) -> str:
    """The ``ChunkNode`` id of a document: its ``external_id``, else its Khora id."""
    return doc.external_id or doc.id


def _system_view(obj: Document | Chunk) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in (*SYSTEM_STRING_KEYS, *SYSTEM_DATE_KEYS):
        value = getattr(obj, key, None)
        if value is not None:
            out[key] = jsonable(value)
    return out


def document_to_node(doc: Document) -> ChunkNode:
    """A ``ChunkNode`` for a whole document: its metadata, then its system fields."""
    props = {**_system_view(doc), **jsonable(dict(doc.metadata)), KHORA_DOCUMENT_KEY: doc.id}
    return ChunkNode(text=doc.content, id_=chunk_node_id(doc), label=CHUNK_LABEL, properties=props)


def chunk_to_node(chunk: Chunk) -> ChunkNode:
    """A ``ChunkNode`` for one Khora chunk, asked for by its chunk id."""
    props = {
        **_system_view(chunk),
        **jsonable(dict(chunk.metadata)),
        KHORA_DOCUMENT_KEY: chunk.document_id,
        KHORA_CHUNK_KEY: chunk.id,
        "chunk_index": chunk.index,
    }
    return ChunkNode(text=chunk.content, id_=chunk.id, label=CHUNK_LABEL, properties=props)


def llama_node(node: ChunkNode) -> BaseNode:
    """The LlamaIndex node a ``ChunkNode`` stands for.

    Nodes LlamaIndex wrote carry their serialised self (``_node_content``) and come back
    exactly; other documents become a ``TextNode`` with the document's metadata.
    """
    props = {k: v for k, v in node.properties.items() if k not in READ_ONLY_KEYS}
    if "_node_content" in props:
        restored = metadata_dict_to_node(props)
        restored.set_content(node.text)
        return restored
    return TextNode(id_=node.id, text=node.text, metadata=dict(node.properties))


def relation_id(namespace_id: str, source_id: str, label: str, target_id: str) -> str:
    """Deterministic Khora id of the edge ``(source)-[label]->(target)`` in a namespace."""
    return str(uuid.uuid5(_RELATION_NAMESPACE, f"{namespace_id}\x1f{source_id}\x1f{label}\x1f{target_id}"))


def relationship_to_relation(
    rel: Relationship, source: EntityNode, target: EntityNode, source_chunk: str | None
) -> Relation:
    """A ``Relation`` for a Khora relationship: its stored ``properties``, then Khora's fields
    and read-only keys; ``source_chunk`` is the ChunkNode id it came from."""
    props: dict[str, Any] = {**rel.properties, KHORA_ID_KEY: rel.id, "weight": rel.weight}
    if rel.description:
        props["description"] = rel.description
    if rel.document_id and rel.document_id != NO_SOURCE_DOCUMENT_ID:
        props[KHORA_DOCUMENT_KEY] = rel.document_id
    if source_chunk is not None:
        props[TRIPLET_SOURCE_KEY] = source_chunk
    return Relation(label=rel.type, source_id=source.id, target_id=target.id, properties=props)


def remember_arguments(node: ChunkNode) -> dict[str, Any]:
    """``Khora.remember`` keywords for a ``ChunkNode``.

    The properties become the document's metadata unchanged (so the LlamaIndex node comes
    back exactly); string-valued system keys among them (``title``, ``source``, ...) and
    ``occurred_at``/``source_timestamp`` are also set as Khora's system fields, so a filter
    on ``title`` means the same thing in LlamaIndex and in Khora. ``external_id`` is the node
    id; ``created_at`` is always Khora's ingest time.
    """
    metadata = {k: v for k, v in node.properties.items() if k not in READ_ONLY_KEYS}
    kwargs: dict[str, Any] = {"metadata": metadata, "external_id": node.id}
    for key in SYSTEM_STRING_KEYS:
        value = metadata.get(key)
        if key != "external_id" and isinstance(value, str) and value:
            kwargs[key] = value
    for key in ("occurred_at", "source_timestamp"):
        if metadata.get(key) is not None:
            kwargs[key] = metadata[key]
    if kwargs.get("content_type") not in (None, "text/plain", "text/markdown"):
        kwargs.pop("content_type")  # a file's MIME type, not a Khora content type
    return kwargs


def properties_match(props: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """Whether every ``wanted`` key is in ``props`` with an equal value."""
    return not wanted or all(k in props and props[k] == v for k, v in wanted.items())
