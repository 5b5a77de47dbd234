"""Rule-based temporal parsing of questions ("last week", "in Q1 2024", "since March").

Every expression resolves against an explicit reference ``now`` that the caller passes
(the recall pipeline uses the caller's ``now``, else the newest ``occurred_at`` in the
namespace, else the wall clock). Windows are half-open ``[start, end)`` in UTC; ``None``
means open on that side.

A date in a question is a *soft* signal: retrieval boosts chunks inside the window
(``VectorCypherConfig.temporal_window_boost``) and never drops the others. Hard time bounds
are the job of ``filter={"occurred_at": ...}``.

Conventions (documented because several readings are possible):

* ``last week`` / ``last month`` / ``last year`` / ``last quarter``: the previous calendar
  period (ISO weeks start on Monday); ``this week`` etc.: the current period up to now;
  ``past week`` / ``past N days``: a rolling window ending at ``now``.
* ``N days ago``: that calendar day; ``N weeks ago``: the 7 days around that date;
  ``N months/years ago``: that calendar month / year.
* A month or day without a year ("since March", "on 3 July") is its latest occurrence at or
  before ``now``.
* ``before X``: ``[None, X.start)``; ``after X``: ``[X.end, None)``; ``since X``:
  ``[X.start, None)``; ``until/by X``: ``[None, X.end)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

__all__ = [
    "TemporalReference",
    "is_temporal_question",
    "parse_temporal",
    "wants_recency",
]

_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4,
    "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sept": 9, "sep": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
    "december": 12, "dec": 12,
}  # fmt: skip
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "few": 3, "couple": 2, "several": 3,
}  # fmt: skip
T = TypeVar("T")

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ORDINAL_QUARTERS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "last": 4}

_MON = r"(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d{2}"
_NUM = r"(?:\d+|" + "|".join(_NUMBER_WORDS) + r")"
_PREP = r"(?P<prep>before|after|since|until|till|by|from|in|on|during|around|of)\s+"

# Absolute date expressions, most specific first; each alternative has its own groups.
_DATE_RE = re.compile(
    r"\b(?:" + _PREP + r")?(?:"
    r"(?P<iso>\d{4}-\d{2}-\d{2})"
    rf"|(?P<d1>{_DAY})\s+(?:of\s+)?(?P<m1>{_MON})\.?,?\s+(?P<y1>{_YEAR})"
    rf"|(?P<m2>{_MON})\.?\s+(?P<d2>{_DAY}),?\s+(?P<y2>{_YEAR})"
    rf"|(?P<qn>Q[1-4])\s*(?P<qy>{_YEAR})?"
    rf"|(?:the\s+)?(?P<qo>first|second|third|fourth)\s+quarter(?:\s+of)?\s+(?P<qoy>{_YEAR})"
    rf"|(?P<m4>{_MON})\.?,?\s+(?P<y4>{_YEAR})"
    rf"|(?P<d3>{_DAY})\s+(?:of\s+)?(?P<m3>{_MON})\b"
    rf"|(?P<m5>{_MON})\.?\s+(?P<d5>\d{{1,2}}(?:st|nd|rd|th)?)(?!\d)"
    rf"|(?P<y6>{_YEAR})"
    rf"|(?P<m6>{_MON})"
    r")\b",
    re.IGNORECASE,
)
_REL_PERIOD_RE = re.compile(
    r"\b(?P<which>last|past|previous|this|current)\s+(?P<unit>week|month|quarter|year)\b", re.I
)
_REL_SPAN_RE = re.compile(
    rf"\b(?:last|past|previous)\s+(?:(?P<n>{_NUM})\s+)?(?:of\s+)?(?P<unit>day|week|month|year)s\b", re.I
)
_AGO_RE = re.compile(rf"\b(?P<n>{_NUM})\s+(?:of\s+)?(?P<unit>day|week|month|year)s?\s+ago\b", re.I)
_DAY_WORD_RE = re.compile(r"\b(?P<w>yesterday|today|tonight|this\s+morning)\b", re.I)
_WEEKDAY_RE = re.compile(r"\b(?P<which>last|on|this|past)\s+(?P<wd>" + "|".join(_WEEKDAYS) + r")\b", re.I)
_RECENCY_RE = re.compile(
    r"\b(latest|most\s+recent(?:ly)?|recent(?:ly)?|lately|newest|nowadays|these\s+days|"
    r"currently|current|right\s+now|now|last\s+time|up\s+to\s+date|so\s+far)\b",
    re.I,
)
_TEMPORAL_QUESTION_RE = re.compile(
    r"\b(when|what\s+(?:date|day|time|year|month)|how\s+long|since|until|before|after|ago|"
    r"during|timeline|chronolog\w*|first|earliest|history)\b",
    re.I,
)


@dataclass(frozen=True)
class TemporalReference:
    """A time expression found in a question, resolved to a UTC window.

    Attributes:
        text: the matched text.
        start: window start (inclusive), or None when open.
        end: window end (exclusive), or None when open.
        kind: ``"window"``, ``"before"``, ``"after"``, ``"since"`` or ``"recency"``
            (no window: the question asks for recent information).
        granularity: ``day``, ``week``, ``month``, ``quarter``, ``year`` or ``span``.
        relative: True when the window is anchored at ``now`` ("last week", "3 days
            ago"); a date without a year uses ``now`` only to pick the year.
    """

    text: str
    start: datetime | None
    end: datetime | None
    kind: str
    granularity: str = ""
    relative: bool = False

    def contains(self, when: datetime) -> bool:
        """True when ``when`` falls inside the window (``recency`` contains nothing)."""
        if self.kind == "recency" or (self.start is None and self.end is None):
            return False
        when = _aware(when)
        return (self.start is None or when >= self.start) and (self.end is None or when < self.end)

    def as_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
            "kind": self.kind,
            "granularity": self.granularity,
            "relative": self.relative,
        }


def _aware(dt: datetime) -> datetime:
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def _day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=timezone.utc)


def _month_window(y: int, m: int) -> tuple[datetime, datetime]:
    start = _day(y, m, 1)
    return start, (_day(y + 1, 1, 1) if m == 12 else _day(y, m + 1, 1))


def _quarter_window(y: int, q: int) -> tuple[datetime, datetime]:
    start = _day(y, 3 * (q - 1) + 1, 1)
    return start, (_day(y + 1, 1, 1) if q == 4 else _day(y, 3 * q + 1, 1))


def _shift_months(y: int, m: int, delta: int) -> tuple[int, int]:
    idx = y * 12 + (m - 1) + delta
    return idx // 12, idx % 12 + 1


def _num(text: str | None) -> int:
    if not text:
        return 1
    text = text.lower()
    return int(text) if text.isdigit() else _NUMBER_WORDS.get(text, 1)


def _latest_year(now: datetime, month: int, day: int = 1) -> int:
    """The year of the latest (month, day) at or before ``now``."""
    return now.year if (month, day) <= (now.month, now.day) else now.year - 1


def _absolute(m: re.Match[str], now: datetime) -> tuple[datetime, datetime, str, bool] | None:
    """Resolve one ``_DATE_RE`` match to (start, end, granularity, relative)."""
    g = m.groupdict()
    try:
        if g["iso"]:
            y, mo, d = (int(p) for p in g["iso"].split("-"))
            s = _day(y, mo, d)
            return s, s + timedelta(days=1), "day", False
        for dk, mk, yk in (("d1", "m1", "y1"), ("d2", "m2", "y2")):
            if g[dk]:
                s = _day(int(g[yk]), _MONTHS[g[mk].lower()], int(re.sub(r"\D", "", g[dk])))
                return s, s + timedelta(days=1), "day", False
        if g["qn"]:
            q = int(g["qn"][1])
            y = int(g["qy"]) if g["qy"] else (now.year if 3 * (q - 1) + 1 <= now.month else now.year - 1)
            return (*_quarter_window(y, q), "quarter", False)
        if g["qo"]:
            return (*_quarter_window(int(g["qoy"]), _ORDINAL_QUARTERS[g["qo"].lower()]), "quarter", False)
        if g["m4"]:
            return (*_month_window(int(g["y4"]), _MONTHS[g["m4"].lower()]), "month", False)
        for dk, mk in (("d3", "m3"), ("d5", "m5")):
            if g[dk]:
                mo, d = _MONTHS[g[mk].lower()], int(re.sub(r"\D", "", g[dk]))
                s = _day(_latest_year(now, mo, d), mo, d)
                return s, s + timedelta(days=1), "day", False
        if g["y6"]:
            y = int(g["y6"])
            return _day(y, 1, 1), _day(y + 1, 1, 1), "year", False
        if g["m6"]:
            mo = _MONTHS[g["m6"].lower()]
            return (*_month_window(_latest_year(now, mo), mo), "month", False)
    except ValueError:  # "31 February": not a date
        return None
    return None


def _with_prep(
    prep: str | None, start: datetime, end: datetime
) -> tuple[datetime | None, datetime | None, str]:
    p = (prep or "").lower()
    if p == "before":
        return None, start, "before"
    if p in ("until", "till", "by"):
        return None, end, "before"
    if p == "after":
        return end, None, "after"
    if p in ("since", "from"):
        return start, None, "since"
    return start, end, "window"


def _relative(now: datetime, text: str, unit: str, which: str) -> tuple[datetime, datetime, str]:
    """``last|past|this`` + ``week|month|quarter|year`` against ``now``."""
    today = _day(now.year, now.month, now.day)
    which = which.lower()
    if which == "past":  # rolling
        days = {"week": 7, "month": 30, "quarter": 91, "year": 365}[unit]
        return now - timedelta(days=days), now, "span"
    if unit == "week":
        this_start = today - timedelta(days=today.weekday())
        if which in ("this", "current"):
            return this_start, now, "week"
        return this_start - timedelta(days=7), this_start, "week"
    if unit == "month":
        y, m = (
            (now.year, now.month) if which in ("this", "current") else _shift_months(now.year, now.month, -1)
        )
        s, e = _month_window(y, m)
        return s, (now if which in ("this", "current") else e), "month"
    if unit == "quarter":
        q = (now.month - 1) // 3 + 1
        y = now.year
        if which not in ("this", "current"):
            y, q = (y - 1, 4) if q == 1 else (y, q - 1)
        s, e = _quarter_window(y, q)
        return s, (now if which in ("this", "current") else e), "quarter"
    y = now.year if which in ("this", "current") else now.year - 1
    return _day(y, 1, 1), (now if which in ("this", "current") else _day(y + 1, 1, 1)), "year"


def _ago(now: datetime, n: int, unit: str) -> tuple[datetime, datetime, str]:
    today = _day(now.year, now.month, now.day)
    if unit == "day":
        s = today - timedelta(days=n)
        return s, s + timedelta(days=1), "day"
    if unit == "week":
        t = today - timedelta(weeks=n)
        return t - timedelta(days=3), t + timedelta(days=4), "week"
    if unit == "month":
        return (*_month_window(*_shift_months(now.year, now.month, -n)), "month")
    return _day(now.year - n, 1, 1), _day(now.year - n + 1, 1, 1), "year"


def _day_window(today: datetime, back: int) -> tuple[datetime, datetime]:
    """The day ``back`` days before ``today``, as ``[start, end)``."""
    start = today - timedelta(days=back)
    return start, start + timedelta(days=1)


def _bounded(resolve: Callable[..., T], *args: Any) -> T | None:
    """``resolve(*args)``, or None when the window would leave the calendar (before year
    1 or after 9999, e.g. "12345678901234567890 days ago", "after 9999-12-31", or "last
    year" with ``now`` in year 1): such an expression names no date to boost."""
    try:
        return resolve(*args)
    except (OverflowError, ValueError):
        return None


def parse_temporal(query: str, *, now: datetime) -> list[TemporalReference]:
    """Find and resolve the time expressions of ``query``.

    Args:
        query: the question.
        now: the reference point for relative expressions (naive means UTC).

    Returns:
        The references in order of appearance; overlapping matches keep the first,
        most specific one. Recency words ("latest", "recently") yield ``kind="recency"``.
    """
    now = _aware(now)
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, TemporalReference]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= s or a >= e for s, e in taken)

    def add(m: re.Match[str], ref: TemporalReference) -> None:
        taken.append(m.span())
        found.append((m.start(), ref))

    today = _day(now.year, now.month, now.day)
    for m in _AGO_RE.finditer(query):
        resolved = _bounded(_ago, now, _num(m.group("n")), m.group("unit").lower())
        if resolved is not None:
            s, e, gran = resolved
            add(m, TemporalReference(m.group(0), s, e, "window", gran, True))
    for m in _REL_SPAN_RE.finditer(query):
        if free(*m.span()):
            n, unit = _num(m.group("n")), m.group("unit").lower()
            days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * n
            start = _bounded(lambda d: now - timedelta(days=d), days)
            if start is not None:
                add(m, TemporalReference(m.group(0), start, now, "window", "span", True))
    for m in _REL_PERIOD_RE.finditer(query):
        if free(*m.span()):
            period = _bounded(_relative, now, m.group(0), m.group("unit").lower(), m.group("which"))
            if period is not None:
                s, e, gran = period
                add(m, TemporalReference(m.group(0), s, e, "window", gran, True))
    for m in _DAY_WORD_RE.finditer(query):
        if free(*m.span()):
            back = 1 if m.group("w").lower() == "yesterday" else 0
            day = _bounded(_day_window, today, back)
            if day is not None:
                add(m, TemporalReference(m.group(0), *day, "window", "day", True))
    for m in _WEEKDAY_RE.finditer(query):
        if free(*m.span()):
            back = (today.weekday() - _WEEKDAYS.index(m.group("wd").lower())) % 7
            if back == 0 and m.group("which").lower() in ("last", "past"):
                back = 7
            day = _bounded(_day_window, today, back)
            if day is not None:
                add(m, TemporalReference(m.group(0), *day, "window", "day", True))
    for m in _DATE_RE.finditer(query):
        if not free(*m.span()):
            continue
        # A bare month name ("may", "march") is a date only after a preposition.
        if m.group("m6") and not m.group("prep"):
            continue
        resolved_date = _bounded(_absolute, m, now)
        if resolved_date is None:
            continue
        s, e, gran, rel = resolved_date
        start, end, kind = _with_prep(m.group("prep"), s, e)
        text = m.group(0) if kind != "window" else m.group(0)[len(m.group("prep") or "") :]
        add(m, TemporalReference(text.strip(), start, end, kind, gran, rel))
    for m in _RECENCY_RE.finditer(query):
        if free(*m.span()):
            add(m, TemporalReference(m.group(0), None, None, "recency", "", True))
    found.sort(key=lambda pair: pair[0])
    return [ref for _, ref in found]


def wants_recency(query: str, refs: list[TemporalReference] | None = None) -> bool:
    """True when the question asks for recent information ("latest", "last week").

    Relative windows count: they are anchored at ``now`` and so ask about the recent past.
    """
    if refs is None:
        refs = parse_temporal(query, now=datetime.now(timezone.utc))
    return any(r.kind == "recency" or r.relative for r in refs)


def is_temporal_question(query: str, refs: list[TemporalReference] | None = None) -> bool:
    """True when time matters to the question: a time expression or a "when"-style ask."""
    if refs:
        return True
    return bool(_TEMPORAL_QUESTION_RE.search(query)) or bool(
        parse_temporal(query, now=datetime.now(timezone.utc))
    )
