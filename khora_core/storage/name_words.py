"""The words of an entity name, as every store indexes and searches them.

``GraphStore.find_entities_by_words`` finds the entities whose name shares a word with a
mention: the candidates that linking scores by edit distance when a mention is not an exact
name ("Can No Longer Remain Silent" for "You Can No Longer Remain Silent"), whether or not
the entity has a vector. Words are runs of letters and digits, case-folded; common English
words are dropped unless nothing else is left.
"""

from __future__ import annotations

import re

__all__ = ["MAX_WORDS", "name_words"]

_WORD = re.compile(r"[^\W_]+")
#: Words taken from one text (a name or a mention); the rest are ignored.
MAX_WORDS = 16
_COMMON = frozenset(
    """a an and are as at be but by for from has have he her his i in is it its of on or she
    that the their they this to was we were with you your""".split()
)


def name_words(text: str) -> list[str]:
    """Distinct case-folded words of ``text``, in order, common words dropped when others remain.

    >>> name_words("The Lord of the Rings")
    ['lord', 'rings']
    >>> name_words("The The")
    ['the']
    """
    words = list(dict.fromkeys(w.casefold() for w in _WORD.findall(text or "")))
    content = [w for w in words if w not in _COMMON] or words
    return content[:MAX_WORDS]
