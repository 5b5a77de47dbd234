"""Metadata keys that are not simple names (dots, spaces, quotes) are filterable as quoted
segments, and SQLite selects what the in-memory evaluator selects for them."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from khora_core.errors import RecallFilterValidationError
from khora_core.filters import RecallFilter, compile_sqlite
from khora_core.filters.tree import metadata_key, metadata_path

RECORDS: dict[str, dict[str, Any]] = {
    "dotted": {"a.b": 1, "page label": "intro"},
    "nested": {"a": {"b": 1}, "page label": "body"},
    "quoted": {'say "hi"': True, "n": {"in ner": 5}},
    "unicode": {"clé": "valeur", "a\\b": [1, 2]},
}


@pytest.mark.parametrize(
    ("segments", "key"),
    [
        (("a.b",), 'metadata."a.b"'),
        (("page label",), 'metadata."page label"'),
        (('say "hi"',), 'metadata."say \\"hi\\""'),
        (("n", "in ner"), 'metadata.n."in ner"'),
        (("team", "name"), "metadata.team.name"),
    ],
)
def test_metadata_key_round_trips(segments: tuple[str, ...], key: str) -> None:
    assert metadata_key(*segments) == key
    assert metadata_path(key) == segments


@pytest.mark.parametrize(
    ("filter_", "expected"),
    [
        ({metadata_key("a.b"): 1}, {"dotted"}),
        ({"metadata.a.b": 1}, {"nested"}),
        ({metadata_key("page label"): {"$in": ["intro", "body"]}}, {"dotted", "nested"}),
        ({metadata_key('say "hi"'): True}, {"quoted"}),
        ({metadata_key("n", "in ner"): {"$gte": 5}}, {"quoted"}),
        ({metadata_key("clé"): "valeur"}, {"unicode"}),
        ({metadata_key("a\\b"): [1, 2]}, {"unicode"}),
        ({metadata_key("a.b"): {"$exists": False}}, {"nested", "quoted", "unicode"}),
        ({metadata_key("page label"): {"$ne": "intro"}}, {"nested", "quoted", "unicode"}),
    ],
)
def test_quoted_keys_select_the_same_on_sqlite_and_in_memory(
    filter_: dict[str, Any], expected: set[str]
) -> None:
    parsed = RecallFilter.parse(filter_)
    in_memory = {rid for rid, meta in RECORDS.items() if parsed.matches({"metadata": meta})}
    compiled = compile_sqlite(parsed)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE chunks (id TEXT, metadata TEXT)")
    conn.executemany("INSERT INTO chunks VALUES (?, ?)", [(rid, json.dumps(m)) for rid, m in RECORDS.items()])
    rows = conn.execute(f"SELECT c.id FROM chunks AS c WHERE {compiled.sql}", compiled.params).fetchall()
    assert in_memory == expected
    assert {r[0] for r in rows} == expected


@pytest.mark.parametrize(
    "key", ["metadata.page label", 'metadata."unterminated', 'metadata."".a', "metadata.a..b", "metadata."]
)
def test_malformed_paths_are_rejected_with_bad_path(key: str) -> None:
    with pytest.raises(RecallFilterValidationError) as info:
        RecallFilter.parse({key: 1})
    assert info.value.errors[0]["code"] == "bad_path"
