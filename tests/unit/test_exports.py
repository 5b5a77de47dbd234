"""The public surface: every name in ``__all__`` exists, and nothing public is missing."""

from __future__ import annotations

import importlib

import pytest

import khora_core

PACKAGES = [
    "khora_core",
    "khora_core.filters",
    "khora_core.errors",
    "khora_core.models",
    "khora_core.config",
    "khora_integrations.langchain",
    "khora_integrations.llama_index",
    "khora_integrations.langgraph",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_resolve(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported, f"{name} must declare __all__"
    assert len(exported) == len(set(exported)), f"{name}.__all__ has duplicates"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names missing attributes: {missing}"


def test_core_surface_names_the_spec_requires() -> None:
    required = {
        "Khora",
        "KhoraSync",
        "KhoraConfig",
        "VectorCypherConfig",
        "SearchMode",
        "RecallResult",
        "RecallChunk",
        "EntityProjection",
        "RelationshipProjection",
        "DocumentProjection",
        "Namespace",
        "RememberResult",
        "RecallFilter",
        "FilterPushdownReport",
        "context_text",
        "KhoraError",
        "NamespaceNotFoundError",
        "StorageUnavailableError",
        "RecallFilterValidationError",
        "RecallFilterUnsupportedError",
        "ExtractionError",
    }
    assert required <= set(khora_core.__all__)


def test_every_error_descends_from_khora_error() -> None:
    from khora_core import errors

    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, errors.KhoraError), name
