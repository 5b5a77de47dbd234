"""Each namespace's chunk count, for the graph channel's entity specificity, read rarely.

``fusion.entity_specificity`` divides an entity's mentions by the namespace's chunk count.
Counting is a scan on both stacks (``COUNT(*)`` over the namespace's chunk rows: about a
millisecond at 10,000 chunks, tens of milliseconds at a million), and the signal is a
log-scaled share that a few more chunks barely move, so the count is kept for ``ttl``
seconds. Writes through the same engine drop their namespace's count (``invalidate``), so a
namespace that has just grown, or been emptied, is counted again on its next recall; writes
from other processes are seen within ``ttl``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from khora_core.storage.protocols import DocumentStore

__all__ = ["ChunkCounts"]


class ChunkCounts:
    """Cached ``DocumentStore.count_chunks``.

    Args:
        documents: the store that counts.
        ttl: seconds a count is reused; 0 counts on every call.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self, documents: DocumentStore, *, ttl: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if ttl < 0:
            raise ValueError(f"ttl must be at least 0, got {ttl}")
        self._documents = documents
        self._ttl = ttl
        self._clock = clock
        self._counts: dict[str, tuple[int, float]] = {}

    async def get(self, namespace_id: str) -> int:
        """The namespace's chunk count, counted at most ``ttl`` seconds ago."""
        held = self._counts.get(namespace_id)
        now = self._clock()
        if held is not None and now - held[1] < self._ttl:
            return held[0]
        count = await self._documents.count_chunks(namespace_id)
        self._counts[namespace_id] = (count, now)
        return count

    def invalidate(self, namespace_id: str) -> None:
        """Forget the namespace's count (after a write to it): the next ``get`` counts."""
        self._counts.pop(namespace_id, None)
