"""The Porter stemmer that PostgreSQL's BM25 terms go through agrees with SQLite FTS5's
``porter`` tokenizer (the embedded store's), word for word."""

from __future__ import annotations

import json
import re
import sqlite3
from importlib import resources

import pytest

from khora_core.storage.porter import stem

#: Examples from Porter's paper, with the stems it gives.
PAPER = {
    "caresses": "caress", "ponies": "poni", "ties": "ti", "caress": "caress", "cats": "cat",
    "feed": "feed", "agreed": "agre", "plastered": "plaster", "bled": "bled", "motoring": "motor",
    "sing": "sing", "conflated": "conflat", "troubled": "troubl", "sized": "size", "hopping": "hop",
    "tanned": "tan", "falling": "fall", "hissing": "hiss", "fizzed": "fizz", "failing": "fail",
    "filing": "file", "happy": "happi", "sky": "sky", "relational": "relat", "conditional": "condit",
    "rational": "ration", "valenci": "valenc", "digitizer": "digit", "radicalli": "radic",
    "vietnamization": "vietnam", "predication": "predic", "operator": "oper", "feudalism": "feudal",
    "decisiveness": "decis", "hopefulness": "hope", "callousness": "callous", "formaliti": "formal",
    "sensitiviti": "sensit", "triplicate": "triplic", "formative": "form", "formalize": "formal",
    "electriciti": "electr", "electrical": "electr", "hopeful": "hope", "goodness": "good",
    "revival": "reviv", "allowance": "allow", "inference": "infer", "airliner": "airlin",
    "gyroscopic": "gyroscop", "adjustable": "adjust", "defensible": "defens", "irritant": "irrit",
    "replacement": "replac", "adjustment": "adjust", "dependent": "depend", "adoption": "adopt",
    "homologou": "homolog", "communism": "commun", "activate": "activ", "angulariti": "angular",
    "homologous": "homolog", "effective": "effect", "bowdlerize": "bowdler", "probate": "probat",
    "rate": "rate", "cease": "ceas", "controll": "control", "roll": "roll",
}  # fmt: skip


@pytest.mark.parametrize(("word", "expected"), sorted(PAPER.items()))
def test_the_papers_examples(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_other_tokens_are_left_alone() -> None:
    assert [stem(w) for w in ("is", "a", "café", "2024", "x86", "")] == ["is", "a", "café", "2024", "x86", ""]


def _sqlite_porter(words: list[str]) -> dict[str, str]:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter ascii')")
    con.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    out = {}
    for word in words:
        con.execute("DELETE FROM t")
        con.execute("INSERT INTO t VALUES (?)", (word,))
        (term,) = con.execute("SELECT term FROM v").fetchone()
        out[word] = term
    return out


def test_agrees_with_sqlite_fts5_porter_on_the_sample_corpus() -> None:
    corpus = json.loads(resources.files("khora_core.sample").joinpath("corpus.json").read_text())
    words = sorted(
        {
            w
            for text in re.findall(r'"[^"]*"', json.dumps(corpus))
            for w in re.findall(r"[a-z]+", text.lower())
        }
    )
    words += sorted(PAPER)
    assert len(words) > 1000
    expected = _sqlite_porter(words)
    assert {w: stem(w) for w in words} == expected
