"""Entity linking: match the question's entity mentions to stored entities.

Three ways, strongest first; each mention keeps its best match:

1. **exact**: case-insensitive name or alias (``graph.find_entities_by_name``), score 1.0;
2. **fuzzy**: edit-distance ratio (rapidfuzz) of the mention against candidate names and
   aliases, score ``ratio / 100`` when it reaches ``fuzzy_threshold``. Candidates come
   from an entity vector search on the mention's embedding and from the entities whose
   name shares a word with the mention (``graph.find_entities_by_words``, which reaches
   entities stored without a vector), or from the entity list when both find none;
3. **embedding**: the entity vector search itself, score = cosine, when it reaches
   ``min_similarity`` (``VectorCypherConfig.retriever_min_entity_similarity``).

Linked entities seed the graph channel; their scores measure how much to trust it. Asked
for ``query_limit``, linking also returns the entities nearest the question itself (the
graph channel's vector entry points). That search starts as soon as the question's vector
is there, beside the exact lookup and the mentions' embedding, instead of waiting for the
mentions' vectors to share one store call with them (a vector index answers two vectors in
more time than one).

Only the mentions that no name matched are embedded: first the exact lookup, then the
edit-distance ratio against the entities that share a word with the mention; what is still
unlinked goes to the embedder and the entity vector search. A forward pass costs per padded
token, and a question batched with its mentions pads every mention to the question's
length, so a mention that a name already matched is not embedded at all.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from khora_core.embedding.base import Embedder
from khora_core.models import Entity
from khora_core.storage.protocols import EntityHit, GraphStore

__all__ = ["LinkedEntity", "Linking", "clean_mentions", "link_entities"]


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


@dataclass(frozen=True)
class Linking:
    """What linking found.

    Attributes:
        links: the best link per entity, best first.
        nearest: the entities nearest the question vector (raw cosine of at least the
            linking's ``min_similarity``, best first), when ``query_vector`` and
            ``query_limit`` were given; else empty.
    """

    links: list[LinkedEntity]
    nearest: list[EntityHit]


def clean_mentions(mentions: Sequence[str]) -> list[str]:
    """The mentions linking works on: stripped, non-empty, each once, in order."""
    return list(dict.fromkeys(m.strip() for m in mentions if m and m.strip()))


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
    query_vector: Sequence[float] | Awaitable[Sequence[float] | None] | None = None,
    query_limit: int = 0,
) -> Linking:
    """Link mentions to entities of ``namespace_id``.

    Args:
        graph: the graph store.
        namespace_id: the namespace to read.
        mentions: surface forms from the question.
        embedder: embeds the mentions no name matched exactly, for fuzzy candidates and
            embedding matches (None: exact, name-word and list-based fuzzy matching only).
        min_similarity: lowest cosine for an embedding match and for the question's
            nearest entities.
        fuzzy_threshold: lowest rapidfuzz ratio (0-100) for a fuzzy match.
        candidates_per_mention: entity vector hits fetched per mention.
        list_fallback_limit: entities listed for fuzzy matching when vector search finds none.
        query_vector: the question's embedding, or an awaitable of it still being
            computed (awaited beside the exact lookup and the mentions' embedding); with
            ``query_limit`` > 0, its nearest entities come back as ``Linking.nearest``.
        query_limit: how many nearest entities of the question to return.

    Returns:
        A :class:`Linking`: the best link per entity (an entity matched by two mentions
        appears once), best first, and the question's nearest entities.
    """
    mentions = clean_mentions(mentions)
    nearest_task: asyncio.Task[list[EntityHit]] | None = None
    if query_vector is not None:
        nearest_task = asyncio.ensure_future(
            _nearest(graph, namespace_id, query_vector, query_limit, min_similarity)
        )
    try:
        return await _link(
            graph,
            namespace_id,
            mentions,
            nearest_task,
            embedder=embedder,
            min_similarity=min_similarity,
            fuzzy_threshold=fuzzy_threshold,
            candidates_per_mention=candidates_per_mention,
            list_fallback_limit=list_fallback_limit,
        )
    except BaseException:
        if nearest_task is not None:
            nearest_task.cancel()
            await asyncio.gather(nearest_task, return_exceptions=True)
        raise


async def _nearest(
    graph: GraphStore,
    namespace_id: str,
    query_vector: Sequence[float] | Awaitable[Sequence[float] | None],
    limit: int,
    min_similarity: float,
) -> list[EntityHit]:
    """The entities nearest the question's vector (awaited here when still being computed),
    of at least ``min_similarity``."""
    vector = await query_vector if inspect.isawaitable(query_vector) else query_vector
    if vector is None or limit <= 0:
        return []
    found = await graph.search_entities_by_vectors(
        namespace_id, [vector], limit=limit, min_similarity=min_similarity
    )
    return found[0] if found else []


async def _link(
    graph: GraphStore,
    namespace_id: str,
    mentions: list[str],
    nearest_task: asyncio.Task[list[EntityHit]] | None,
    *,
    embedder: Embedder | None,
    min_similarity: float,
    fuzzy_threshold: float,
    candidates_per_mention: int,
    list_fallback_limit: int,
) -> Linking:
    """``link_entities`` once the question's nearest-entity search is under way."""
    best: dict[str, LinkedEntity] = {}

    def keep(link: LinkedEntity) -> None:
        current = best.get(link.entity.id)
        if current is None or link.score > current.score:
            best[link.entity.id] = link

    # The exact lookup and the candidates by name words, for every mention at once.
    exact: list[Entity] = []
    by_words: dict[str, list[Entity]] = {}
    if mentions:
        exact, words = await asyncio.gather(
            graph.find_entities_by_name(namespace_id, mentions),
            graph.find_entities_by_words(namespace_id, mentions, limit=candidates_per_mention),
        )
        by_words = dict(zip(mentions, words, strict=True))
    matched: set[str] = set()
    for entity in exact:
        names = {n.casefold() for n in _names(entity)}
        for mention in mentions:
            if mention.casefold() in names:
                keep(LinkedEntity(entity, 1.0, "exact", mention))
                matched.add(mention)
    rest = [m for m in mentions if m not in matched]
    # A close spelling of a name sharing one of its words ("Maya Chenn") links without an
    # embedding: only the mentions left after that are embedded.
    for mention in rest:
        if _link_fuzzy(mention, by_words.get(mention, []), fuzzy_threshold, keep):
            matched.add(mention)
    unlinked = [m for m in rest if m not in matched]
    vector_of: dict[str, Sequence[float]] = {}
    if unlinked and embedder is not None:
        vector_of = dict(zip(unlinked, await embedder.embed_documents(unlinked), strict=True))

    vectors: list[Sequence[float]] = [vector_of[m] for m in unlinked if m in vector_of]
    found: list[list[EntityHit]] = []
    if vectors:
        found = await graph.search_entities_by_vectors(
            namespace_id, vectors, limit=candidates_per_mention, min_similarity=0.0
        )
    nearest = await nearest_task if nearest_task is not None else []
    if not unlinked:
        return Linking(sorted(best.values(), key=lambda link: -link.score), nearest)

    hits_of = dict(zip([m for m in unlinked if m in vector_of], found, strict=True))
    # (entity, cosine); a listed fallback entity has no cosine
    per_mention: list[list[tuple[Entity, float | None]]] = [
        [(h.entity, h.score) for h in hits_of.get(m, [])[:candidates_per_mention]] for m in unlinked
    ]
    if not any(per_mention) and not any(by_words.get(m) for m in unlinked):
        listed = await graph.list_entities(namespace_id, limit=list_fallback_limit)
        per_mention = [[(e, None) for e in listed] for _ in unlinked]

    for mention, candidates in zip(unlinked, per_mention, strict=True):
        if _link_fuzzy(mention, [e for e, _ in candidates], fuzzy_threshold, keep):
            continue
        # Only the nearest embedding match links, and only when no name matched: a mention
        # names one thing, and ten loosely similar entities would seed the graph with noise.
        scored = [(e, float(c)) for e, c in candidates if c is not None and c >= min_similarity]
        if scored:
            entity, cosine = max(scored, key=lambda pair: pair[1])
            keep(LinkedEntity(entity, cosine, "embedding", mention))
    return Linking(sorted(best.values(), key=lambda link: -link.score), nearest)


def _link_fuzzy(
    mention: str, candidates: Sequence[Entity], threshold: float, keep: Callable[[LinkedEntity], None]
) -> bool:
    """Link ``mention`` to every candidate whose name or alias it spells closely enough;
    True when at least one did."""
    hit = False
    for entity in candidates:
        ratio = _fuzzy(mention, entity)
        if ratio >= threshold:
            keep(LinkedEntity(entity, ratio / 100.0, "fuzzy", mention))
            hit = True
    return hit
