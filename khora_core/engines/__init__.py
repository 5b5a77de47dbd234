"""Engines wire the write and read pipelines to a storage stack.

``ENGINES`` maps the names ``Khora(engine=...)`` accepts to engine classes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ENGINES"]


def _vectorcypher() -> Any:
    from khora_core.engines.vectorcypher.engine import VectorCypherEngine

    return VectorCypherEngine


class _Registry(dict):
    """Engine name -> class, imported on first use so ``import khora_core`` stays light."""

    def __missing__(self, key: str) -> Any:
        raise KeyError(key)

    def __getitem__(self, key: str) -> Any:
        factory = dict.__getitem__(self, key)
        return factory()


ENGINES: dict[str, Any] = _Registry(vectorcypher=_vectorcypher)
