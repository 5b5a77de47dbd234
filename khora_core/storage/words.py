"""Words of free text as the stores index and search them: runs of letters and digits,
case-folded, each once, common words dropped unless nothing else is left.

* :func:`name_words`: the words of an entity name. ``GraphStore.find_entities_by_words``
  finds the entities whose name shares one with a mention: the candidates that linking
  scores by edit distance when a mention is not an exact name ("Can No Longer Remain
  Silent" for "You Can No Longer Remain Silent"), whether or not the entity has a vector.
* :func:`content_words`: the same cut with the caller's common words and cap (the SQLite
  BM25 query uses it with a longer stop-word list).
"""

from __future__ import annotations

import re
from collections.abc import Collection

__all__ = ["MAX_WORDS", "content_words", "name_words"]

_WORD = re.compile(r"[^\W_]+")
#: Words taken from one name or mention; the rest are ignored.
MAX_WORDS = 16
_COMMON = frozenset(
    """a an and are as at be but by for from has have he her his i in is it its of on or she
    that the their they this to was we were with you your""".split()
)


def content_words(text: str, *, common: Collection[str], limit: int) -> list[str]:
    """Distinct case-folded words of ``text`` in order, without ``common`` ones unless only
    those are left, at most ``limit``.

    >>> content_words("The Lord of the Rings", common={"the", "of"}, limit=5)
    ['lord', 'rings']
    >>> content_words("The The", common={"the"}, limit=5)
    ['the']
    """
    words = list(dict.fromkeys(w.casefold() for w in _WORD.findall(text or "")))
    return ([w for w in words if w not in common] or words)[:limit]


def name_words(text: str) -> list[str]:
    """The words of a name or mention (:func:`content_words` with a short list of common
    English words, at most :data:`MAX_WORDS`).

    >>> name_words("The Lord of the Rings")
    ['lord', 'rings']
    """
    return content_words(text, common=_COMMON, limit=MAX_WORDS)
