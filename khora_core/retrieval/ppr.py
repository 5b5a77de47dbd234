"""Personalized PageRank over a question's passage-entity graph (HippoRAG 2's idea, no LLM).

The graph channel builds a small bipartite graph for each question: the passages the vector
channel found and the passages that mention the question's entities (or the entities of the
nearest passages), joined to the entities they mention. A random walk that restarts at the
question's evidence (the entities it names, weighted by how specific they are, and the
passages by their cosine with the question) settles on the passages that evidence points to
from several sides: the second hop of a multi-hop question is reached through the entity it
shares with the first hop's passage, even when its own words are far from the question's.

``personalized_pagerank`` is the walk; ``PassageGraph`` collects the nodes, edges and restart
weights and ranks passages by the walk's stationary mass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from khora_core.models import ChunkHit
    from khora_core.storage.protocols import StorageStack

__all__ = ["PassageGraph", "normalised", "personalized_pagerank", "walk_passages"]


def personalized_pagerank(
    n: int,
    sources: np.ndarray,
    targets: np.ndarray,
    probabilities: np.ndarray,
    reset: np.ndarray,
    *,
    damping: float = 0.5,
    iterations: int = 50,
    tolerance: float = 1e-8,
) -> np.ndarray:
    """Stationary mass of a walk that follows an edge with probability ``damping`` and
    restarts at ``reset`` otherwise.

    Args:
        n: number of nodes.
        sources, targets, probabilities: the directed edges and the probability of taking
            each from its source (a node's out-probabilities may sum to less than 1: the rest
            of the mass leaves the graph, as a walk into passages outside it would).
        reset: restart weights per node (normalised here; all zero gives all zero).
        damping: probability of following an edge rather than restarting.
    """
    total = float(reset.sum())
    if n == 0 or total <= 0.0:
        return np.zeros(n)
    r = reset / total
    p = r.copy()
    for _ in range(iterations):
        spread = np.bincount(targets, weights=p[sources] * probabilities, minlength=n)
        nxt = (1.0 - damping) * r + damping * spread
        if float(np.abs(nxt - p).sum()) < tolerance:
            return nxt
        p = nxt
    return p


@dataclass
class PassageGraph:
    """Passages and entities with ``MENTIONED_IN`` edges, and the walk's restart weights.

    Entity degrees are the entities' mention counts in the whole namespace (not only the
    edges seen here), so a popular entity spreads its mass over every passage that names
    it, most of them outside this small graph, and passes little to each: the walk's own
    inverse document frequency.
    """

    passage_reset: dict[str, float] = field(default_factory=dict)
    entity_reset: dict[str, float] = field(default_factory=dict)
    #: passage id -> entity id -> mentions
    mentions: dict[str, dict[str, int]] = field(default_factory=dict)
    #: entity id -> mention count in the namespace
    entity_degree: dict[str, int] = field(default_factory=dict)

    def add_mentions(self, passage_id: str, entity_mentions: Mapping[str, int]) -> None:
        row = self.mentions.setdefault(passage_id, {})
        for eid, count in entity_mentions.items():
            row[eid] = max(row.get(eid, 0), int(count))

    def add_entity(self, entity_id: str, mention_count: int) -> None:
        self.entity_degree[entity_id] = max(self.entity_degree.get(entity_id, 0), int(mention_count), 1)

    def rank(self, *, damping: float, passage_share: float) -> dict[str, float]:
        """Each passage's stationary mass. ``passage_share`` of the restart mass goes to the
        passages (by their weights), the rest to the entities; when there are no entity
        restart weights the passages take all of it."""
        passages = list(dict.fromkeys([*self.passage_reset, *self.mentions]))
        entities = list(
            dict.fromkeys([*self.entity_reset, *(e for row in self.mentions.values() for e in row)])
        )
        index = {pid: i for i, pid in enumerate(passages)}
        offset = len(passages)
        index.update({eid: offset + i for i, eid in enumerate(entities)})
        n = offset + len(entities)
        src: list[int] = []
        dst: list[int] = []
        prob: list[float] = []
        for pid, row in self.mentions.items():
            if not row:
                continue
            p = index[pid]
            out = 1.0 / len(row)
            for eid in row:
                e = index[eid]
                src += [p, e]
                dst += [e, p]
                degree = max(self.entity_degree.get(eid, 1), 1)
                prob += [out, 1.0 / degree]
        reset = np.zeros(n)
        entity_total = sum(max(0.0, v) for v in self.entity_reset.values())
        passage_total = sum(max(0.0, v) for v in self.passage_reset.values())
        share = passage_share if entity_total > 0 else 1.0
        if passage_total > 0:
            for pid, v in self.passage_reset.items():
                reset[index[pid]] += share * max(0.0, v) / passage_total
        if entity_total > 0:
            for eid, v in self.entity_reset.items():
                reset[index[eid]] += (1.0 - share) * max(0.0, v) / entity_total
        mass = personalized_pagerank(
            n,
            np.asarray(src, dtype=np.int64),
            np.asarray(dst, dtype=np.int64),
            np.asarray(prob, dtype=np.float64),
            reset,
            damping=damping,
        )
        return {pid: float(mass[index[pid]]) for pid in passages}


def normalised(scores: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Min-max to [0, 1] (all-equal scores map to 1.0)."""
    pairs = list(scores)
    if not pairs:
        return {}
    lo = min(s for _, s in pairs)
    hi = max(s for _, s in pairs)
    if hi - lo <= 1e-12:
        return {k: 1.0 for k, _ in pairs}
    return {k: (s - lo) / (hi - lo) for k, s in pairs}


