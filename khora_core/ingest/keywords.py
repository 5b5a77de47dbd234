"""Keyword links: which known entity names occur in a text.

The cheap linker for chunks outside the skeleton core. Names are indexed by their token
tuples, and the text is scanned once, trying the longest n-gram first at each token, so
the cost is linear in the text and independent of how many names are known.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["KeywordMatcher", "keyword_links"]

_TOKEN = re.compile(r"[^\W_](?:[\w&'’-]*\w)?|&")


class KeywordMatcher:
    """Finds known entity names in text by token n-gram lookup (linear in the text).

    Matching is case-insensitive, except that a name written with a capital must appear
    capitalised when it is one short word (so "US" does not match "us", "May" not "may").
    """

    def __init__(self, names: Iterable[str]) -> None:
        self._index: dict[tuple[str, ...], str] = {}
        self._strict: set[tuple[str, ...]] = set()
        self.max_len = 0
        for name in names:
            toks = tuple(t.casefold() for t in _TOKEN.findall(name))
            if not toks or toks in self._index:
                continue
            self._index[toks] = name
            if len(toks) == 1 and name[:1].isupper():
                self._strict.add(toks)
            self.max_len = max(self.max_len, len(toks))

    def counts(self, text: str) -> Counter[str]:
        """How often each known name occurs (longest match wins, no overlaps)."""
        found: Counter[str] = Counter()
        if not self._index:
            return found
        toks = [m.group() for m in _TOKEN.finditer(text)]
        low = [t.casefold() for t in toks]
        i = 0
        while i < len(toks):
            for n in range(min(self.max_len, len(toks) - i), 0, -1):
                key = tuple(low[i : i + n])
                name = self._index.get(key)
                if name is None or (key in self._strict and not toks[i][:1].isupper()):
                    continue
                found[name] += 1
                i += n
                break
            else:
                i += 1
        return found


@lru_cache(maxsize=32)
def _matcher(names: tuple[str, ...]) -> KeywordMatcher:
    return KeywordMatcher(names)


def keyword_links(text: str, known_entity_names: Iterable[str]) -> list[str]:
    """Known entity names (or aliases) that occur in ``text``, in order of first occurrence.

    Args:
        text: a chunk's text.
        known_entity_names: names and aliases to look for (thousands are fine).

    Returns:
        The names as given, each once.
    """
    names = known_entity_names if isinstance(known_entity_names, tuple) else tuple(known_entity_names)
    return list(_matcher(names).counts(text))
