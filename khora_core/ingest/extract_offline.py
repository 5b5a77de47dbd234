"""``OfflineExtractor``: entities and relations from plain regular expressions.

No server, no model, no spaCy: it runs everywhere and fast, and is what Khora uses when
no LLM is configured. What it finds:

* names: runs of capitalised words, with inner connectors ("Bank of America",
  "Johnson & Johnson"), leading function words ("The", "In"), greetings and interjections
  ("Hey", "Wow") and titles ("Dr.") stripped; a lone capitalised word at the start of a
  sentence, or of a clause after a colon (a chat turn's "Speaker: Wow, ..."), only counts
  with supporting evidence: a capitalised use elsewhere, a known first name or place, a
  person verb, a possessive, a capital inside the word ("McRae"), or being the subject of
  the text's opening definition ("Tinnelva is a river ...");
* acronyms ("NASA", "IBM"); quarters and fiscal years ("Q1", "FY2024") are dates;
* dates (see :mod:`khora_core.ingest.dates`) as ``DATE`` entities, with the ISO form as
  description; bare month and weekday names are dates too ("May" only after in/on/by...).

Types come from cheap cues (:mod:`khora_core.ingest.lexicon`): titles, roles, common first
names and speech verbs make a ``PERSON``; suffixes such as Inc/Corp/University an
``ORGANIZATION``; place words, a small gazetteer and "in/near/from X" a ``LOCATION``;
"Project X" a ``PROJECT``; "X Summit" an ``EVENT``; anything else is a ``CONCEPT``.

Relations join entities that follow each other in a sentence, typed by the phrase between
them ("works at" -> ``WORKS_AT``, ", CEO of" -> ``CEO_OF``), raw phrase as description;
"Alice and Bob founded Acme" gives both founders. Dates take no part in relations.

:func:`keyword_links` (from :mod:`khora_core.ingest.keywords`, re-exported here) is the
cheap linker for non-core chunks.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from khora_core.ingest import lexicon as lx
from khora_core.ingest.chunking import split_sentences
from khora_core.ingest.dates import find_dates
from khora_core.ingest.extract_base import ChunkExtraction, ExtractedEntity, ExtractedRelation, normalise_type
from khora_core.ingest.keywords import KeywordMatcher, keyword_links
from khora_core.ingest.vocabulary import constrain_entity_type, constrain_relation_type

__all__ = [
    "KeywordMatcher",
    "OfflineExtractor",
    "constrain_entity_type",
    "constrain_relation_type",
    "keyword_links",
]

_TOKEN = re.compile(r"[^\W_](?:[\w&'’-]*\w)?|&")
_CONNECTORS = frozenset("of for and & de da del della van von der den du di la le y the".split())
#: The end of the text before a word that opens a clause after a colon (quotes allowed).
_AFTER_COLON = re.compile(r":[\s\"'“‘(]*$")
_LOCATION_PREPOSITIONS = frozenset("in near from across throughout to via outside inside around".split())
_ORG_OBJECT_VERBS = frozenset("founded acquired joined co-founded cofounded leads led runs ran".split())
_I_PRONOUN = re.compile(r"I(?:['’](?:m|ve|ll|d))?")
#: A lower-case letter followed by a capital inside one word: "McRae", "eBay", "YouTube".
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")
#: What follows the subject of a definition: optional parentheses, a copula and an article or
#: number ("is a", "( died 875) was a", "(Italian: ...) is the", "is a 2008 film").
_DEFINES = re.compile(r"(?:\s*\([^()]*\))*\s*(?:is|was|are|were)\s+(?:a|an|the|one|\d)\b")
_BARE_MAY_CONTEXT = frozenset("in on by since until till during of early late mid last next this".split())
_BARE_PREPOSITIONS = frozenset("in at on of from about near with for by into over under".split())
_ASYNC_THRESHOLD_CHARS = 20_000
# ", CEO of ...", ", the founder": a role in apposition marks the name before it as a person.
_APPOSITION_ROLE = re.compile(
    r",\s*(?:the\s+)?(?:" + "|".join(sorted(map(re.escape, lx.ROLE_WORDS), key=len, reverse=True)) + r")\b",
    re.I,
)
_SPECIFICITY = {"CONCEPT": 0}


def _strip_leading(parts: list[_Tok], cues: set[str]) -> list[_Tok]:
    """``parts`` without the leading function words, titles and roles, which are not part of
    the name; a title adds the cue ``title`` and a role ``role``."""
    while parts and (
        parts[0].low in lx.LEADING_STOPWORDS
        or parts[0].low in lx.PERSON_TITLES
        or parts[0].low in lx.ROLE_WORDS
        or parts[0].low in _CONNECTORS
    ):
        low = parts[0].low
        if low in lx.PERSON_TITLES and len(parts) > 1:
            cues.add("title")
        elif low in lx.ROLE_WORDS and len(parts) > 1 and parts[1].low not in _CONNECTORS:
            cues.add("role")
        parts = parts[1:]
    return parts


def _context_cues(text: str, start: int, end: int, sent_start: int) -> set[str]:
    """What the words around the name at ``text[start:end]`` say about its type."""
    cues: set[str] = set()
    after = text[end : end + 40]
    before_words = re.findall(r"[\w'-]+", text[max(sent_start, start - 40) : start].lower())
    follow = re.match(r"\W*?(\w+)", after)
    next_word = follow.group(1).lower() if follow else ""
    if next_word in lx.PERSON_VERBS or _APPOSITION_ROLE.match(after):
        cues.add("person_verb")
    if before_words:
        prev = before_words[-1]
        if prev in ("project", "initiative", "codenamed", "code-named"):
            cues.add("project")
        elif prev == "at" and len(before_words) > 1 and before_words[-2] in lx.WORK_WORDS:
            cues.add("org_context")
        elif prev in _ORG_OBJECT_VERBS or before_words[-2:] in (["employed", "by"], ["hired", "by"]):
            cues.add("org_context")
        elif prev in _LOCATION_PREPOSITIONS or before_words[-2:] in (
            ["based", "in"],
            ["headquartered", "in"],
        ):
            cues.add("location_context")
    return cues


def _lone_word_is_name(text: str, tok: _Tok, sent_start: int, mid_caps: set[str], cues: set[str]) -> bool:
    """Whether one capitalised word is a name: not too short, not an ignored or long
    acronym, and, at the start of a clause (where any word is capitalised), supported by a
    capitalised use elsewhere, a known first name or place, a person verb, a possessive, a
    capital inside the word ("McRae", "eBay"), or by being the subject of the text's opening
    definition ("Tinnelva is a river ...", "Teutberga (died 875) was a queen ...")."""
    if len(tok.text) < 2 or tok.low in lx.IGNORED_ACRONYMS or (tok.allcaps and not _acronym(tok.text)):
        return False
    if not _opens_clause(text, sent_start, tok.start) or tok.allcaps:
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


def _defines(text: str, tok: _Tok) -> bool:
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


def _opens_clause(text: str, sent_start: int, pos: int) -> bool:
    """Whether the word at ``pos`` opens its sentence, or a clause after a colon ("Melanie:
    Wow, that's cool", "Subject: Pilot request"): there its capital is no sign of a name."""
    before = text[sent_start:pos]
    return not re.search(r"\w", before) or _AFTER_COLON.search(before) is not None


class _Tok:
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


@dataclass
class _Mention:
    start: int
    end: int
    name: str
    type: str
    description: str | None = None
    cues: set[str] = field(default_factory=set)


def _tokens(text: str, start: int, end: int) -> list[_Tok]:
    out = []
    for m in _TOKEN.finditer(text, start, end):
        s, e = m.start(), m.end()
        if text[e - 2 : e] in ("'s", "’s") and e - s > 2:  # possessive: "Acme's" -> "Acme"
            e -= 2
        out.append(_Tok(s, e, text[s:e]))
    return out


def _joinable(text: str, left: _Tok, right: _Tok) -> bool:
    gap = text[left.end : right.start]
    if re.fullmatch(r"[ \t]+", gap):
        return True
    # "Dr. Jane", "J. R. Tolkien", "St. Louis", "Acme Inc. Labs": a period after a title/initial.
    return bool(re.fullmatch(r"\.[ \t]+", gap)) and (
        len(left.text) == 1 or left.low in lx.PERSON_TITLES or left.low == "st"
    )


def _splits_at_and(left: list[_Tok], right: list[_Tok]) -> bool:
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


def _type_of(tokens: list[_Tok], cues: set[str]) -> str:
    words = [t.low for t in tokens]
    name = " ".join(words)
    first, last = words[0], words[-1]
    if len(tokens) == 1 and tokens[0].allcaps and len(first) <= 6:
        if re.fullmatch(r"[qh][1-4]|fy\d{2,4}", first):
            return "DATE"
        return (
            "CONCEPT" if first in lx.CONCEPT_ACRONYMS or any(c.isdigit() for c in first) else "ORGANIZATION"
        )
    if "title" in cues or "role" in cues:
        return "PERSON"
    if first in lx.PROJECT_WORDS or last in lx.PROJECT_WORDS or "project" in cues:
        return "PROJECT"
    if last in lx.EVENT_WORDS:
        return "EVENT"
    if last in lx.ORG_SUFFIXES or first in lx.ORG_PREFIXES or "&" in words:
        return "ORGANIZATION"
    if name in lx.GAZETTEER or last in lx.LOCATION_SUFFIXES:
        return "LOCATION"
    if first in lx.LOCATION_PREFIXES and len(tokens) > 1 and "person_verb" not in cues:
        return "LOCATION"
    if "person_verb" in cues or (first in lx.FIRST_NAMES and len(tokens) <= 3):
        return "PERSON"
    if "org_context" in cues:
        return "ORGANIZATION"
    if "location_context" in cues:
        return "LOCATION"
    return "CONCEPT"


class OfflineExtractor:
    """Regex entity and relation extraction (see the module docstring).

    Args:
        max_relations_per_sentence: cap on relations from one sentence (long lists of
            names would otherwise produce a quadratic number).
    """

    def __init__(self, *, max_relations_per_sentence: int = 12) -> None:
        self.max_relations_per_sentence = max_relations_per_sentence

    async def extract(
        self,
        chunks: Sequence[tuple[str, str]],
        *,
        entity_types: Sequence[str] | None = None,
        relationship_types: Sequence[str] | None = None,
    ) -> list[ChunkExtraction]:
        """See ``Extractor.extract``. Large inputs run in a worker thread."""
        if sum(len(text) for _, text in chunks) > _ASYNC_THRESHOLD_CHARS:
            return await asyncio.to_thread(self._extract_all, chunks, entity_types, relationship_types)
        return self._extract_all(chunks, entity_types, relationship_types)

    def _extract_all(
        self,
        chunks: Sequence[tuple[str, str]],
        entity_types: Sequence[str] | None,
        relationship_types: Sequence[str] | None,
    ) -> list[ChunkExtraction]:
        out = []
        for chunk_id, text in chunks:
            try:
                out.append(
                    self.extract_chunk(
                        chunk_id, text, entity_types=entity_types, relationship_types=relationship_types
                    )
                )
            except Exception as exc:  # a regex corner case must not lose the document
                out.append(
                    ChunkExtraction(chunk_id=chunk_id, failed=True, error=f"{type(exc).__name__}: {exc}")
                )
        return out

    def extract_chunk(
        self,
        chunk_id: str,
        text: str,
        *,
        entity_types: Sequence[str] | None = None,
        relationship_types: Sequence[str] | None = None,
    ) -> ChunkExtraction:
        """Extract one chunk synchronously."""
        sentences = [(s, e, _tokens(text, s, e)) for s, e in split_sentences(text)]
        mid_caps = {
            t.low
            for s, _, tokens in sentences
            for t in tokens
            if t.cap and not _opens_clause(text, s, t.start)
        }  # capitalised words seen away from a sentence or clause start: evidence they are names
        per_sentence = [self._mentions(text, s, e, tokens, mid_caps) for s, e, tokens in sentences]
        self._unify(per_sentence)
        allowed_e = [normalise_type(t) for t in entity_types] if entity_types else None
        allowed_r = [normalise_type(t) for t in relationship_types] if relationship_types else None

        entities: dict[str, ExtractedEntity] = {}
        votes: dict[str, Counter[str]] = {}
        relations: dict[tuple[str, str, str], ExtractedRelation] = {}
        for mentions in per_sentence:
            kept = []
            for m in mentions:
                etype = constrain_entity_type(m.type, allowed_e) if allowed_e else m.type
                if etype is None:
                    continue
                key = m.name.casefold()
                votes.setdefault(key, Counter())[etype] += 1
                entities.setdefault(key, ExtractedEntity(m.name, etype, m.description))
                kept.append(m)
            for rel in self._relations(text, kept, allowed_r):
                relations.setdefault((rel.source.casefold(), rel.type, rel.target.casefold()), rel)
        for key, entity in entities.items():
            ranked = sorted(votes[key].items(), key=lambda kv: (-kv[1], _SPECIFICITY.get(kv[0], 1) * -1))
            entity.type = ranked[0][0]
        return ChunkExtraction(
            chunk_id=chunk_id, entities=list(entities.values()), relations=list(relations.values())
        )

    # -- mentions -------------------------------------------------------------------------

    def _mentions(
        self, text: str, start: int, end: int, sentence_tokens: list[_Tok], mid_caps: set[str]
    ) -> list[_Mention]:
        found: list[_Mention] = []
        date_spans = []
        for d in find_dates(text, start, end):
            if d.kind == "md" and d.text.startswith("May") and not re.search(r"\d", d.text):
                continue
            date_spans.append((d.start, d.end))
            found.append(_Mention(d.start, d.end, d.text.strip(), "DATE", d.iso))
        tokens = [t for t in sentence_tokens if not any(s <= t.start < e for s, e in date_spans)]
        i = 0
        while i < len(tokens):
            if not tokens[i].cap:
                i += 1
                continue
            group = [i]
            j = i
            while j + 1 < len(tokens):
                nxt = tokens[j + 1]
                if nxt.cap and _joinable(text, tokens[j], nxt):
                    j += 1
                    group.append(j)
                    continue
                # "Bank of America", "Bank of the West": connectors between capitalised words.
                k = j + 1
                while k < len(tokens) and tokens[k].low in _CONNECTORS and not tokens[k].cap and k - j <= 2:
                    k += 1
                if (
                    k > j + 1
                    and k < len(tokens)
                    and tokens[k].cap
                    and all(_joinable(text, tokens[x], tokens[x + 1]) for x in range(j, k))
                ):
                    group.extend(range(j + 1, k + 1))
                    j = k
                    continue
                break
            found.extend(self._name_mentions(text, tokens, group, start, mid_caps))
            i = j + 1
        found.sort(key=lambda m: m.start)
        return found

    def _name_mentions(
        self, text: str, tokens: list[_Tok], group: list[int], sent_start: int, mid_caps: set[str]
    ) -> list[_Mention]:
        parts = [tokens[g] for g in group]
        # "Alice and Bob" are two people; "Department of Health and Human Services" is one name.
        cut = next((x for x, p in enumerate(parts) if p.low == "and"), None)
        if cut is not None and _splits_at_and(parts[:cut], parts[cut + 1 :]):
            left = [g for g in group[:cut]]
            right = [g for g in group[cut + 1 :]]
            return self._name_mentions(text, tokens, left, sent_start, mid_caps) + (
                self._name_mentions(text, tokens, right, sent_start, mid_caps) if right else []
            )
        cues: set[str] = set()
        parts = _strip_leading(parts, cues)
        if not parts:
            return []
        out: list[_Mention] = []
        # Month and weekday names at either end are dates of their own.
        while parts and (
            parts[0].low in lx.WEEKDAYS or (parts[0].low in lx.MONTHS and len(parts[0].text) > 3)
        ):
            out.append(_Mention(parts[0].start, parts[0].end, parts[0].text, "DATE"))
            parts = parts[1:]
        if not parts:
            return out
        if len(parts) == 1 and parts[0].text == "May":
            before = re.findall(r"\w+", text[max(sent_start, parts[0].start - 12) : parts[0].start])
            if before and before[-1].lower() in _BARE_MAY_CONTEXT:
                out.append(_Mention(parts[0].start, parts[0].end, "May", "DATE"))
            return out
        if all(p.allcaps for p in parts) and len(parts) >= 2:
            if len(parts) >= 3:
                return out  # a shouted heading, not a name
            for p in parts:
                out.extend(self._name_mentions(text, [p], [0], sent_start, mid_caps))
            return out
        first = parts[0]
        name = text[first.start : parts[-1].end].rstrip(".")
        cues |= _context_cues(text, first.start, parts[-1].end, sent_start)
        if len(parts) == 1 and not _lone_word_is_name(text, first, sent_start, mid_caps, cues):
            return out
        out.append(_Mention(first.start, parts[-1].end, name, _type_of(parts, cues), cues=cues))
        return out

    def _unify(self, per_sentence: list[list[_Mention]]) -> None:
        """Within a chunk, "Smith" after "Jane Smith" (a person) is Jane Smith."""
        people: dict[str, str] = {}
        for mentions in per_sentence:
            for m in mentions:
                if m.type == "PERSON" and " " in m.name:
                    words = m.name.split()
                    people.setdefault(words[-1].lower(), m.name)
                    people.setdefault(words[0].lower(), m.name)
        for mentions in per_sentence:
            for m in mentions:
                if " " not in m.name and m.type != "DATE" and m.name.lower() in people:
                    m.name, m.type = people[m.name.lower()], "PERSON"

    # -- relations ------------------------------------------------------------------------

    def _relations(
        self, text: str, mentions: list[_Mention], allowed: list[str] | None
    ) -> list[ExtractedRelation]:
        ents = [m for m in mentions if m.type != "DATE"]
        if len(ents) < 2:
            return []
        runs: list[list[_Mention]] = [[ents[0]]]
        links: list[tuple[int, int, str, str]] = []  # (source run, target run, label, raw phrase)
        for a, b in pairwise(ents):
            raw = text[a.end : b.start]
            phrase = raw.strip(" \t\n,.;:-–—()\"'")
            words = re.findall(r"[\w'’&-]+", phrase.lower())
            if not words or words in (["as", "well", "as"],) or set(words) <= {"and", "or", "&"}:
                runs[-1].append(b)  # coordination: b shares a's relations
                continue
            source = len(runs) - 1
            if words[0] in ("and", "but", "then") and len(words) > 1 and links:
                # "A works at B and leads C": the clause after "and" keeps A as its subject.
                source = links[-1][0]
                words = words[1:]
            # Auxiliaries, articles and adverbs carry no relation meaning; a label of more than
            # three remaining words is a clause, not a relation name.
            last = len(words) - 1
            words = [
                w for x, w in enumerate(words) if w not in lx.RELATION_FILLER or (w == "to" and x == last)
            ]
            if words in (["'s"], ["’s"], ["s"]):
                # "Babbage's Analytical Engine": a possessive says the first has the second.
                label = "HAS"
            elif (
                words
                and all(w in _BARE_PREPOSITIONS or w == "to" for w in words)
                and not (len(words) == 1 and words[0] in ("in", "at", "near") and b.type == "LOCATION")
            ):
                # Prepositions alone ("to", "of", "for") name no relation.
                label = "RELATED_TO"
            elif len(words) == 1 and words[0] in _BARE_PREPOSITIONS:
                # "Bob in Paris" says where Bob is; other bare prepositions name no relation.
                label = (
                    "LOCATED_IN"
                    if b.type == "LOCATION" and words[0] in ("in", "at", "near")
                    else "RELATED_TO"
                )
            else:
                label = (normalise_type(" ".join(words)) if 0 < len(words) <= 3 else "") or "RELATED_TO"
            links.append((source, len(runs), label, " ".join(phrase.split())[:200]))
            runs.append([b])
        out: list[ExtractedRelation] = []
        for source, target, label, raw in links:
            rtype = constrain_relation_type(label, allowed) if allowed else label
            if rtype is None:
                continue
            for src in runs[source]:
                for tgt in runs[target]:
                    if src.name.casefold() != tgt.name.casefold():
                        out.append(ExtractedRelation(src.name, tgt.name, rtype, raw or None))
        return out[: self.max_relations_per_sentence]
