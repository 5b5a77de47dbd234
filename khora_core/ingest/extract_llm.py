"""``LLMExtractor``: one structured-output LLM call per core chunk.

Each call asks for ``{"entities": [...], "relationships": [...]}`` with a JSON schema
(enums when the caller restricted the types) and a short example in the prompt, which
is enough even for small local models. The answer is validated item by item: items
with a missing name or a type outside the caller's vocabulary are dropped, not fatal.
A malformed answer is asked again (up to ``LLMConfig.max_retries`` times); a chunk that
still fails comes back with ``failed=True`` and is stored flagged for re-extraction.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from khora_core.ingest.extract_base import ChunkExtraction, ExtractedEntity, ExtractedRelation, normalise_type
from khora_core.ingest.vocabulary import constrain_entity_type
from khora_core.llm.client import LLMClient
from khora_core.llm.structured import MalformedOutputError

__all__ = ["LLMExtractor", "build_prompt", "build_schema", "parse_extraction"]

DEFAULT_ENTITY_TYPES = ("PERSON", "ORGANIZATION", "LOCATION", "PROJECT", "EVENT", "DATE", "CONCEPT")
_MAX_NAME = 200
_MAX_DESCRIPTION = 500

_EXAMPLE_TEXT = "Alice Chen joined Acme Corp in Berlin as CTO in 2021."
_EXAMPLE_JSON = {
    "entities": [
        {"name": "Alice Chen", "type": "PERSON", "description": "CTO of Acme Corp since 2021"},
        {"name": "Acme Corp", "type": "ORGANIZATION", "description": "Company based in Berlin"},
        {"name": "Berlin", "type": "LOCATION", "description": "City where Acme Corp is based"},
    ],
    "relationships": [
        {
            "source": "Alice Chen",
            "target": "Acme Corp",
            "type": "WORKS_AT",
            "description": "joined as CTO in 2021",
        },
        {"source": "Acme Corp", "target": "Berlin", "type": "LOCATED_IN", "description": "based in Berlin"},
    ],
}


def build_schema(
    entity_types: Sequence[str] | None = None, relationship_types: Sequence[str] | None = None
) -> dict[str, Any]:
    """The JSON schema of one extraction answer (types as enums when restricted)."""
    etype: dict[str, Any] = {"type": "string"}
    rtype: dict[str, Any] = {"type": "string"}
    if entity_types:
        etype["enum"] = list(entity_types)
    if relationship_types:
        rtype["enum"] = list(relationship_types)
    entity = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "type": etype, "description": {"type": "string"}},
        "required": ["name", "type"],
    }
    relation = {
        "type": "object",
        "properties": {
            "source": {"type": "string"},
            "target": {"type": "string"},
            "type": rtype,
            "description": {"type": "string"},
        },
        "required": ["source", "target", "type"],
    }
    return {
        "type": "object",
        "properties": {
            "entities": {"type": "array", "items": entity},
            "relationships": {"type": "array", "items": relation},
        },
        "required": ["entities", "relationships"],
    }


def build_prompt(
    text: str, entity_types: Sequence[str] | None = None, relationship_types: Sequence[str] | None = None
) -> str:
    """The extraction prompt for one chunk (instructions, one example, the text)."""
    etypes = ", ".join(entity_types or DEFAULT_ENTITY_TYPES)
    rtypes = (
        "Use only these relationship types: " + ", ".join(relationship_types) + "."
        if relationship_types
        else "Relationship types are short UPPER_SNAKE_CASE verbs such as WORKS_AT, FOUNDED, LOCATED_IN, PART_OF."
    )
    only = "Use only these entity types" if entity_types else "Entity types"
    return (
        "Extract the named entities and the relationships between them from the text. "
        f"{only}: {etypes}. {rtypes} "
        "Every relationship source and target must be the name of an extracted entity. "
        "Give each entity a one-sentence description from the text. Answer with JSON only.\n\n"
        f"Example text: {_EXAMPLE_TEXT}\n"
        f"Example JSON: {json.dumps(_EXAMPLE_JSON)}\n\n"
        f"Text: {text}\n"
        "JSON:"
    )


def _clean(value: Any, limit: int) -> str | None:
    if not isinstance(value, str):
        return None
    value = " ".join(value.split())
    return value[:limit] if value else None


def _kept_entities(raw_entities: list[Any], entity_types: Sequence[str] | None) -> dict[str, ExtractedEntity]:
    """The answer's entities of an allowed type, by case-folded name (the first one wins)."""
    allowed_e = {normalise_type(t): t for t in entity_types} if entity_types else None
    entities: dict[str, ExtractedEntity] = {}
    for item in raw_entities:
        if not isinstance(item, dict):
            continue
        name = _clean(item.get("name"), _MAX_NAME)
        etype = normalise_type(str(item.get("type") or "CONCEPT")) or "CONCEPT"
        if name is None:
            continue
        if allowed_e is not None:
            if etype not in allowed_e:
                continue
            etype = allowed_e[etype]
        entities.setdefault(
            name.casefold(), ExtractedEntity(name, etype, _clean(item.get("description"), _MAX_DESCRIPTION))
        )
    return entities


