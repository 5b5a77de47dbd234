"""Khora models <-> Neo4j property maps.

Dates travel as aware UTC ``datetime`` (stored as Neo4j ``DateTime``) and come back as
``neo4j.time.DateTime``, converted to aware UTC ``datetime`` here. Chunk metadata is stored
as a JSON string (``metadata_json``; datetimes inside it as ISO-8601 strings), so Cypher
never reads user metadata.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time, timezone
from typing import Any

from neo4j.time import Date as Neo4jDate
from neo4j.time import DateTime as Neo4jDateTime

from khora_core.errors import InvalidInputError
from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS, Chunk, Entity, Relationship
from khora_core.storage.protocols import EntityRef, fold

__all__ = [
    "ENTITY_FIELDS",
    "chunk_from_props",
    "chunk_props",
    "day_key",
    "entity_from_props",
    "entity_ref",
    "entity_ref_list",
    "entity_row",
    "fold",
    "present",
    "present_edge",
    "properties_from_props",
    "property_lists",
    "relationship_from_props",
    "relationship_row",
    "to_datetime",
    "to_neo4j_datetime",
    "unique_by_id",
]

#: Entity properties returned by reads (no embedding: 384 floats per row is wasted I/O).
ENTITY_FIELDS = "{.id, .namespace_id, .name, .type, .aliases, .description, .mention_count, .property_keys, .property_values}"


def entity_ref_list(node: str) -> str:
    """Cypher for an ``EntityRef`` of the entity node variable ``node`` (a name in our own
    statement, never user text), read back by :func:`entity_ref`: a list, lighter than a map."""
    return f"[{node}.id, {node}.name, {node}.type, {node}.mention_count]"


def to_neo4j_datetime(value: datetime | None) -> datetime | None:
    """An aware UTC datetime for the driver (naive values are taken as UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def to_datetime(value: Any) -> datetime | None:
    """A Neo4j temporal (or python datetime) as an aware UTC ``datetime``."""
    if value is None:
        return None
    if isinstance(value, Neo4jDateTime):
        value = value.to_native()
    elif isinstance(value, Neo4jDate):
        value = datetime.combine(value.to_native(), time(), tzinfo=timezone.utc)
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=timezone.utc)
    if isinstance(value, str):
        return to_datetime(datetime.fromisoformat(value))
    raise TypeError(f"not a date/time value: {value!r}")


def day_key(value: datetime) -> str:
    """The ``TimeNode`` key (``YYYY-MM-DD``, UTC) of a datetime."""
    aware = to_neo4j_datetime(value)
    assert aware is not None
    return aware.date().isoformat()


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def chunk_props(chunk: Chunk, namespace_id: str) -> dict[str, Any]:
    """The full property map of a ``:Chunk`` node (``SET c = row`` replaces all properties)."""
    if chunk.namespace_id != namespace_id:
        raise InvalidInputError(
            f"chunk {chunk.id} belongs to namespace {chunk.namespace_id!r}, not {namespace_id!r}"
        )
    try:
        metadata_json = json.dumps(chunk.metadata, default=_json_default, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"metadata of chunk {chunk.id} is not JSON: {exc}") from exc
    props: dict[str, Any] = {
        "id": chunk.id,
        "namespace_id": namespace_id,
        "document_id": chunk.document_id,
        "index": chunk.index,
        "content": chunk.content,
        "start_char": chunk.start_char,
        "end_char": chunk.end_char,
        "token_count": chunk.token_count,
        "needs_extraction": chunk.needs_extraction,
        "is_core": chunk.is_core,
        "tags": list(chunk.tags),
        "metadata_json": metadata_json,
    }
    for key in SYSTEM_DATE_KEYS:
        props[key] = to_neo4j_datetime(getattr(chunk, key))
    for key in SYSTEM_STRING_KEYS:
        props[key] = getattr(chunk, key)
    # Null-valued entries are simply not stored (Neo4j has no null properties).
    return {k: v for k, v in props.items() if v is not None}


def chunk_from_props(props: Mapping[str, Any]) -> Chunk:
    """A ``Chunk`` from a ``:Chunk`` node's properties (no embedding: vectors live elsewhere)."""
    raw = props.get("metadata_json")
    fields: dict[str, Any] = {
        "id": props["id"],
        "namespace_id": props["namespace_id"],
        "document_id": props["document_id"],
        "index": int(props.get("index") or 0),
        "content": props.get("content") or "",
        "start_char": int(props.get("start_char") or 0),
        "end_char": int(props.get("end_char") or 0),
        "token_count": int(props.get("token_count") or 0),
        "needs_extraction": bool(props.get("needs_extraction", False)),
        "is_core": bool(props.get("is_core", False)),
        "tags": list(props.get("tags") or []),
        "metadata": json.loads(raw) if raw else {},
    }
    for key in SYSTEM_DATE_KEYS:
        fields[key] = to_datetime(props.get(key))
    if fields["created_at"] is None:  # required by the model; never absent for our writes
        fields["created_at"] = datetime.fromtimestamp(0, tz=timezone.utc)
    for key in SYSTEM_STRING_KEYS:
        if props.get(key) is not None:
            fields[key] = props[key]
    return Chunk(**fields)


