"""The entity read APIs: get, list, search (exact / fuzzy / embedding), find related.

Every method takes ``namespace_id`` keyword-only and reads only that namespace.
"""

from __future__ import annotations

from collections.abc import Sequence

from rapidfuzz import fuzz, process

from khora_core.config import KhoraConfig
from khora_core.embedding.base import Embedder
from khora_core.errors import InvalidInputError
from khora_core.models import DocumentProjection, Entity, EntityProjection
from khora_core.storage.protocols import StorageStack

__all__ = ["EntityReader", "to_document_projection"]

_SEARCH_METHODS = ("exact", "fuzzy", "embedding", "all")


def to_document_projection(doc: object) -> DocumentProjection:
    """A stored ``Document`` as the read side shows it."""
    data = doc.model_dump(exclude={"content_hash"})  # type: ignore[attr-defined]
    return DocumentProjection(**data)


class EntityReader:
    def __init__(self, *, stack: StorageStack, embedder: Embedder, config: KhoraConfig) -> None:
        self.stack = stack
        self.embedder = embedder
        self.config = config

    async def _project(
        self,
        namespace_id: str,
        entities: Sequence[Entity],
        scores: dict[str, float] | None,
        include_sources: bool,
    ) -> list[EntityProjection]:
        if not entities:
            return []
        ids = [e.id for e in entities]
        doc_ids = await self.stack.graph.documents_for_entities(namespace_id, ids)
        docs_by_id: dict[str, DocumentProjection] = {}
        if include_sources:
            wanted = sorted({d for ds in doc_ids.values() for d in ds})
            for start in range(0, len(wanted), 1000):
                for doc in await self.stack.documents.get_documents(
                    namespace_id, wanted[start : start + 1000]
                ):
                    docs_by_id[doc.id] = to_document_projection(doc)
        out = []
        for e in entities:
            ds = doc_ids.get(e.id, [])
            out.append(
                EntityProjection(
                    id=e.id,
                    name=e.name,
                    type=e.type,
                    aliases=list(e.aliases),
                    description=e.description,
                    mention_count=e.mention_count,
                    score=(scores or {}).get(e.id),
                    document_ids=list(ds),
                    source_documents=[docs_by_id[d] for d in ds if d in docs_by_id]
                    if include_sources
                    else None,
                    properties=dict(e.properties),
                )
            )
        return out

    async def get_entity(
        self, entity_id: str, *, namespace_id: str, include_sources: bool = False
    ) -> EntityProjection | None:
        entity = await self.stack.graph.get_entity(namespace_id, entity_id)
        if entity is None:
            return None
        return (await self._project(namespace_id, [entity], None, include_sources))[0]

    async def list_entities(
        self,
        *,
        namespace_id: str,
        offset: int = 0,
        limit: int = 100,
        type: str | None = None,
        include_sources: bool = False,
    ) -> list[EntityProjection]:
        if offset < 0 or limit < 1:
            raise InvalidInputError("list_entities needs offset >= 0 and limit >= 1")
        entities = await self.stack.graph.list_entities(namespace_id, offset=offset, limit=limit, type=type)
        return await self._project(namespace_id, entities, None, include_sources)

    async def search_entities(
        self,
        query: str,
        *,
        namespace_id: str,
        limit: int = 10,
        method: str = "all",
        include_sources: bool = False,
    ) -> list[EntityProjection]:
        if method not in _SEARCH_METHODS:
            raise InvalidInputError(
                f"search_entities method must be one of {_SEARCH_METHODS}, got {method!r}"
            )
        if not query or not query.strip():
            raise InvalidInputError("search_entities needs a non-empty query")
        scores: dict[str, float] = {}
        found: dict[str, Entity] = {}
        if method in ("exact", "all"):
            for e in await self.stack.graph.find_entities_by_name(namespace_id, [query]):
                found[e.id] = e
                scores[e.id] = 1.0
        if method in ("embedding", "fuzzy", "all"):
            vector = await self.embedder.embed_query(query)
            hits = await self.stack.graph.search_entities_by_vector(
                namespace_id, vector, limit=max(limit * 5, 25), min_similarity=0.0
            )
            if method in ("embedding", "all"):
                for h in hits[:limit]:
                    found.setdefault(h.entity.id, h.entity)
                    scores[h.entity.id] = max(scores.get(h.entity.id, 0.0), float(h.score))
            if method in ("fuzzy", "all"):
                pool = {h.entity.id: h.entity for h in hits}
                # Entities sharing a word with the query, with or without a vector, then the
                # most mentioned ones.
                (by_words,) = await self.stack.graph.find_entities_by_words(
                    namespace_id, [query], limit=max(limit * 5, 25)
                )
                for e in by_words:
                    pool.setdefault(e.id, e)
                for e in await self.stack.graph.list_entities(namespace_id, offset=0, limit=2000):
                    pool.setdefault(e.id, e)
                choices = {eid: e.name for eid, e in pool.items()}
                for _name, score, eid in process.extract(query, choices, scorer=fuzz.WRatio, limit=limit):
                    if score >= 80:
                        found.setdefault(eid, pool[eid])
                        scores[eid] = max(scores.get(eid, 0.0), score / 100.0)
        ranked = sorted(found.values(), key=lambda e: (-scores.get(e.id, 0.0), -e.mention_count, e.name))[
            :limit
        ]
        return await self._project(namespace_id, ranked, scores, include_sources)

    async def find_related_entities(
        self,
        entity_id: str,
        *,
        namespace_id: str,
        depth: int = 1,
        relationship_types: Sequence[str] | None = None,
        limit: int = 50,
        include_sources: bool = False,
    ) -> list[EntityProjection]:
        if not 1 <= depth <= self.config.vectorcypher.graph_max_depth:
            raise InvalidInputError(f"depth must be between 1 and {self.config.vectorcypher.graph_max_depth}")
        hood = await self.stack.graph.neighbourhood(
            namespace_id,
            [entity_id],
            depth=depth,
            max_fanout=self.config.vectorcypher.graph_max_fanout,
            relationship_types=relationship_types,
        )
        related = [e for e in hood.entities if e.id != entity_id]
        related.sort(key=lambda e: (hood.distance.get(e.id, depth), -e.mention_count, e.name))
        scores = {e.id: 1.0 / (1 + hood.distance.get(e.id, depth)) for e in related}
        return await self._project(namespace_id, related[:limit], scores, include_sources)
