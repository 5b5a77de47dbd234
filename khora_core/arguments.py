"""The argument checks of ``Khora`` and ``KhoraSync``, and their deprecated keyword alias.

Every check raises ``InvalidInputError`` naming the argument before anything is read or
written; :func:`namespace_alias` lets a method take ``namespace=`` by its older name
``namespace_id=`` too.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, TypeVar

from khora_core.config import KhoraConfig, VectorCypherConfig
from khora_core.errors import InvalidInputError
from khora_core.models import SearchMode

__all__ = [
    "MAX_LIMIT",
    "MAX_OFFSET",
    "aware",
    "check_count",
    "check_date",
    "check_metadata",
    "check_namespace_id",
    "check_similarity",
    "check_text",
    "deprecated_window",
    "namespace_alias",
    "recall_arguments",
    "resolved_config",
    "search_mode",
    "short",
]

#: The most results one read may ask for (``limit`` of recall and the entity reads).
MAX_LIMIT = 10_000
#: The largest ``offset`` of ``list_entities`` (the databases' 32-bit signed range).
MAX_OFFSET = 2**31 - 1

_F = TypeVar("_F", bound=Callable[..., Any])


def namespace_alias(method: _F) -> _F:
    """Let ``method`` also take its ``namespace=`` argument by the deprecated ``namespace_id=``.

    ``namespace=`` is the one name of the namespace argument across ``Khora`` and
    ``KhoraSync``; ``namespace_id=`` still works and warns with a ``DeprecationWarning``.
    Passing both raises ``InvalidInputError``.
    """
    where = method.__qualname__

    def renamed(kwargs: dict[str, Any]) -> dict[str, Any]:
        if "namespace_id" not in kwargs:
            return kwargs
        if "namespace" in kwargs:
            raise InvalidInputError(
                f"{where}() got both namespace= and its deprecated alias namespace_id=; pass namespace= only"
            )
        # 1: here, 2: the wrapper below, 3: the caller.
        warnings.warn(
            f"{where}(namespace_id=...) is deprecated; pass namespace=... instead",
            DeprecationWarning,
            stacklevel=3,
        )
        kwargs = dict(kwargs)
        kwargs["namespace"] = kwargs.pop("namespace_id")
        return kwargs

    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            return await method(*args, **renamed(kwargs))

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **renamed(kwargs))

    return wrapper  # type: ignore[return-value]


def aware(value: datetime | None) -> datetime | None:
    """``value`` as an aware UTC datetime (a naive one is taken to be UTC already)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInputError(f"expected a datetime, got {type(value).__name__}")
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def check_namespace_id(namespace: str) -> None:
    """``namespace`` must be a non-empty string of at most 200 characters, valid text."""
    if not isinstance(namespace, str) or not namespace or len(namespace) > 200:
        raise InvalidInputError(
            f"namespace must be a non-empty string of at most 200 characters, got {short(namespace)}"
        )
    check_text(namespace, "the namespace id")


def short(value: Any) -> str:
    """``repr(value)``, cut to 60 characters for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_text(value: str, what: str) -> None:
    """``value`` must be valid Unicode without NUL characters (``ingest.inputs.check_text``)."""
    from khora_core.ingest.inputs import check_text as check

    check(value, what)


def resolved_config(
    config: KhoraConfig, *, url: str | None, data_dir: str | None, vectorcypher: Any = None
) -> KhoraConfig:
    """The config ``Khora`` opens with: ``config`` with the constructor's ``url`` and
    ``data_dir`` laid over its storage section (an explicit data folder without a URL means
    the embedded store, whatever ``KHORA_DATABASE_URL`` says) and, from ``engine_kwargs``,
    a ``vectorcypher_config`` (a ``VectorCypherConfig`` or a mapping of its fields)."""
    storage: dict[str, Any] = {}
    if url is not None:
        storage["database_url"] = url
    if data_dir is not None:
        storage["data_dir"] = data_dir
        if url is None:
            storage["database_url"] = None
    if storage:
        config = config.model_copy(update={"storage": config.storage.model_copy(update=storage)})
    if vectorcypher is not None:
        if not isinstance(vectorcypher, VectorCypherConfig):
            vectorcypher = VectorCypherConfig(**dict(vectorcypher))
        config = config.model_copy(update={"vectorcypher": vectorcypher})
    return config


def recall_arguments(
    query: Any,
    namespace: str,
    limit: Any,
    min_similarity: Any,
    mode: SearchMode | str,
    filter: Any,
    start_time: datetime | None,
    end_time: datetime | None,
    now: datetime | None,
) -> tuple[SearchMode, Any, tuple[datetime | None, datetime | None] | None]:
    """``recall``'s arguments checked: its mode, parsed filter and deprecated time window."""
    from khora_core.filters import RecallFilter

    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("recall() needs a non-empty query string")
    check_text(query, "the recall query")
    check_namespace_id(namespace)
    check_count("limit", limit, 1)
    check_similarity(min_similarity)
    parsed = RecallFilter.parse(filter) if filter is not None else None
    window = deprecated_window(start_time, end_time, with_filter=parsed is not None)
    if now is not None:
        check_date("now", now)
    return search_mode(mode), parsed, window


