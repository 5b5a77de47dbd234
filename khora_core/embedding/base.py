"""The one small interface every embedder implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Embedder", "embed_names"]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length vectors.

    Implementations batch internally and run model work off the event loop.
    """

    #: A stable name recorded with stored vectors (``"sentence-transformers:all-MiniLM-L6-v2"``).
    name: str
    #: Vector dimension.
    dimension: int

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages; returns one L2-normalised vector per text, in order."""
        ...

    async def embed_query(self, text: str) -> list[float]:
        """Embed a search query; returns one L2-normalised vector."""
        ...


async def embed_names(embedder: Embedder, names: Sequence[str]) -> list[list[float]]:
    """Embed entity names: through the embedder's own ``embed_names`` when it has one (the
    local embedder may encode short names at reduced precision), else ``embed_documents``."""
    own = getattr(embedder, "embed_names", None)
    if callable(own):
        return list(await own(names))
    return await embedder.embed_documents(names)
