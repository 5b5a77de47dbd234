"""Fit guessed entity and relationship types into a caller's vocabulary.

``remember(..., entity_types=[...], relationship_types=[...])`` restricts what the graph
may hold. The offline extractor guesses its own types, so they are mapped onto the
caller's list: exactly, through synonyms (``ORGANIZATION`` -> ``ORG``/``COMPANY``) or shared
word stems (``WORKED_AT`` -> ``WORKS_AT``), then to a generic type; otherwise dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from khora_core.ingest import lexicon as lx
from khora_core.ingest.extract_base import normalise_type

__all__ = ["constrain_entity_type", "constrain_relation_type"]


def constrain_entity_type(guess: str, allowed: Sequence[str]) -> str | None:
    """Map a guessed type onto the caller's vocabulary (exact, synonym, then a generic type).

    Returns None when the vocabulary has no fitting type (the entity is dropped).
    """
    allowed_set = {normalise_type(a): a for a in allowed}
    guess = normalise_type(guess)
    if guess in allowed_set:
        return allowed_set[guess]
    for family in (lx.TYPE_SYNONYMS.get(guess, frozenset()), lx.TYPE_SYNONYMS["CONCEPT"]):
        for key, original in allowed_set.items():
            if key in family:
                return original
    return None


def _stem(word: str) -> str:
    for suffix in ("ies", "ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return word.rstrip("e")


def constrain_relation_type(label: str, allowed: Sequence[str]) -> str | None:
    """Map a relation label onto the caller's vocabulary (exact, shared word stems, RELATED_TO).

    Returns None when nothing fits (the relation is dropped).
    """
    allowed_set = {normalise_type(a): a for a in allowed}
    label = normalise_type(label)
    if label in allowed_set:
        return allowed_set[label]
    stems = {_stem(w) for w in label.lower().split("_") if w}
    best, best_overlap = None, 0
    for key, original in allowed_set.items():
        other = {_stem(w) for w in key.lower().split("_") if w}
        if other and (other <= stems or stems <= other) and len(other & stems) > best_overlap:
            best, best_overlap = original, len(other & stems)
    if best is not None:
        return best
    return allowed_set.get("RELATED_TO")
