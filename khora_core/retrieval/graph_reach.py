"""What the graph channel's evidence groups reach, unfiltered or filtered, and how relevant
the reached chunks are to the question (``retrieval.graph_channel``, "Reach" and "Bridge
relevance")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from khora_core.models import ChunkHit
from khora_core.storage.protocols import StorageStack

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter

__all__ = ["Reached", "reach_by_mentions", "reach_by_pages", "relevance_to"]


@dataclass
class Reached:
    """What the evidence groups reached: evidence and mention totals per chunk id, and the
    chunk rows when the store returned them."""

    evidence: dict[str, float] = field(default_factory=dict)
    mentions: dict[str, float] = field(default_factory=dict)
    chunks: dict[str, ChunkHit] = field(default_factory=dict)
    pushed: list[str] = field(default_factory=list)
    post: list[str] = field(default_factory=list)
    #: Relevance of the scanned chunks (a superset of ``evidence``), when already scored.
    relevance: dict[str, float] | None = None


async def reach_by_mentions(
    stack: StorageStack,
    namespace_id: str,
    groups: list[tuple[list[str], float]],
    *,
    limit: int,
    scan: int,
    query_vector: Sequence[float] | None,
    bridge: Sequence[float] | None,
) -> Reached:
    """Unfiltered: one ``chunk_mentions`` call for every group's entities (each entity's
    ``scan`` most-mentioning chunks), scored for relevance in one pass; each group keeps the
    ``limit`` chunks most relevant to the question (module docstring, "Reach"), more mentions
    of its entities and then chunk id breaking ties."""
    wanted = list(dict.fromkeys(e for ids, _ in groups for e in ids))
    per_entity = await stack.graph.chunk_mentions(namespace_id, wanted, per_entity=scan)
    scanned = list(dict.fromkeys(cid for counts in per_entity.values() for cid in counts))
    relevance = await relevance_to(stack, namespace_id, query_vector, scanned, bridge=bridge)
    out = Reached(relevance=relevance)
    for ids, weight in groups:
        totals: dict[str, int] = {}
        for eid in ids:
            for cid, n in per_entity.get(eid, {}).items():
                totals[cid] = totals.get(cid, 0) + n
        for cid in sorted(totals, key=lambda c: (-relevance.get(c, -2.0), -totals[c], c))[:limit]:
            out.evidence[cid] = out.evidence.get(cid, 0.0) + weight
            out.mentions[cid] = out.mentions.get(cid, 0.0) + totals[cid]
    return out


async def reach_by_pages(
    stack: StorageStack,
    namespace_id: str,
    groups: list[tuple[list[str], float]],
    limit: int,
    filter: RecallFilter | None,
    temporal_sort: bool,
) -> Reached:
    """Filtered or temporal: one page per group (``chunks_for_entity_groups``, one read for
    all), so the store pushes the filter down and orders by time."""
    pages = await stack.graph.chunks_for_entity_groups(
        namespace_id, [ids for ids, _ in groups], limit=limit, filter=filter, temporal_sort=temporal_sort
    )
    out = Reached()
    for (_, weight), page in zip(groups, pages, strict=True):
        out.pushed += [k for k in page.pushed_keys if k not in out.pushed]
        out.post += [k for k in page.post_filtered_keys if k not in out.post]
        for hit in page.hits:
            cid = hit.chunk.id
            out.chunks.setdefault(cid, hit)
            out.evidence[cid] = out.evidence.get(cid, 0.0) + weight
            out.mentions[cid] = out.mentions.get(cid, 0.0) + float(hit.score)
    return out


async def relevance_to(
    stack: StorageStack,
    namespace_id: str,
    query_vector: Sequence[float] | None,
    chunk_ids: list[str],
    *,
    bridge: Sequence[float] | None = None,
) -> dict[str, float]:
    """Cosine of the question with each chunk's stored embedding (absent when unknown); with
    a ``bridge`` vector, the better of that and the cosine with the bridged question."""
    if query_vector is None or not chunk_ids:
        return {}
    vectors = [query_vector] if bridge is None else [query_vector, bridge]
    pages = await stack.vectors.similarities_many(namespace_id, vectors, chunk_ids)
    out: dict[str, float] = {}
    for scores in pages:
        for c, v in scores.items():
            if v == v:  # NaN: a zero vector
                out[c] = max(out.get(c, 0.0), float(v))
    return out
