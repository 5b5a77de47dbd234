from __future__ import annotations

import pytest

from khora_core.errors import LLMError
from khora_core.llm.structured import (
    MalformedOutputError,
    parse_json_object,
    repair_truncated_json,
    strip_code_fences,
)


def test_plain_and_fenced_json() -> None:
    assert parse_json_object('{"a": 1}') == {"a": 1}
    assert parse_json_object('```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    assert parse_json_object('Sure! Here it is:\n```\n{"b": "x"}\n```\nAnything else?') == {"b": "x"}
    assert strip_code_fences("no fences") == "no fences"


def test_first_object_after_prose_with_braces_in_strings() -> None:
    text = 'The answer {as requested} is {"name": "a {curly} \\"quoted\\" name", "n": 2} and {"other": 1}'
    assert parse_json_object(text) == {"name": 'a {curly} "quoted" name', "n": 2}


def test_truncated_output_keeps_complete_items() -> None:
    text = '{"entities": [{"name": "Alice", "type": "PERSON"}, {"name": "Bo'
    assert parse_json_object(text) == {"entities": [{"name": "Alice", "type": "PERSON"}]}
    text = '```json\n{"entities": [{"name": "Alice"}], "relationships": [{"source": "Alice", "tar'
    assert parse_json_object(text) == {"entities": [{"name": "Alice"}], "relationships": []}
    assert repair_truncated_json('{"a": 1, "b": ') == {"a": 1}


@pytest.mark.parametrize("text", ["", "   ", "no json here", "[1, 2, 3]", "{not json at all"])
def test_unrecoverable_output_raises(text: str) -> None:
    with pytest.raises(MalformedOutputError) as info:
        parse_json_object(text)
    assert isinstance(info.value, LLMError)
