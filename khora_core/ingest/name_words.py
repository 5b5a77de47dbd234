"""Which capitalised words make a name: the offline extractor's words, how they join into
a run ("Dr. Jane", "Bank of America"), what is stripped from its front ("The", "Hey",
titles, roles) and what makes one capitalised word a name where any word would be
capitalised (the start of a sentence, or of a clause after a colon).

A lone capitalised word opening a clause counts only with supporting evidence: a
capitalised use elsewhere, a known first name or place, a person verb, a possessive, a
capital inside the word ("McRae"), or being the subject of the text's opening definition
("Tinnelva is a river ..."). All-caps words are acronyms up to six letters, or in
hyphenated parts of at most six ("KAGH-FM").
"""

from __future__ import annotations

import re

from khora_core.ingest import lexicon as lx

__all__ = [
    "CONNECTORS",
    "Tok",
    "joinable",
    "lone_word_is_name",
    "opens_clause",
    "splits_at_and",
    "strip_leading",
    "tokens",
]

_TOKEN = re.compile(r"[^\W_](?:[\w&'’-]*\w)?|&")
CONNECTORS = frozenset("of for and & de da del della van von der den du di la le y the".split())
#: The end of the text before a word that opens a clause after a colon (quotes allowed).
_AFTER_COLON = re.compile(r":[\s\"'“‘(]*$")
_I_PRONOUN = re.compile(r"I(?:['’](?:m|ve|ll|d))?")
#: A lower-case letter followed by a capital inside one word: "McRae", "eBay", "YouTube".
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")
#: What follows the subject of a definition: optional parentheses, a copula and an article or
#: number ("is a", "( died 875) was a", "(Italian: ...) is the", "is a 2008 film").
_DEFINES = re.compile(r"(?:\s*\([^()]*\))*\s*(?:is|was|are|were)\s+(?:a|an|the|one|\d)\b")


class Tok:
    """A word of a sentence, with the case facts the name rules read (computed once)."""

    __slots__ = ("cap", "end", "low", "start", "text")

    def __init__(self, start: int, end: int, text: str) -> None:
        self.start, self.end, self.text = start, end, text
        self.low = text.lower()
        # The pronoun "I" ("I've", "I'm") never starts or continues a name; "eBay" and "iPhone" do.
        self.cap = _I_PRONOUN.fullmatch(text) is None and (
            text[0].isupper() or (text[0].islower() and any(c.isupper() for c in text[1:]))
        )

    @property
    def allcaps(self) -> bool:
        letters = [c for c in self.text if c.isalpha()]
        return bool(letters) and all(c.isupper() for c in letters)


def tokens(text: str, start: int, end: int) -> list[Tok]:
    out = []
    for m in _TOKEN.finditer(text, start, end):
        s, e = m.start(), m.end()
        if text[e - 2 : e] in ("'s", "’s") and e - s > 2:  # possessive: "Acme's" -> "Acme"
            e -= 2
        out.append(Tok(s, e, text[s:e]))
    return out


def joinable(text: str, left: Tok, right: Tok) -> bool:
    gap = text[left.end : right.start]
    if re.fullmatch(r"[ \t]+", gap):
        return True
    # "Dr. Jane", "J. R. Tolkien", "St. Louis", "Acme Inc. Labs": a period after a title/initial.
    return bool(re.fullmatch(r"\.[ \t]+", gap)) and (
        len(left.text) == 1 or left.low in lx.PERSON_TITLES or left.low == "st"
    )


def splits_at_and(left: list[Tok], right: list[Tok]) -> bool:
    """Whether "X and Y" names two things rather than one ("Department of Health and Human Services")."""
    if not any(p.low in ("of", "for") for p in left):
        return True
    right_low = [p.low for p in right]
    return bool(right_low) and (
        "&" in right_low
        or "of" in right_low
        or right_low[0] in lx.FIRST_NAMES
        or " ".join(right_low) in lx.GAZETTEER
        or left[-1].low in lx.GAZETTEER
    )


def strip_leading(parts: list[Tok], cues: set[str]) -> list[Tok]:
    """``parts`` without the leading function words, titles and roles, which are not part of
    the name; a title adds the cue ``title`` and a role ``role``."""
    while parts and (
        parts[0].low in lx.LEADING_STOPWORDS
        or parts[0].low in lx.PERSON_TITLES
        or parts[0].low in lx.ROLE_WORDS
        or parts[0].low in CONNECTORS
    ):
        low = parts[0].low
        if low in lx.PERSON_TITLES and len(parts) > 1:
            cues.add("title")
        elif low in lx.ROLE_WORDS and len(parts) > 1 and parts[1].low not in CONNECTORS:
            cues.add("role")
        parts = parts[1:]
    return parts


def lone_word_is_name(text: str, tok: Tok, sent_start: int, mid_caps: set[str], cues: set[str]) -> bool:
    """Whether one capitalised word is a name: not too short, not an ignored or long
    acronym, and, at the start of a clause (where any word is capitalised), supported by a
    capitalised use elsewhere, a known first name or place, a person verb, a possessive, a
    capital inside the word ("McRae", "eBay"), or by being the subject of the text's opening
    definition ("Tinnelva is a river ...", "Teutberga (died 875) was a queen ...")."""
    if len(tok.text) < 2 or tok.low in lx.IGNORED_ACRONYMS or (tok.allcaps and not _acronym(tok.text)):
        return False
    if not opens_clause(text, sent_start, tok.start) or tok.allcaps:
        return True
    return (
        tok.low in mid_caps
        or tok.low in lx.FIRST_NAMES
        or tok.low in lx.GAZETTEER
        or "person_verb" in cues
        or text[tok.end : tok.end + 2] in ("'s", "’s")
        or _INNER_CAPITAL.search(tok.text) is not None
        or _defines(text, tok)
    )


def _defines(text: str, tok: Tok) -> bool:
    """Whether ``tok`` opens the text as the subject of a definition ("Tinnelva is a river
    ..."), and the text never uses the word in lower case (as "Life is a journey; life ..."
    would)."""
    if re.search(r"\w", text[: tok.start]) or _DEFINES.match(text, tok.end) is None:
        return False
    return re.search(rf"\b{re.escape(tok.low)}\b", text[tok.end :]) is None


def _acronym(word: str) -> bool:
    """An all-caps word that reads as an acronym rather than a shouted word: at most six
    letters, or hyphenated parts of at most six ("KAGH-FM", "COVID-19")."""
    return all(len(part) <= 6 for part in word.split("-"))


def opens_clause(text: str, sent_start: int, pos: int) -> bool:
    """Whether the word at ``pos`` opens its sentence, or a clause after a colon ("Melanie:
    Wow, that's cool", "Subject: Pilot request"): there its capital is no sign of a name."""
    before = text[sent_start:pos]
    return not re.search(r"\w", before) or _AFTER_COLON.search(before) is not None
