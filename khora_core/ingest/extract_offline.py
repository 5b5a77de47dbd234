"""``OfflineExtractor``: entities and relations from plain regular expressions.

No server, no model, no spaCy: it runs everywhere and fast, and is what Khora uses when
no LLM is configured. What it finds:

* names: runs of capitalised words, with inner connectors ("Bank of America",
  "Johnson & Johnson"), leading function words, greetings and titles stripped, and a lone
  capitalised word at the start of a sentence or a chat turn's clause kept only with
  evidence that it is a name (:mod:`khora_core.ingest.name_words`);
* acronyms ("NASA", "IBM"); quarters and fiscal years ("Q1", "FY2024") are dates;
* dates (see :mod:`khora_core.ingest.dates`) as ``DATE`` entities, with the ISO form as
  description; bare month and weekday names are dates too ("May" only after in/on/by...).

Types come from cheap cues around the name (:mod:`khora_core.ingest.name_types`).

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
from khora_core.ingest import name_words as nw
from khora_core.ingest.chunking import split_sentences
from khora_core.ingest.dates import find_dates
from khora_core.ingest.extract_base import ChunkExtraction, ExtractedEntity, ExtractedRelation, normalise_type
from khora_core.ingest.keywords import KeywordMatcher, keyword_links
from khora_core.ingest.name_types import context_cues, type_of
from khora_core.ingest.vocabulary import constrain_entity_type, constrain_relation_type

__all__ = [
    "KeywordMatcher",
    "OfflineExtractor",
    "constrain_entity_type",
    "constrain_relation_type",
    "keyword_links",
]

_BARE_MAY_CONTEXT = frozenset("in on by since until till during of early late mid last next this".split())
_BARE_PREPOSITIONS = frozenset("in at on of from about near with for by into over under".split())
_ASYNC_THRESHOLD_CHARS = 20_000
_SPECIFICITY = {"CONCEPT": 0}


@dataclass
class _Mention:
    start: int
    end: int
    name: str
    type: str
    description: str | None = None
    cues: set[str] = field(default_factory=set)


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
        sentences = [(s, e, nw.tokens(text, s, e)) for s, e in split_sentences(text)]
        mid_caps = {
            t.low
            for s, _, tokens in sentences
            for t in tokens
            if t.cap and not nw.opens_clause(text, s, t.start)
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
        self, text: str, start: int, end: int, sentence_tokens: list[nw.Tok], mid_caps: set[str]
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
                if nxt.cap and nw.joinable(text, tokens[j], nxt):
                    j += 1
                    group.append(j)
                    continue
                # "Bank of America", "Bank of the West": connectors between capitalised words.
                k = j + 1
                while k < len(tokens) and tokens[k].low in nw.CONNECTORS and not tokens[k].cap and k - j <= 2:
                    k += 1
                if (
                    k > j + 1
                    and k < len(tokens)
                    and tokens[k].cap
                    and all(nw.joinable(text, tokens[x], tokens[x + 1]) for x in range(j, k))
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
        self, text: str, tokens: list[nw.Tok], group: list[int], sent_start: int, mid_caps: set[str]
    ) -> list[_Mention]:
        parts = [tokens[g] for g in group]
        # "Alice and Bob" are two people; "Department of Health and Human Services" is one name.
        cut = next((x for x, p in enumerate(parts) if p.low == "and"), None)
        if cut is not None and nw.splits_at_and(parts[:cut], parts[cut + 1 :]):
            left = [g for g in group[:cut]]
            right = [g for g in group[cut + 1 :]]
            return self._name_mentions(text, tokens, left, sent_start, mid_caps) + (
                self._name_mentions(text, tokens, right, sent_start, mid_caps) if right else []
            )
        cues: set[str] = set()
        parts = nw.strip_leading(parts, cues)
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
        cues |= context_cues(text, first.start, parts[-1].end, sent_start)
        if len(parts) == 1 and not nw.lone_word_is_name(text, first, sent_start, mid_caps, cues):
            return out
        out.append(_Mention(first.start, parts[-1].end, name, type_of(parts, cues), cues=cues))
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