def parse_extraction(
    data: Any,
    *,
    entity_types: Sequence[str] | None = None,
    relationship_types: Sequence[str] | None = None,
) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
    """Validate a parsed answer and keep what fits the vocabulary.

    Args:
        data: the parsed JSON object.
        entity_types: allowed entity types (any when None); others are dropped.
        relationship_types: allowed relationship types (any when None); others are dropped.

    Returns:
        ``(entities, relations)``. A relation whose endpoint was not listed as an entity
        adds that entity as a ``CONCEPT`` when the vocabulary has a generic type, else the
        relation is dropped.

    Raises:
        MalformedOutputError: ``data`` is not an object with an ``entities`` or
            ``relationships`` list.
    """
    if not isinstance(data, dict):
        raise MalformedOutputError(f"Expected a JSON object, got {type(data).__name__}.")
    raw_entities = data.get("entities", [])
    raw_relations = data.get("relationships", data.get("relations", []))
    if not isinstance(raw_entities, list) or not isinstance(raw_relations, list):
        raise MalformedOutputError(
            "'entities' and 'relationships' must be lists.", raw=json.dumps(data)[:2000]
        )
    if "entities" not in data and "relationships" not in data and "relations" not in data:
        raise MalformedOutputError(
            "The answer has neither 'entities' nor 'relationships'.", raw=json.dumps(data)[:2000]
        )
    allowed_r = {normalise_type(t): t for t in relationship_types} if relationship_types else None
    entities = _kept_entities(raw_entities, entity_types)
    generic = constrain_entity_type("CONCEPT", list(entity_types)) if entity_types else "CONCEPT"
    relations: dict[tuple[str, str, str], ExtractedRelation] = {}
    for item in raw_relations:
        if not isinstance(item, dict):
            continue
        source = _clean(item.get("source"), _MAX_NAME)
        target = _clean(item.get("target"), _MAX_NAME)
        rtype = normalise_type(str(item.get("type") or ""))
        if not source or not target or not rtype or source.casefold() == target.casefold():
            continue
        if allowed_r is not None:
            if rtype not in allowed_r:
                continue
            rtype = allowed_r[rtype]
        missing = [n for n in (source, target) if n.casefold() not in entities]
        if missing and generic is None:
            continue
        for name in missing:
            entities[name.casefold()] = ExtractedEntity(name, generic or "CONCEPT")
        key = (source.casefold(), rtype, target.casefold())
        relations.setdefault(
            key,
            ExtractedRelation(
                entities[source.casefold()].name,
                entities[target.casefold()].name,
                rtype,
                _clean(item.get("description"), _MAX_DESCRIPTION),
            ),
        )
    return list(entities.values()), list(relations.values())


class LLMExtractor:
    """Extracts entities and relations with an LLM, one call per chunk.

    Args:
        client: the ``LLMClient`` to call.
        concurrency: calls in flight at once (``LLMConfig.concurrency`` when None).
        max_tokens: answer budget per call (``LLMConfig.max_tokens`` when None).
    """

    def __init__(
        self, client: LLMClient, *, concurrency: int | None = None, max_tokens: int | None = None
    ) -> None:
        self.client = client
        self.concurrency = max(1, int(concurrency or client.config.concurrency))
        self.max_tokens = max_tokens
        self._semaphore: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def _limit(self) -> asyncio.Semaphore:
        # One semaphore per event loop: a semaphore used from two loops raises RuntimeError,
        # and the sync bridge may run calls on different loops.
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore[0] is not loop:
            self._semaphore = (loop, asyncio.Semaphore(self.concurrency))
        return self._semaphore[1]

    async def extract(
        self,
        chunks: Sequence[tuple[str, str]],
        *,
        entity_types: Sequence[str] | None = None,
        relationship_types: Sequence[str] | None = None,
    ) -> list[ChunkExtraction]:
        """See ``Extractor.extract``; never raises for a failing chunk."""
        schema = build_schema(entity_types, relationship_types)
        return list(
            await asyncio.gather(
                *(self._one(cid, text, schema, entity_types, relationship_types) for cid, text in chunks)
            )
        )

    async def _one(
        self,
        chunk_id: str,
        text: str,
        schema: dict[str, Any],
        entity_types: Sequence[str] | None,
        relationship_types: Sequence[str] | None,
    ) -> ChunkExtraction:
        prompt = build_prompt(text, entity_types, relationship_types)
        attempts = 1 + self.client.max_retries
        error = "no attempt made"
        async with self._limit():
            for _ in range(attempts):
                try:
                    data = await self.client.complete_json(prompt, schema=schema, max_tokens=self.max_tokens)
                    entities, relations = parse_extraction(
                        data, entity_types=entity_types, relationship_types=relationship_types
                    )
                    return ChunkExtraction(chunk_id=chunk_id, entities=entities, relations=relations)
                except MalformedOutputError as exc:
                    error = f"malformed output: {exc}"
                    continue  # ask again: sampling or a shorter answer may parse
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    # Provider failures were already retried inside the client; keep the chunk.
                    return ChunkExtraction(
                        chunk_id=chunk_id, failed=True, error=f"{type(exc).__name__}: {exc}"
                    )
        return ChunkExtraction(chunk_id=chunk_id, failed=True, error=error)
