"""Khora's error hierarchy.

Every error Khora raises descends from :class:`KhoraError`. Branches follow what the
caller can do about it::

    KhoraError
    ├── ConfigError                     fix a setting (the message names it)
    │   └── MissingExtraError           pip install the named extra  (also ImportError)
    ├── InvalidInputError               fix the arguments of the call (also ValueError)
    │   ├── ContentTooLargeError
    │   └── UnsupportedContentError
    ├── NamespaceNotFoundError          create the namespace first    (also LookupError)
    ├── NotFoundError                   the document / entity id is unknown (also LookupError)
    ├── RecallFilterValidationError     fix the filter; ``.errors`` is structured (also ValueError)
    ├── RecallFilterUnsupportedError    the backend cannot enforce a predicate
    ├── StorageError                    a backend failed
    │   └── StorageUnavailableError     the server is unreachable; retry later
    ├── PartialWriteError               some documents of a write were stored; ``.stored`` / ``.failed``
    ├── ExtractionError                 the LLM extraction failed; the chunk is kept and flagged
    ├── LLMError                        an LLM call failed
    │   └── RetryableError              transient; safe to retry
    │       └── RateLimitError
    └── KhoraAbstention                 raised by the integrations' ``abstain="raise"`` policy
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "ContentTooLargeError",
    "ExtractionError",
    "FilterErrorDetail",
    "InvalidInputError",
    "KhoraAbstention",
    "KhoraError",
    "LLMError",
    "MissingExtraError",
    "NamespaceNotFoundError",
    "NotFoundError",
    "PartialWriteError",
    "RateLimitError",
    "RecallFilterUnsupportedError",
    "RecallFilterValidationError",
    "RetryableError",
    "StorageError",
    "StorageUnavailableError",
    "UnsupportedContentError",
]


class KhoraError(Exception):
    """Root of every error Khora raises."""


class ConfigError(KhoraError):
    """A setting is missing or wrong. The message names the setting to fix."""

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class MissingExtraError(ConfigError, ImportError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, feature: str, extra: str, package: str) -> None:
        super().__init__(
            f"{feature} needs the optional dependency {package!r}. "
            f"Install it with: pip install 'khora-memory[{extra}]'",
            setting=extra,
        )
        self.extra = extra
        self.package = package


class InvalidInputError(KhoraError, ValueError):
    """An argument of the call is invalid; nothing was stored or searched."""


class ContentTooLargeError(InvalidInputError):
    """The content is larger than ``KhoraConfig.ingest.max_content_chars``."""


class UnsupportedContentError(InvalidInputError):
    """The content type is not one Khora can ingest (text and Markdown are)."""


class NamespaceNotFoundError(KhoraError, LookupError):
    """The namespace does not exist. Create it with ``Khora.create_namespace``."""


class NotFoundError(KhoraError, LookupError):
    """A document or entity id is unknown in this namespace."""


class FilterErrorDetail(dict):
    """One problem in a recall filter: ``{"path": ..., "code": ..., "message": ...}``."""


class RecallFilterValidationError(KhoraError, ValueError):
    """The recall filter is malformed.

    Attributes:
        errors: a list of ``{"path": str, "code": str, "message": str}`` dicts, one per
            problem, where ``path`` locates the problem inside the filter (for example
            ``"$and[1].metadata.tier"``). Suitable for an HTTP 400 body.
    """

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self.errors = [dict(e) for e in errors]
        summary = "; ".join(f"{e.get('path') or '<root>'}: {e.get('message')}" for e in self.errors[:5])
        more = f" (and {len(self.errors) - 5} more)" if len(self.errors) > 5 else ""
        super().__init__(f"Invalid recall filter: {summary}{more}")


class RecallFilterUnsupportedError(KhoraError):
    """A backend cannot honour a predicate on a key it does not back with a real column."""

    def __init__(self, message: str, *, key: str | None = None, backend: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.backend = backend


class StorageError(KhoraError):
    """A storage backend failed."""


class StorageUnavailableError(StorageError):
    """A storage server cannot be reached. The next call reconnects."""

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class PartialWriteError(KhoraError):
    """A write of several documents stored some of them and not the others.

    Raised by the vector-store adapters, whose ``add_*`` methods return only ids; the
    items are validated before anything is written, so this happens only when the store
    fails part-way (an unreachable server, a concurrent delete of the namespace).

    Attributes:
        stored: ``{input index: id}`` of the items that were stored.
        failed: ``{input index: KhoraError}`` of the items that were not.
    """

    def __init__(self, message: str, *, stored: dict[int, str], failed: dict[int, KhoraError]) -> None:
        super().__init__(message)
        self.stored = dict(stored)
        self.failed = dict(failed)


class ExtractionError(KhoraError):
    """Entity extraction failed for a chunk. The chunk is stored and flagged for re-extraction."""


class LLMError(KhoraError):
    """An LLM call failed."""


class RetryableError(LLMError):
    """A transient LLM failure (timeout, 5xx, connection reset); safe to retry."""


class RateLimitError(RetryableError):
    """The LLM provider rate-limited the call."""


class KhoraAbstention(KhoraError):
    """Raised by a retriever with ``abstain="raise"`` when recall says it should abstain.

    Attributes:
        signals: the ``abstention_signals`` dict from ``RecallResult.engine_info``.
        query: the question that was asked.
    """

    def __init__(self, query: str, signals: dict[str, Any]) -> None:
        super().__init__(
            f"Khora abstained on {query!r}: memory does not cover it "
            f"(combined_score={signals.get('combined_score')})."
        )
        self.query = query
        self.signals = dict(signals)
