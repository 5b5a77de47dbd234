"""Validation and normalisation of what ``remember`` receives.

Rules (all violations raise ``InvalidInputError`` or a subclass, before anything is stored):

* ``content`` must be a non-blank string no longer than ``IngestConfig.max_content_chars``
  (``ContentTooLargeError``);
* ``content_type`` is ``text/plain`` (also None, ``"text"``, ``"plain"``, ``"txt"``) or
  ``text/markdown`` (also ``"markdown"``, ``"md"``, ``"text/x-markdown"``); parameters such as
  ``; charset=utf-8`` are ignored; anything else is ``UnsupportedContentError``;
* dates (``occurred_at``, ``source_timestamp``) may be datetimes, dates, ISO-8601 strings
  (``Z`` allowed) or epoch seconds; they become timezone-aware UTC, and a *naive* datetime
  is taken to be UTC already;
* ``occurred_at`` may also come from ``metadata["occurred_at"]`` (the keyword wins). The
  value stays in ``metadata`` too (as an ISO string), so the caller's metadata comes back as
  given and both ``occurred_at`` and ``metadata.occurred_at`` can be filtered on;
* metadata must be JSON: string keys; datetimes and dates become ISO strings, tuples and
  sets lists, UUIDs and paths strings; NaN/infinity and other objects are refused, and so
  is metadata nested deeper than :data:`MAX_METADATA_DEPTH` or holding itself;
* ``tags`` is a list of strings (duplicates dropped, order kept);
* every string (content, the string fields, tags, metadata keys and values) must be valid
  Unicode without NUL characters (:func:`check_text`): a lone surrogate cannot be encoded
  as UTF-8 and PostgreSQL cannot store NUL, so both are refused on every stack alike;
* dates must lie between :data:`MIN_DATE` and :data:`MAX_DATE`, which every stack stores
  as they are and date arithmetic can move a little in either direction;
* ``dedup`` is a bool (True by default). ``dedup=False`` keys the document by its
  ``external_id`` instead of its content, so it needs one: identical content under two
  external ids is then two documents (what a vector store keyed by id expects), see
  :func:`khora_core.ingest.dedup.item_document_id`.
* ``extract`` is a bool (True by default). ``extract=False`` stores the document without
  running the entity extractor on it: its entities and relations come from the caller
  (LlamaIndex's ``PropertyGraphIndex`` extracts its own and writes them to the graph).
"""

from __future__ import annotations

import enum
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import PurePath
from typing import Any

from khora_core.config import IngestConfig
from khora_core.errors import ContentTooLargeError, InvalidInputError, UnsupportedContentError

__all__ = [
    "MAX_DATE",
    "MAX_METADATA_DEPTH",
    "MIN_DATE",
    "REMEMBER_FIELDS",
    "RememberInput",
    "check_text",
    "json_metadata",
    "normalise_content_type",
    "prepare_input",
    "to_utc",
]

_PLAIN = {"text/plain", "text", "plain", "txt", "text/txt"}
_MARKDOWN = {"text/markdown", "markdown", "md", "text/x-markdown", "text/md"}
#: How deep metadata may nest (a mapping or list inside another counts one level).
MAX_METADATA_DEPTH = 32
#: The earliest and latest dates accepted: a year inside them on either side, so that
#: PostgreSQL never stores them as -infinity/infinity and "a year before" stays a date.
MIN_DATE = datetime(2, 1, 1, tzinfo=timezone.utc)
MAX_DATE = datetime(9998, 12, 31, 23, 59, 59, tzinfo=timezone.utc)

_STRING_FIELDS = ("title", "context", "source_type", "source_name", "source_url", "external_id", "source")

#: The keys a ``remember_batch`` item may carry (the keywords of ``remember``).
REMEMBER_FIELDS = frozenset(
    {
        "content",
        "title",
        "context",
        "metadata",
        "entity_types",
        "relationship_types",
        "occurred_at",
        "source_type",
        "source_name",
        "source_url",
        "external_id",
        "content_type",
        "source_timestamp",
        "tags",
        "source",
        "dedup",
        "extract",
    }
)


