"""Pure translation between LangGraph store items and Khora documents (no I/O).

* a LangGraph namespace tuple is one Khora namespace, ``<prefix>/<label>/<label>...`` with
  each label percent-encoded (so any label round-trips and ``/`` cannot split one);
* an item is one document: ``external_id`` is the key, ``metadata["value"]`` the value kept
  whole, and the content the text of the indexed fields (LangGraph's ``index`` paths);
* a LangGraph ``filter`` becomes a ``RecallFilter`` over ``metadata.value.<path>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, unquote

from langgraph.store.base import InvalidNamespaceError, get_text_at_path, tokenize_path

from khora_core.errors import InvalidInputError
from khora_core.models import Document, DocumentProjection

__all__ = [
    "ALL_FIELDS",
    "StoreNamespaceError",
    "check_key",
    "check_namespace",
    "check_page",
    "content_for",
    "decode_namespace",
    "encode_namespace",
    "filter_record",
    "item_parts",
    "matches_condition",
    "merge_by_score",
    "to_recall_filter",
]

#: The index path meaning "the whole value, as JSON" (LangGraph's convention).
ALL_FIELDS = "$"
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_SEGMENT = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class StoreNamespaceError(InvalidInputError, InvalidNamespaceError):
    """A LangGraph namespace Khora cannot use: a ``KhoraError`` and LangGraph's
    ``InvalidNamespaceError``, so either ``except`` clause catches it."""


def check_namespace(namespace: Any, *, allow_empty: bool = False) -> tuple[str, ...]:
    """``namespace`` as a tuple of non-empty string labels.

    Raises:
        StoreNamespaceError: not a tuple of non-empty strings (empty only when
            ``allow_empty``, as a search prefix may be).
    """
    if not isinstance(namespace, (tuple, list)):
        raise StoreNamespaceError(f"A namespace is a tuple of strings, got {type(namespace).__name__}")
    labels = tuple(namespace)
    if not labels and not allow_empty:
        raise StoreNamespaceError("A namespace cannot be empty")
    for label in labels:
        if not isinstance(label, str) or not label:
            raise StoreNamespaceError(
                f"Namespace labels must be non-empty strings, got {label!r} in {labels}"
            )
    return labels


def check_key(key: Any) -> str:
    """Raises ``InvalidInputError`` unless ``key`` is a non-empty string."""
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"An item key must be a non-empty string, got {key!r}")
    return key


def check_page(limit: Any, offset: Any) -> tuple[int, int]:
    """Raises ``InvalidInputError`` unless both are non-negative integers."""
    for name, value in (("limit", limit), ("offset", offset)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidInputError(f"{name} must be a non-negative integer, got {value!r}")
    return limit, offset


def encode_namespace(prefix: str, namespace: tuple[str, ...]) -> str:
    """The Khora namespace id of a LangGraph namespace."""
    return "/".join([prefix, *(quote(label, safe="") for label in namespace)])


def decode_namespace(prefix: str, namespace_id: str) -> tuple[str, ...] | None:
    """The LangGraph namespace of a Khora namespace id, or None when not this store's."""
    head = prefix + "/"
    if not namespace_id.startswith(head):
        return None
    return tuple(unquote(label) for label in namespace_id[len(head) :].split("/"))