def property_lists(properties: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """An entity's or relationship's ``properties`` as two Neo4j list properties: the keys,
    and each value as JSON text (a Neo4j property cannot hold a map, nor a list of maps).
    Two lists let the merge statements update them key by key in Cypher."""
    keys = list(properties)
    values = [
        json.dumps(properties[k], ensure_ascii=False, separators=(",", ":"), allow_nan=False) for k in keys
    ]
    return keys, values


def properties_from_props(props: Mapping[str, Any]) -> dict[str, Any]:
    """The ``properties`` stored as ``property_keys`` / ``property_values`` ({} when none)."""
    keys = props.get("property_keys")
    if not keys:
        return {}
    return {k: json.loads(v) for k, v in zip(keys, props.get("property_values") or [], strict=False)}


def entity_row(entity: Entity, namespace_id: str, embedding_dim: int) -> dict[str, Any]:
    """Parameters of one entity for the merge statement."""
    if entity.namespace_id != namespace_id:
        raise InvalidInputError(
            f"entity {entity.id} belongs to namespace {entity.namespace_id!r}, not {namespace_id!r}"
        )
    embedding = None
    if entity.embedding is not None:
        if len(entity.embedding) != embedding_dim:
            raise InvalidInputError(
                f"entity {entity.id} has a {len(entity.embedding)}-dimensional embedding; "
                f"the graph store expects {embedding_dim}"
            )
        embedding = [float(x) for x in entity.embedding]
    keys, values = property_lists(entity.properties)
    # (alias, folded alias) pairs, deduplicated on the folded form. The Cypher merge drops
    # the one equal to the stored name, so a re-cased name becomes an alias.
    pairs: list[list[str]] = []
    seen: set[str] = set()
    for alias in [*entity.aliases, entity.name]:
        key = fold(alias)
        if key and key not in seen:
            seen.add(key)
            pairs.append([alias, key])
    return {
        "id": entity.id,
        "name": entity.name,
        "name_lower": fold(entity.name),
        "type": entity.type,
        "alias_pairs": pairs,
        "description": entity.description,
        "embedding": embedding,
        "property_keys": keys,
        "property_values": values,
    }


def entity_from_props(props: Mapping[str, Any], *, with_embedding: bool = False) -> Entity:
    embedding = props.get("embedding") if with_embedding else None
    return Entity(
        id=props["id"],
        namespace_id=props["namespace_id"],
        name=props.get("name") or "",
        type=props.get("type") or "CONCEPT",
        aliases=list(props.get("aliases") or []),
        description=props.get("description"),
        embedding=[float(x) for x in embedding] if embedding is not None else None,
        mention_count=int(props.get("mention_count") or 0),
        properties=properties_from_props(props),
    )


def relationship_row(rel: Relationship, namespace_id: str) -> dict[str, Any]:
    if rel.namespace_id != namespace_id:
        raise InvalidInputError(
            f"relationship {rel.id} belongs to namespace {rel.namespace_id!r}, not {namespace_id!r}"
        )
    keys, values = property_lists(rel.properties)
    return {
        "id": rel.id,
        "source_id": rel.source_id,
        "target_id": rel.target_id,
        "property_keys": keys,
        "property_values": values,
        "props": {
            "id": rel.id,
            "namespace_id": namespace_id,
            "type": rel.type,
            "description": rel.description,
            "weight": float(rel.weight),
            "document_id": rel.document_id,
            "chunk_id": rel.chunk_id,
        },
    }


def relationship_from_props(props: Mapping[str, Any], source_id: str, target_id: str) -> Relationship:
    return Relationship(
        id=props["id"],
        namespace_id=props["namespace_id"],
        source_id=source_id,
        target_id=target_id,
        type=props.get("type") or "RELATED_TO",
        description=props.get("description"),
        weight=float(props.get("weight", 1.0)),
        document_id=props.get("document_id") or "",
        chunk_id=props.get("chunk_id"),
        properties=properties_from_props(props),
    )


def entity_ref(row: Sequence[Any]) -> EntityRef | None:
    """An :func:`entity_ref_list` as an ``EntityRef``; None for an entity that a concurrent
    ``forget`` deleted while the statement ran (see :func:`present`)."""
    eid, name, etype, mentions = row
    if eid is None:
        return None
    return EntityRef(eid, name or "", etype or "CONCEPT", int(mentions or 0))


def present(props: Mapping[str, Any] | None) -> bool:
    """True when a node read is whole. A read runs at read-committed isolation, so a node
    a concurrent ``forget`` deleted while the statement ran comes back as an empty map or
    null; reads skip it, as if the delete had come first."""
    return bool(props) and props.get("id") is not None  # type: ignore[union-attr]


def present_edge(row: Mapping[str, Any]) -> bool:
    """:func:`present` for a relationship row (``r``, ``source_id``, ``target_id``)."""
    return present(row.get("r")) and row.get("source_id") is not None and row.get("target_id") is not None


def unique_by_id(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows deduplicated on ``id`` (the last one wins), in first-seen order."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        out[row["id"]] = row
    return list(out.values())
