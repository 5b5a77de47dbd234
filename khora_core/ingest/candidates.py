"""Names to look up among stored entities before resolving a document."""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["candidate_names"]

_CANDIDATE = re.compile(r"\b[A-Z][\w&'’-]*(?:[ \t]+(?:of[ \t]+|&[ \t]+)?[A-Z][\w&'’-]*){0,4}")
_MAX_CANDIDATES = 5000


def candidate_names(extracted: list[str], texts: list[str]) -> list[str]:
    """Names to look up among stored entities: what was extracted plus the capitalised
    phrases (and their sub-phrases) of the non-core chunks; the lookup is exact, so cheap."""
    counts: Counter[str] = Counter()
    for name in extracted:
        counts[name.strip()] += 1000  # extracted names first
        words = name.split()
        if len(words) > 1 and words[0].rstrip(".").lower() in ("dr", "mr", "mrs", "ms", "prof"):
            counts[" ".join(words[1:])] += 1000
    for text in texts:
        for match in _CANDIDATE.finditer(text):
            words = match.group().split()
            for n in range(1, min(4, len(words)) + 1):
                for i in range(len(words) - n + 1):
                    phrase = " ".join(words[i : i + n])
                    if len(phrase) > 1:
                        counts[phrase] += 1
    return [name for name, _ in counts.most_common(_MAX_CANDIDATES) if name]