@dataclass
class RememberInput:
    """One validated ``remember`` call."""

    content: str
    content_type: str
    title: str | None = None
    #: Text that situates the content (the message it replies to, the section it sits in):
    #: searched by keyword with every chunk, neither embedded nor returned.
    context: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    entity_types: list[str] | None = None
    relationship_types: list[str] | None = None
    occurred_at: datetime | None = None
    source_timestamp: datetime | None = None
    source_type: str | None = None
    source_name: str | None = None
    source_url: str | None = None
    external_id: str | None = None
    source: str | None = None
    tags: list[str] = field(default_factory=list)
    #: False: the document is keyed by ``external_id``, not by its content (no content dedup).
    dedup: bool = True
    #: False: the extractor does not run; the caller writes the document's graph itself.
    extract: bool = True


def normalise_content_type(value: str | None) -> str:
    """``text/plain`` or ``text/markdown`` for the accepted spellings.

    Raises:
        UnsupportedContentError: any other content type.
    """
    if value is None:
        return "text/plain"
    if not isinstance(value, str):
        raise UnsupportedContentError(f"content_type must be a string, got {type(value).__name__}")
    base = value.split(";", 1)[0].strip().lower()
    if base in _PLAIN:
        return "text/plain"
    if base in _MARKDOWN:
        return "text/markdown"
    raise UnsupportedContentError(
        f"Unsupported content_type {value!r}: Khora ingests text/plain and text/markdown. "
        "Convert other formats (PDF, HTML, ...) to text first."
    )


def to_utc(value: Any, field_name: str) -> datetime | None:
    """A timezone-aware UTC datetime (naive values are taken as UTC).

    Raises:
        InvalidInputError: the value is not a date, datetime, ISO-8601 string or epoch number.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            dt = datetime.fromtimestamp(float(value), tz=timezone.utc)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidInputError(f"{field_name}={value!r} is not a valid epoch timestamp") from exc
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError as exc:
            raise InvalidInputError(
                f"{field_name}={value!r} is not an ISO-8601 date (for example '2024-01-15T10:00:00Z')"
            ) from exc
    else:
        raise InvalidInputError(
            f"{field_name} must be a datetime or an ISO-8601 string, got {type(value).__name__}"
        )
    try:
        aware = dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)
    except OverflowError as exc:  # an offset that moves year 1 or 9999 out of range
        raise InvalidInputError(f"{field_name}={value!r} is out of the supported date range") from exc
    if not MIN_DATE <= aware <= MAX_DATE:
        raise InvalidInputError(
            f"{field_name}={value!r} is out of the supported date range "
            f"{MIN_DATE.date().isoformat()} to {MAX_DATE.date().isoformat()}"
        )
    return aware


def check_text(value: str, what: str) -> str:
    """``value`` unchanged when it is valid Unicode without NUL characters.

    Raises:
        InvalidInputError: a lone surrogate (not encodable as UTF-8) or a NUL character.
    """
    if "\x00" in value:
        raise InvalidInputError(f"{what} contains a NUL character (\\x00), which Khora does not store")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{what} is not valid Unicode: a lone surrogate at position {exc.start}"
        ) from exc
    return value


def json_metadata(value: Any) -> dict[str, Any]:
    """``value`` (a mapping) as the JSON tree Khora stores as metadata.

    Raises:
        InvalidInputError: not a mapping, or a key or value that JSON cannot hold or Khora
            does not store (NUL characters, lone surrogates, NaN, cycles, deep nesting).
    """
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"metadata must be a mapping, got {type(value).__name__}")
    return dict(_json_value(value, ""))


def _json_value(value: Any, path: str, parents: tuple[int, ...] = ()) -> Any:
    """``value`` as JSON; ``parents``: ids of the containers around it (depth and cycles)."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return check_text(value, f"metadata{path}")
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise InvalidInputError(f"metadata{path} is {value}: NaN and infinity are not JSON")
        return value
    if isinstance(value, datetime):
        return to_utc(value, f"metadata{path}").isoformat()  # type: ignore[union-attr]
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return _json_value(value.value, path, parents)
    if isinstance(value, (uuid.UUID, PurePath)):
        return check_text(str(value), f"metadata{path}")
    if isinstance(value, (Mapping, list, tuple, set, frozenset)):
        if id(value) in parents:
            raise InvalidInputError(f"metadata{path} contains itself; metadata must be a tree")
        if len(parents) >= MAX_METADATA_DEPTH:
            raise InvalidInputError(f"metadata{path} is nested more than {MAX_METADATA_DEPTH} levels deep")
        inner = (*parents, id(value))
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(
                    f"metadata{path} has a non-string key {key!r}; metadata keys must be strings"
                )
            check_text(key, f"a metadata key in metadata{path}")
            out[key] = _json_value(item, f"{path}.{key}", inner)
        return out
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{path}[{i}]", inner) for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        return sorted((_json_value(v, f"{path}[]", inner) for v in value), key=repr)
    raise InvalidInputError(f"metadata{path} holds a {type(value).__name__}, which is not JSON")


