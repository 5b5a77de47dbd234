from __future__ import annotations

import json
from typing import Any

import pytest

from khora_core.config import LLMConfig
from khora_core.ingest.extract_llm import LLMExtractor, build_prompt, build_schema, parse_extraction
from khora_core.llm.client import LLMClient
from khora_core.llm.structured import MalformedOutputError
from tests.unit.llm.scripted import HTTPStatusError as _HTTPError
from tests.unit.llm.scripted import Script

GOOD = {
    "entities": [
        {"name": "Alice Chen", "type": "person", "description": "CTO"},
        {"name": "Acme Corp", "type": "ORGANIZATION"},
        {"name": "", "type": "PERSON"},
        {"name": "Mars", "type": "PLANET"},
    ],
    "relationships": [
        {"source": "Alice Chen", "target": "Acme Corp", "type": "works at", "description": "since 2021"},
        {"source": "Alice Chen", "target": "Berlin", "type": "LIVES_IN"},
        {"source": "Alice Chen", "target": "Alice Chen", "type": "IS"},
        {"source": "Acme Corp", "type": "OWNS"},
    ],
}


def test_parse_extraction_normalises_and_fills_endpoints() -> None:
    entities, relations = parse_extraction(GOOD)
    assert [(e.name, e.type) for e in entities] == [
        ("Alice Chen", "PERSON"),
        ("Acme Corp", "ORGANIZATION"),
        ("Mars", "PLANET"),
        ("Berlin", "CONCEPT"),  # endpoint added
    ]
    assert [(r.source, r.type, r.target, r.description) for r in relations] == [
        ("Alice Chen", "WORKS_AT", "Acme Corp", "since 2021"),
        ("Alice Chen", "LIVES_IN", "Berlin", None),
    ]


def test_parse_extraction_drops_out_of_vocabulary_items() -> None:
    entities, relations = parse_extraction(
        GOOD, entity_types=["Person", "Organization"], relationship_types=["WORKS_AT"]
    )
    assert [(e.name, e.type) for e in entities] == [("Alice Chen", "Person"), ("Acme Corp", "Organization")]
    assert [(r.source, r.type, r.target) for r in relations] == [("Alice Chen", "WORKS_AT", "Acme Corp")]


@pytest.mark.parametrize("bad", [[], {"entities": "x"}, {"answer": 1}])
def test_parse_extraction_rejects_wrong_shapes(bad: Any) -> None:
    with pytest.raises(MalformedOutputError):
        parse_extraction(bad)


def test_prompt_and_schema_carry_the_vocabulary() -> None:
    prompt = build_prompt("Bob met Carol.", ["PERSON"], ["MET"])
    assert "PERSON" in prompt and "MET" in prompt and prompt.rstrip().endswith("JSON:")
    assert "Text: Bob met Carol." in prompt
    schema = build_schema(["PERSON"], ["MET"])
    items = schema["properties"]["entities"]["items"]
    assert items["properties"]["type"]["enum"] == ["PERSON"]


def _extractor(script: Script, retries: int = 1) -> LLMExtractor:
    client = LLMClient(LLMConfig(model="openai/x", max_retries=retries), acompletion=script, backoff_base_s=0)
    return LLMExtractor(client, concurrency=2)


async def test_malformed_answer_is_asked_again() -> None:
    script = Script("no json, sorry", json.dumps(GOOD))
    [result] = await _extractor(script).extract([("c1", "Alice Chen works at Acme Corp.")])
    assert not result.failed and result.chunk_id == "c1"
    assert {e.name for e in result.entities} >= {"Alice Chen", "Acme Corp"}
    assert len(script.calls) == 2


async def test_failing_chunks_are_flagged_not_raised() -> None:
    script = Script("nope", "still nope", _HTTPError(400), json.dumps(GOOD))
    extractor = _extractor(script, retries=1)
    extractor.concurrency = 1
    results = await extractor.extract([("a", "text a"), ("b", "text b"), ("c", "text c")])
    assert [r.chunk_id for r in results] == ["a", "b", "c"]
    assert results[0].failed and "malformed" in (results[0].error or "")
    assert results[1].failed and "400" in (results[1].error or "")
    assert not results[2].failed and results[2].relations