async def walk_passages(
    stack: StorageStack,
    namespace_id: str,
    *,
    seeds: Mapping[str, tuple[float, int]],
    nearest: Sequence[ChunkHit],
    expand: int,
    per_entity: int,
    damping: float,
    passage_share: float,
) -> tuple[dict[str, float], dict[str, ChunkHit], dict[str, Any]]:
    """Rank passages for a question by a walk over its passage-entity graph.

    Args:
        seeds: the question's entities: id -> (restart weight, namespace mention count).
        nearest: the passages nearest the question, best first, with their cosine.
        expand: how many of the nearest passages have their entities' other passages
            added (the second hop's candidates).
        per_entity: how many passages each seed or expanded entity adds (most mentions first).

    Returns:
        Passage id -> walk mass; the nearest passages' hits by id (the other passages'
        rows are not read here); and a summary for ``engine_info``.
    """
    graph = PassageGraph()
    hits = {h.chunk.id: h for h in nearest}
    graph.passage_reset = normalised((h.chunk.id, float(h.score)) for h in nearest)
    for eid, (weight, mentions) in seeds.items():
        graph.entity_reset[eid] = weight
        graph.add_entity(eid, mentions)
    by_chunk = await stack.graph.entity_refs_for_chunks(namespace_id, list(hits)) if hits else {}
    expanded: dict[str, None] = dict.fromkeys(seeds)
    for rank, hit in enumerate(nearest):
        row: dict[str, int] = {}
        for ent in by_chunk.get(hit.chunk.id, []):
            if ent.type == "DATE":
                continue
            row[ent.id] = 1
            graph.add_entity(ent.id, ent.mention_count)
            if rank < expand:
                expanded.setdefault(ent.id)
        graph.add_mentions(hit.chunk.id, row)
    reached = (
        await stack.graph.chunk_mentions(namespace_id, list(expanded), per_entity=per_entity)
        if expanded and per_entity > 0
        else {}
    )
    for eid, chunks in reached.items():
        for cid, count in chunks.items():
            graph.add_mentions(cid, {eid: count})
    mass = graph.rank(damping=damping, passage_share=passage_share)
    info = {
        "passages": len(mass),
        "entities": len(graph.entity_degree),
        "expanded_entities": len(expanded),
    }
    return mass, hits, info
