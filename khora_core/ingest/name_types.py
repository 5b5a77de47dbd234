"""The offline extractor's entity types, from cheap cues (:mod:`khora_core.ingest.lexicon`):
titles, roles, common first names and speech verbs make a ``PERSON``; suffixes such as
Inc/Corp/University an ``ORGANIZATION``; place words, a small gazetteer and "in/near/from
X" a ``LOCATION``; "Project X" a ``PROJECT``; "X Summit" an ``EVENT``; anything else is a
``CONCEPT``."""

from __future__ import annotations

import re

from khora_core.ingest import lexicon as lx
from khora_core.ingest.name_words import Tok

__all__ = ["context_cues", "type_of"]

_LOCATION_PREPOSITIONS = frozenset("in near from across throughout to via outside inside around".split())
_ORG_OBJECT_VERBS = frozenset("founded acquired joined co-founded cofounded leads led runs ran".split())
# ", CEO of ...", ", the founder": a role in apposition marks the name before it as a person.
_APPOSITION_ROLE = re.compile(
    r",\s*(?:the\s+)?(?:" + "|".join(sorted(map(re.escape, lx.ROLE_WORDS), key=len, reverse=True)) + r")\b",
    re.I,
)


def context_cues(text: str, start: int, end: int, sent_start: int) -> set[str]:
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


def type_of(tokens: list[Tok], cues: set[str]) -> str:
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
