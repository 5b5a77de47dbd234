"""Khora: a hybrid memory engine for LLM applications.

``remember`` what you are told, ``recall`` it with vector + graph + BM25 retrieval fused by
RRF, ``forget`` on request. Start with ``Khora`` (async) or ``KhoraSync``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from khora_core.client import Khora
from khora_core.config import (
    EmbeddingConfig,
    IngestConfig,
    KhoraConfig,
    LLMConfig,
    QueryConfig,
    StorageConfig,
    VectorCypherConfig,
)
from khora_core.errors import (
    ConfigError,
    ContentTooLargeError,
    ExtractionError,
    InvalidInputError,
    KhoraAbstention,
    KhoraError,
    LLMError,
    MissingExtraError,
    NamespaceNotFoundError,
    NotFoundError,
    RateLimitError,
    RecallFilterUnsupportedError,
    RecallFilterValidationError,
    RetryableError,
    StorageError,
    StorageUnavailableError,
    UnsupportedContentError,
)
from khora_core.models import (
    DocumentProjection,
    EntityProjection,
    Namespace,
    NamespaceStats,
    RecallChunk,
    RecallResult,
    RelationshipProjection,
    RememberResult,
    RepairReport,
    SearchMode,
)
from khora_core.sync_client import KhoraSync

if TYPE_CHECKING:
    from khora_core.filters import FilterPushdownReport, RecallFilter
    from khora_core.retrieval.context import context_text

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "ContentTooLargeError",
    "DocumentProjection",
    "EmbeddingConfig",
    "EntityProjection",
    "ExtractionError",
    "FilterPushdownReport",
    "IngestConfig",
    "InvalidInputError",
    "Khora",
    "KhoraAbstention",
    "KhoraConfig",
    "KhoraError",
    "KhoraSync",
    "LLMConfig",
    "LLMError",
    "MissingExtraError",
    "Namespace",
    "NamespaceNotFoundError",
    "NamespaceStats",
    "NotFoundError",
    "QueryConfig",
    "RateLimitError",
    "RecallChunk",
    "RecallFilter",
    "RecallFilterUnsupportedError",
    "RecallFilterValidationError",
    "RecallResult",
    "RelationshipProjection",
    "RememberResult",
    "RepairReport",
    "RetryableError",
    "SearchMode",
    "StorageConfig",
    "StorageError",
    "StorageUnavailableError",
    "UnsupportedContentError",
    "VectorCypherConfig",
    "__version__",
    "context_text",
]

_LAZY = {
    "RecallFilter": "khora_core.filters",
    "FilterPushdownReport": "khora_core.filters",
    "context_text": "khora_core.retrieval.context",
}


def __getattr__(name: str) -> Any:
    # Filters and the read path import numpy-heavy modules; load them on first use.
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'khora_core' has no attribute {name!r}")