def check_metadata(value: Any) -> dict[str, Any]:
    """``value`` as stored metadata (``ingest.inputs.json_metadata``); typed error otherwise."""
    from khora_core.ingest.inputs import json_metadata

    return json_metadata(value)


def check_count(name: str, value: Any, minimum: int, maximum: int = MAX_LIMIT) -> None:
    """``value`` must be an int from ``minimum`` to ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{name} must be an integer, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidInputError(f"{name} must be between {minimum} and {maximum:,}, got {value}")


def check_date(name: str, value: datetime) -> None:
    """``value`` must be a datetime within the dates every stack stores."""
    from khora_core.ingest.inputs import MAX_DATE, MIN_DATE

    try:
        when = aware(value)
    except OverflowError:  # an offset that moves the value out of the calendar
        when = None
    if when is None or not MIN_DATE <= when <= MAX_DATE:
        raise InvalidInputError(
            f"{name}={value!r} is out of the supported date range "
            f"{MIN_DATE.date().isoformat()} to {MAX_DATE.date().isoformat()}"
        )


def check_similarity(min_similarity: Any) -> None:
    """``min_similarity`` must be a number from -1 to 1 (a raw cosine)."""
    if (
        isinstance(min_similarity, bool)
        or not isinstance(min_similarity, (int, float))
        or math.isnan(min_similarity)
        or not -1.0 <= min_similarity <= 1.0
    ):
        raise InvalidInputError(f"min_similarity must be a number from -1 to 1, got {short(min_similarity)}")


def search_mode(mode: SearchMode | str) -> SearchMode:
    """``mode`` as a ``SearchMode`` (its value as a string works too)."""
    try:
        return SearchMode(mode)
    except ValueError as exc:
        raise InvalidInputError(f"Unknown mode {mode!r}; use one of {[m.value for m in SearchMode]}") from exc


def deprecated_window(
    start_time: datetime | None, end_time: datetime | None, *, with_filter: bool
) -> tuple[datetime | None, datetime | None] | None:
    """``recall``'s deprecated ``start_time``/``end_time`` as an aware UTC window (None: none).

    Warns with a ``DeprecationWarning`` at ``recall``'s caller; refuses the pair next to a
    ``filter=``.
    """
    if start_time is None and end_time is None:
        return None
    if with_filter:
        raise InvalidInputError(
            "recall(): filter= cannot be combined with the deprecated start_time/end_time; "
            'use filter={"occurred_at": {"$gte": start, "$lt": end}} instead'
        )
    warnings.warn(
        "recall(start_time=, end_time=) is deprecated: it windows COALESCE(source_timestamp, "
        'created_at). Use filter={"occurred_at": {"$gte": ..., "$lt": ...}} instead.',
        DeprecationWarning,
        stacklevel=5,  # 1: here, 2: recall_arguments, 3: Khora.recall, 4: the namespace-alias wrapper, 5: the caller
    )
    for name, value in (("start_time", start_time), ("end_time", end_time)):
        if value is not None:
            check_date(name, value)
    return aware(start_time), aware(end_time)
