"""Find dates in text with regular expressions, and normalise them to ISO form.

Recognised: ISO dates and timestamps (``2024-01-15``, ``2024-01-15T10:00:00Z``),
day-month(-year) (``3 July 2023``, ``3rd of July``), month-day(-year) (``July 3, 2023``),
month-year (``March 2024``), quarters and halves (``Q1``, ``Q3 2024``, ``H2``), fiscal years
(``FY2024``) and bare years (``1998``, ``2024``; not inside amounts like ``$2020`` or
``2,020``). Month names must be capitalised, so the verbs "may" and "march" are not dates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from khora_core.ingest.lexicon import MONTHS

__all__ = ["DateMention", "find_dates", "iso_date"]

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DAY = r"(?:3[01]|[12]\d|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?:1[89]\d\d|20\d\d|2100)"

_DATE = re.compile(
    "|".join(
        [
            r"(?P<iso>\b\d{4}-[01]\d-[0-3]\d(?:[T ][0-2]\d:[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z|[+-][0-2]\d:?[0-5]\d)?)?)(?!\d)",
            rf"(?P<dmy>\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?)(?![\w])",
            rf"(?P<mdy>\b{_MONTH}\s+{_DAY},?\s+{_YEAR})(?![\w])",
            rf"(?P<my>\b{_MONTH},?\s+{_YEAR})(?![\w])",
            rf"(?P<md>\b{_MONTH}\s+{_DAY})(?![\w])",
            r"(?P<quarter>\b[QH][1-4](?:\s*(?:FY\s?)?'?(?:\d{4}|\d{2}))?)(?![\w])",
            r"(?P<fy>\bFY\s?'?(?:\d{4}|\d{2}))(?![\w])",
            rf"(?P<year>(?<![\w$€£#.,/-]){_YEAR})(?![\w%]|[.,/-]\d)",
        ]
    )
)


@dataclass(frozen=True)
class DateMention:
    """A date found in text: ``text == source[start:end]``; ``iso`` when it can be normalised."""

    start: int
    end: int
    text: str
    kind: str
    iso: str | None


def _month_number(token: str) -> int | None:
    return MONTHS.get(token.rstrip(".").lower())


def iso_date(text: str) -> str | None:
    """ISO form of a date expression: ``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``; None otherwise.

    >>> iso_date("3 July 2023"), iso_date("March 2024"), iso_date("2024")
    ('2023-07-03', '2024-03', '2024')
    """
    text = text.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}.*", text):
        return text[:10]
    if re.fullmatch(_YEAR, text):
        return text
    words = re.findall(r"[A-Za-z]+\.?|\d+", text)
    year = next((w for w in words if re.fullmatch(_YEAR, w)), None)
    month = next((m for m in (_month_number(w) for w in words if w[0].isalpha()) if m), None)
    day = next((int(w) for w in words if w.isdigit() and len(w) <= 2 and 1 <= int(w) <= 31), None)
    if year and month and day:
        return f"{year}-{month:02d}-{day:02d}"
    if year and month:
        return f"{year}-{month:02d}"
    return None


def find_dates(text: str, start: int = 0, end: int | None = None) -> list[DateMention]:
    """Every date expression in ``text[start:end]``, left to right, without overlaps."""
    found = []
    for m in _DATE.finditer(text, start, len(text) if end is None else end):
        kind = m.lastgroup or "date"
        surface = m.group()
        # "1 May" is a date but "May" alone is checked by the caller; "March 3" fine.
        found.append(DateMention(m.start(), m.end(), surface, kind, iso_date(surface)))
    return found
