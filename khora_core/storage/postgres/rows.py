"""Rows <-> models for the PostgreSQL store: column lists, JSON metadata, embeddings."""

from __future__ import annotations

import json
import math
import re
import uuid
from datetime import date, datetime
from typing import Any

import asyncpg
import numpy as np

from khora_core.errors import InvalidInputError
from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS, Chunk, Document, Namespace

__all__ = [
    "CHUNK_COLUMNS",
    "CHUNK_INSERT",
    "DOCUMENT_COLUMNS",
    "DOCUMENT_INSERT",
    "chunk_from_row",
    "chunk_insert_args",
    "document_from_row",
    "document_insert_args",
    "dump_json",
    "namespace_from_row",
    "vector_array",
]

_SYSTEM = (*SYSTEM_DATE_KEYS, *SYSTEM_STRING_KEYS)

#: Chunk columns in SELECT order, qualified with the alias ``c`` the filter compiler uses.
CHUNK_COLUMNS = ", ".join(
    f"c.{col}"
    for col in (
        "namespace_id",
        "id",
        "document_id",
        "idx",
        "content",
        "start_char",
        "end_char",
        "token_count",
        "embedding",
        "needs_extraction",
        "is_core",
        *_SYSTEM,
        "metadata",
        "tags",
        "context",
    )
)
DOCUMENT_COLUMNS = ", ".join(
    f"d.{col}" for col in ("namespace_id", "id", "content", "content_hash", *_SYSTEM, "metadata", "tags")
)

_CHUNK_INSERT_COLS = (
    "namespace_id",
    "id",
    "document_id",
    "idx",
    "content",
    "start_char",
    "end_char",
    "token_count",
    "term_count",
    "embedding",
    "needs_extraction",
    "is_core",
    *_SYSTEM,
    "metadata",
    "tags",
    "context",
)
_DOC_INSERT_COLS = ("namespace_id", "id", "content", "content_hash", *_SYSTEM, "metadata", "tags")


def _insert(table: str, cols: tuple[str, ...]) -> str:
    values = ", ".join(f"${i}::jsonb" if c == "metadata" else f"${i}" for i, c in enumerate(cols, 1))
    return f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({values})"


CHUNK_INSERT = _insert("khora_chunks", _CHUNK_INSERT_COLS)
DOCUMENT_INSERT = _insert("khora_documents", _DOC_INSERT_COLS)


def _json_default(value: Any) -> Any:
    # Datetimes inside user metadata are stored as ISO-8601 strings (a shared convention).
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"metadata value of type {type(value).__name__} is not JSON")


def dump_json(value: dict[str, Any]) -> str:
    """Metadata as JSON text for a ``jsonb`` parameter, read back with the same types and
    values (``_load_json``): a float stays a float, an int an int.

    Python writes a float of magnitude 1e16 or more in exponent form ("1e+16"); ``jsonb``
    keeps numbers as exact decimals and gives that one back as "10000000000000000", which
    reads as an int. Such a float is written as "10000000000000000.0" instead: it goes
    through ``json.dumps`` as a placeholder string (a random nonce keeps user text from
    matching) that is replaced by its plain decimal form afterwards.

    Raises:
        InvalidInputError: a value cannot be represented in JSON.
    """
    plain: list[str] = []
    nonce = ""

    def swap(v: Any) -> Any:
        nonlocal nonce
        if isinstance(v, float) and math.isfinite(v) and v.is_integer() and "e" in repr(v):
            nonce = nonce or uuid.uuid4().hex
            plain.append(f"{int(v)}.0")
            return f"{nonce}:{len(plain) - 1}"
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [swap(x) for x in v]
        return v

    try:
        text = json.dumps(swap(value), default=_json_default, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"metadata must be JSON-serialisable: {exc}") from exc
    if not plain:
        return text
    return re.sub(f'"{nonce}:(\\d+)"', lambda m: plain[int(m.group(1))], text)


def _load_json(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    return json.loads(value) if isinstance(value, str) else dict(value)


def vector_array(value: Any) -> np.ndarray:
    """A ``vector`` column as a float32 array, whatever pgvector's asyncpg codec returned:
    a ``numpy`` array (pgvector 0.3 and 0.4) or a ``pgvector.Vector`` (0.5 and later)."""
    to_numpy = getattr(value, "to_numpy", None)
    if callable(to_numpy):
        value = to_numpy()
    return np.asarray(value, dtype=np.float32)


def _embedding(value: Any) -> list[float] | None:
    if value is None:
        return None
    return vector_array(value).astype(float).tolist()


def _system(row: asyncpg.Record) -> dict[str, Any]:
    out = {k: row[k] for k in _SYSTEM}
    out["content_type"] = out["content_type"] or "text/plain"
    out["metadata"] = _load_json(row["metadata"])
    out["tags"] = list(row["tags"] or [])
    return out


def chunk_from_row(row: asyncpg.Record) -> Chunk:
    return Chunk(
        id=row["id"],
        namespace_id=row["namespace_id"],
        document_id=row["document_id"],
        index=row["idx"],
        content=row["content"],
        start_char=row["start_char"],
        end_char=row["end_char"],
        token_count=row["token_count"],
        embedding=_embedding(row["embedding"]),
        needs_extraction=row["needs_extraction"],
        is_core=row["is_core"],
        context=row["context"],
        **_system(row),
    )


def document_from_row(row: asyncpg.Record) -> Document:
    return Document(
        id=row["id"],
        namespace_id=row["namespace_id"],
        content=row["content"],
        content_hash=row["content_hash"],
        **_system(row),
    )


def namespace_from_row(row: asyncpg.Record) -> Namespace:
    return Namespace(
        namespace_id=row["namespace_id"],
        name=row["name"],
        created_at=row["created_at"],
        metadata=_load_json(row["metadata"]),
    )


def _system_args(rec: Chunk | Document) -> tuple[Any, ...]:
    return (*(getattr(rec, k) for k in _SYSTEM), dump_json(rec.metadata), list(rec.tags))


def chunk_insert_args(namespace_id: str, chunk: Chunk, term_count: int) -> tuple[Any, ...]:
    """Arguments for ``CHUNK_INSERT``; the namespace is the caller's, never the record's."""
    embedding = None if chunk.embedding is None else np.asarray(chunk.embedding, dtype=np.float32)
    return (
        namespace_id,
        chunk.id,
        chunk.document_id,
        chunk.index,
        chunk.content,
        chunk.start_char,
        chunk.end_char,
        chunk.token_count,
        term_count,
        embedding,
        chunk.needs_extraction,
        chunk.is_core,
        *_system_args(chunk),
        chunk.context,
    )


def document_insert_args(namespace_id: str, doc: Document) -> tuple[Any, ...]:
    """Arguments for ``DOCUMENT_INSERT``."""
    return (namespace_id, doc.id, doc.content, doc.content_hash, *_system_args(doc))
