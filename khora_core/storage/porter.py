"""The Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", 1980).

The embedded store's BM25 index is SQLite FTS5 with its ``porter`` tokenizer; PostgreSQL's
BM25 terms go through :func:`stem` so that both stacks index and query the same terms
("painting", "painted" and "paints" all become "paint"). Like SQLite's, it stems only
lower-case ASCII words of three letters or more and leaves every other token as it is.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["stem"]

_ASCII_WORD = re.compile(r"[a-z]+")

# Step 2, 3 and 4 suffixes; each step tries them longest first (only the longest match counts).
_STEP2: tuple[tuple[str, str], ...] = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
)
_STEP3: tuple[tuple[str, str], ...] = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)
_STEP4: tuple[str, ...] = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip
_STEP2 = tuple(sorted(_STEP2, key=lambda r: -len(r[0])))
_STEP3 = tuple(sorted(_STEP3, key=lambda r: -len(r[0])))
_STEP4 = tuple(sorted(_STEP4, key=len, reverse=True))


def _consonant(word: str, i: int) -> bool:
    ch = word[i]
    if ch in "aeiou":
        return False
    if ch == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """``m`` in ``[C](VC)^m[V]``: the number of vowel-consonant sequences."""
    m, prev_vowel = 0, False
    for i in range(len(stem)):
        if _consonant(stem, i):
            if prev_vowel:
                m += 1
            prev_vowel = False
        else:
            prev_vowel = True
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y (``*o``)."""
    n = len(word)
    return (
        n >= 3
        and _consonant(word, n - 1)
        and not _consonant(word, n - 2)
        and _consonant(word, n - 3)
        and word[-1] not in "wxy"
    )


def _step1(w: str) -> str:
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
                w = w[: -len(suffix)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif _double_consonant(w) and w[-1] not in "lsz":
                    w = w[:-1]
                elif _measure(w) == 1 and _cvc(w):
                    w += "e"
                break
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    return w


def _replace(w: str, rules: tuple[tuple[str, str], ...], min_measure: int) -> str:
    for suffix, repl in rules:
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            return stem + repl if _measure(stem) > min_measure else w
    return w


def _step4(w: str) -> str:
    for suffix in _STEP4:
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            if suffix == "ion" and not stem.endswith(("s", "t")):
                return w
            return stem if _measure(stem) > 1 else w
    return w


def _step5(w: str) -> str:
    if w.endswith("e"):
        stem = w[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            w = stem
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Porter stem of a lower-case ASCII word; any other token unchanged."""
    if len(word) <= 2 or not _ASCII_WORD.fullmatch(word):
        return word
    w = _step1(word)
    w = _replace(w, _STEP2, 0)
    w = _replace(w, _STEP3, 0)
    w = _step4(w)
    return _step5(w)