def _types(value: Any, name: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidInputError(f"{name} must be a list of strings, e.g. ['PERSON', 'ORGANIZATION']")
    out = [check_text(str(v).strip(), name) for v in value if str(v).strip()]
    return out or None


def prepare_input(config: IngestConfig, **kwargs: Any) -> RememberInput:
    """Validate one ``remember`` call's arguments (see the module docstring).

    Raises:
        InvalidInputError: a bad or unknown argument.
        ContentTooLargeError: content over ``IngestConfig.max_content_chars``.
        UnsupportedContentError: a content type other than text or Markdown.
    """
    unknown = set(kwargs) - REMEMBER_FIELDS
    if unknown:
        raise InvalidInputError(
            f"Unknown remember() field(s) {sorted(unknown)}; allowed: {sorted(REMEMBER_FIELDS)}"
        )
    content = kwargs.get("content")
    if not isinstance(content, str):
        raise InvalidInputError(f"content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise InvalidInputError("content is empty; there is nothing to remember")
    if len(content) > config.max_content_chars:
        raise ContentTooLargeError(
            f"content has {len(content):,} characters, over the limit of {config.max_content_chars:,}. "
            "Split it into several documents or raise KHORA_INGEST_MAX_CONTENT_CHARS."
        )
    check_text(content, "content")
    content_type = normalise_content_type(kwargs.get("content_type"))
    raw_meta = kwargs.get("metadata") or {}
    metadata = json_metadata(raw_meta)
    occurred_at = to_utc(kwargs.get("occurred_at"), "occurred_at")
    if occurred_at is None and raw_meta.get("occurred_at") is not None:
        occurred_at = to_utc(raw_meta["occurred_at"], "metadata['occurred_at']")
    tags = kwargs.get("tags") or []
    if isinstance(tags, str) or not isinstance(tags, Sequence) or not all(isinstance(t, str) for t in tags):
        raise InvalidInputError("tags must be a list of strings")
    for tag in tags:
        check_text(tag, "a tag")
    strings: dict[str, str | None] = {}
    for name in _STRING_FIELDS:
        value = kwargs.get(name)
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
        strings[name] = None if value is None else check_text(value, name)
    context = strings["context"] = (strings["context"] or "").strip() or None  # blank: none
    if context is not None and len(context) > config.max_content_chars:
        raise ContentTooLargeError(
            f"context has {len(context):,} characters, over the limit of "
            f"{config.max_content_chars:,} (KHORA_INGEST_MAX_CONTENT_CHARS)."
        )
    dedup = kwargs.get("dedup", True)
    if not isinstance(dedup, bool):
        raise InvalidInputError(f"dedup must be True or False, got {dedup!r}")
    if not dedup and not strings["external_id"]:
        raise InvalidInputError(
            "dedup=False keys the document by its external_id: pass external_id (a non-empty string)"
        )
    extract = kwargs.get("extract", True)
    if not isinstance(extract, bool):
        raise InvalidInputError(f"extract must be True or False, got {extract!r}")
    return RememberInput(
        content=content,
        content_type=content_type,
        metadata=metadata,
        entity_types=_types(kwargs.get("entity_types"), "entity_types"),
        relationship_types=_types(kwargs.get("relationship_types"), "relationship_types"),
        occurred_at=occurred_at,
        source_timestamp=to_utc(kwargs.get("source_timestamp"), "source_timestamp"),
        tags=list(dict.fromkeys(t.strip() for t in tags if t.strip())),
        dedup=dedup,
        extract=extract,
        **strings,
    )