def content_for(value: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The text Khora embeds for an item: each indexed field's text, one paragraph each.

    ``"$"`` is the whole value as JSON; other paths follow LangGraph's path syntax
    (``"a.b"``, ``"items[*].text"``, ``"{title,body}"``). Empty when no field has text.
    """
    texts: list[str] = []
    for path in fields:
        tokens = path if path == ALL_FIELDS else tokenize_path(path)
        texts.extend(t for t in get_text_at_path(value, tokens) if t.strip())
    return "\n\n".join(texts)


def stored_json(value: Mapping[str, Any]) -> str:
    """A value's canonical JSON (the content of an item with no indexed text)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def item_parts(namespace: tuple[str, ...], doc: Document | DocumentProjection) -> dict[str, Any]:
    """The ``Item`` keyword arguments for a stored document (or recall's projection of it)."""
    meta = doc.metadata
    return {
        "namespace": namespace,
        "key": doc.external_id or doc.id,
        "value": dict(meta.get("value") or {}),
        "created_at": _date(meta.get("created_at"), doc.created_at),
        "updated_at": _date(meta.get("updated_at"), doc.created_at),
    }


def filter_record(doc: Document) -> dict[str, Any]:
    """The record ``RecallFilter.matches`` reads for a document (as ``Chunk.filter_record``)."""
    keys: tuple[str, ...] = ("occurred_at", "created_at", "source_timestamp", "source_type", "source_name")
    keys += ("source_url", "external_id", "content_type", "source", "title")
    return {**{k: getattr(doc, k, None) for k in keys}, "metadata": doc.metadata}


def _date(text: Any, default: datetime) -> datetime:
    if isinstance(text, str):
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return default
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    return default


def to_recall_filter(flt: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A LangGraph ``filter`` as a ``RecallFilter`` dict over ``metadata.value``.

    LangGraph's grammar: ``{field: value}`` (equality; a list is exact list equality; a
    dict without operators matches nested fields) or ``{field: {"$eq"|"$ne"|"$gt"|"$gte"|
    "$lt"|"$lte": value, ...}}``; all pairs must hold.

    Raises:
        InvalidInputError: not a dict, an unknown operator, or a field name outside
            ``A-Z a-z 0-9 _ -`` (1-128 characters, what a Khora metadata path allows).
    """
    if flt is None:
        return None
    if not isinstance(flt, Mapping):
        raise InvalidInputError(f"filter must be a dict, got {type(flt).__name__}")
    leaves: list[dict[str, Any]] = []
    _collect(flt, ("value",), leaves)
    if not leaves:
        return None
    return leaves[0] if len(leaves) == 1 else {"$and": leaves}


def _collect(flt: Mapping[str, Any], path: tuple[str, ...], out: list[dict[str, Any]]) -> None:
    for field, wanted in flt.items():
        if not isinstance(field, str) or not _SEGMENT.match(field):
            raise InvalidInputError(
                f"filter field {field!r} cannot be searched: field names are 1-128 characters of "
                "A-Z a-z 0-9 _ - (nest a dict for a sub-field)"
            )
        key = (*path, field)
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            unknown = sorted(str(k) for k in wanted if k not in _OPERATORS)
            if unknown:
                raise InvalidInputError(
                    f"filter operators {unknown} are not supported; use {sorted(_OPERATORS)}"
                )
            out.append({"metadata." + ".".join(key): dict(wanted)})
        elif isinstance(wanted, Mapping):
            _collect(wanted, key, out)
        else:
            # A scalar is equality, a list exact list equality, None null-or-missing.
            out.append({"metadata." + ".".join(key): list(wanted) if isinstance(wanted, tuple) else wanted})


def matches_condition(namespace: tuple[str, ...], kind: str, path: Sequence[str]) -> bool:
    """Whether ``namespace`` starts (``"prefix"``) or ends (``"suffix"``) with ``path``;
    ``"*"`` in ``path`` matches any label."""
    if len(namespace) < len(path):
        return False
    if kind not in ("prefix", "suffix"):
        raise InvalidInputError(f"Unknown namespace match type {kind!r}; use 'prefix' or 'suffix'")
    if kind == "prefix":
        pairs = zip(namespace[: len(path)], path, strict=True)
    else:
        pairs = zip(namespace[len(namespace) - len(path) :], path, strict=True)
    return all(p == "*" or n == p for n, p in pairs)


def merge_by_score(ranked: Sequence[Sequence[Any]]) -> list[Any]:
    """Merge ranked lists, keeping each list's order: at each step the head with the
    highest ``score`` goes next (``None`` lowest; ties go to the earlier list)."""
    heads = [0] * len(ranked)
    out: list[Any] = []
    while True:
        best = -1
        for i, items in enumerate(ranked):
            if heads[i] < len(items) and (
                best < 0 or _score(items[heads[i]]) > _score(ranked[best][heads[best]])
            ):
                best = i
        if best < 0:
            return out
        out.append(ranked[best][heads[best]])
        heads[best] += 1


def _score(item: Any) -> float:
    return float("-inf") if item.score is None else float(item.score)
