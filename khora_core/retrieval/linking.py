"""Entity linking: match the question's entity mentions to stored entities.

Three ways, strongest first; each mention keeps its best match:

1. **exact**: case-insensitive name or alias (``graph.find_entities_by_name``), score 1.0;
2. **fuzzy**: edit-distance ratio (rapidfuzz) of the mention against candidate names and
   aliases, score ``ratio / 100`` when it reaches ``fuzzy_threshold``. Candidates come
   from an entity vector search on the mention's embedding, or from the entity list when
   no entity has an embedding;
3. **embedding**: the entity vector search itself, score = cosine, when it reaches
   ``min_similarity`` (``VectorCypherConfig.retriever_min_entity_similarity``).

Linked entities seed the graph channel; their scores measure how much to trust it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from khora_core.embedding.base import Embedder
from khora_core.models import Entity
from khora_core.storage.protocols import GraphStore

__all__ = ["LinkedEntity", "link_entities"]


@dataclass(frozen=True)
class LinkedEntity:
    """A stored entity matched to a mention.

    Attributes:
        entity: the stored entity.
        score: match strength in [0, 1].
        match: ``"exact"``, ``"fuzzy"`` or ``"embedding"``.
        mention: the mention it matched.
    """

    entity: Entity
    score: float
    match: str
    mention: str

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.entity.id,
            "name": self.entity.name,
            "mention": self.mention,
            "match": self.match,
            "score": round(self.score, 4),
        }


def _names(entity: Entity) -> list[str]:
    return [entity.name, *entity.aliases]


def _fuzzy(mention: str, entity: Entity) -> float:
    m = mention.casefold()
    return max(
        max(fuzz.ratio(m, n.casefold()), fuzz.token_sort_ratio(m, n.casefold())) for n in _names(entity)
    )


async def link_entities(
    graph: GraphStore,
    namespace_id: str,
    mentions: Sequence[str],
    *,
    embedder: Embedder | None,
    min_similarity: float = 0.3,
    fuzzy_threshold: float = 85.0,
    candidates_per_mention: int = 10,
    list_fallback_limit: int = 1000,
) -> list[LinkedEntity]:
    """Link mentions to entities of ``namespace_id``.

    Args:
        graph: the graph store.
        namespace_id: the namespace to read.
        mentions: surface forms from the question.
        embedder: embeds the mentions for fuzzy candidates and embedding matches (None:
            exact and list-based fuzzy matching only).
        min_similarity: lowest cosine for an embedding match.
        fuzzy_threshold: lowest rapidfuzz ratio (0-100) for a fuzzy match.
        candidates_per_mention: entity vector hits fetched per mention.
        list_fallback_limit: entities listed for fuzzy matching when vector search finds none.

    Returns:
        The best link per entity (an entity matched by two mentions appears once), best
        first.
    """
    mentions = list(dict.fromkeys(m.strip() for m in mentions if m and m.strip()))
    if not mentions:
        return []
    best: dict[str, LinkedEntity] = {}

    def keep(link: LinkedEntity) -> None:
        current = best.get(link.entity.id)
        if current is None or link.score > current.score:
            best[link.entity.id] = link

    exact = await graph.find_entities_by_name(namespace_id, mentions)
    matched: set[str] = set()
    for entity in exact:
        names = {n.casefold() for n in _names(entity)}
        for mention in mentions:
            if mention.casefold() in names:
                keep(LinkedEntity(entity, 1.0, "exact", mention))
                matched.add(mention)
    rest = [m for m in mentions if m not in matched]
    if not rest:
        return sorted(best.values(), key=lambda link: -link.score)

    per_mention: list[list[tuple[Entity, float | None]]] = [[] for _ in rest]
    if embedder is not None:
        vectors = await embedder.embed_documents(rest)
        for i, vector in enumerate(vectors):
            hits = await graph.search_entities_by_vector(
                namespace_id, vector, limit=candidates_per_mention, min_similarity=0.0
            )
            per_mention[i] = [(h.entity, h.score) for h in hits]
    if not any(per_mention):
        listed = await graph.list_entities(namespace_id, limit=list_fallback_limit)
        per_mention = [[(e, None) for e in listed] for _ in rest]

    for mention, candidates in zip(rest, per_mention, strict=True):
        fuzzy_hit = False
        nearest: tuple[Entity, float] | None = None
        for entity, cosine in candidates:
            ratio = _fuzzy(mention, entity)
            if ratio >= fuzzy_threshold:
                keep(LinkedEntity(entity, ratio / 100.0, "fuzzy", mention))
                fuzzy_hit = True
            elif cosine is not None and cosine >= min_similarity and (nearest is None or cosine > nearest[1]):
                nearest = (entity, float(cosine))
        # Only the nearest embedding match links, and only when no name matched: a mention
        # names one thing, and ten loosely similar entities would seed the graph with noise.
        if not fuzzy_hit and nearest is not None:
            keep(LinkedEntity(nearest[0], nearest[1], "embedding", mention))
    return sorted(best.values(), key=lambda link: -link.score)
