"""Dates inside recall filters: one strict ISO-8601 grammar and one integer time axis.

Every backend compares dates as **integer microseconds since the Unix epoch (UTC)**, so
the in-memory evaluator, SQLite (which stores dates as such integers), PostgreSQL and
Neo4j agree to the microsecond without floating point.

A metadata string counts as a date only when it matches this grammar exactly (the same
rule is implemented in SQL by ``sql_sqlite.py`` and ``POSTGRES_SUPPORT_DDL`` in
``sql_postgres.py``; change all three together)::

    YYYY-MM-DD                                  a calendar date, midnight UTC
    YYYY-MM-DDTHH:MM:SS[.f{1,6}](Z|+HH:MM|-HH:MM)

Year 0001-9999, a real calendar day, hour 00-23, minute and second 00-59 (no leap
second), offset hour 00-23 and minute 00-59. A date-time without an offset is *naive*
and never counts as a date.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, timedelta, timezone

__all__ = [
    "DateParseError",
    "datetime_to_us",
    "iso_to_us",
    "parse_iso_operand",
    "us_to_datetime",
    "us_to_iso",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_US = 1_000_000

_ISO = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
    r"(?:T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?(?:(Z)|([+-])([0-9]{2}):([0-9]{2})))?",
    re.ASCII,
)
# Same shape without the offset: recognised only to report "naive" precisely.
_ISO_NAIVE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?",
    re.ASCII,
)


class DateParseError(ValueError):
    """An ISO-8601 operand is malformed (``code`` is ``bad_date`` or ``naive_datetime``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def iso_to_us(text: object) -> int | None:
    """Epoch microseconds of a strict ISO-8601 date string, or ``None`` if it is not one.

    Args:
        text: any value; only a ``str`` in the module's grammar yields a number.

    Returns:
        Microseconds since 1970-01-01T00:00:00Z, or ``None``.
    """
    if not isinstance(text, str):
        return None
    m = _ISO.fullmatch(text)
    if m is None:
        return None
    year, month, day = int(m[1]), int(m[2]), int(m[3])
    if year < 1 or not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    days = date(year, month, day).toordinal() - _EPOCH_ORDINAL
    seconds = 0
    micros = 0
    if m[4] is not None:
        hh, mi, ss = int(m[4]), int(m[5]), int(m[6])
        if hh > 23 or mi > 59 or ss > 59:
            return None
        seconds = hh * 3600 + mi * 60 + ss
        if m[7] is not None:
            micros = int(m[7].ljust(6, "0"))
        if m[8] is None:
            oh, om = int(m[10]), int(m[11])
            if oh > 23 or om > 59:
                return None
            offset = oh * 3600 + om * 60
            seconds -= offset if m[9] == "+" else -offset
    return (days * 86400 + seconds) * _US + micros


def datetime_to_us(value: datetime) -> int:
    """Epoch microseconds of an aware datetime (a naive one is read as UTC)."""
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=timezone.utc)
    delta = value - _EPOCH
    return (delta.days * 86400 + delta.seconds) * _US + delta.microseconds


def us_to_datetime(us: int) -> datetime:
    """The aware UTC datetime for epoch microseconds (raises ``OverflowError`` out of range)."""
    return _EPOCH + timedelta(microseconds=us)


def us_to_iso(us: int) -> str:
    """Canonical ISO text (``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``) for epoch microseconds.

    Raises:
        OverflowError: the instant is outside years 1-9999 in UTC.
    """
    dt = us_to_datetime(us)
    text = f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    if dt.microsecond:
        text += f".{dt.microsecond:06d}"
    return text + "Z"


def parse_iso_operand(text: str) -> int:
    """Parse the operand of ``{"$date": ...}``.

    Args:
        text: ISO-8601 text in the module's grammar.

    Returns:
        Epoch microseconds.

    Raises:
        DateParseError: ``naive_datetime`` for a date-time without an offset, ``bad_date``
            for anything else that is not in the grammar or whose UTC instant falls outside
            years 0001-9999.
    """
    us = iso_to_us(text)
    if us is not None:
        try:
            us_to_datetime(us)
        except OverflowError:
            raise DateParseError("bad_date", f"{text!r} is outside years 0001-9999 in UTC.") from None
        return us
    if _ISO_NAIVE.fullmatch(text):
        raise DateParseError(
            "naive_datetime",
            f"{text!r} has no UTC offset; add 'Z' or '+HH:MM' (for example '2026-01-01T00:00:00Z').",
        )
    raise DateParseError(
        "bad_date",
        f"{text!r} is not an ISO-8601 date; use 'YYYY-MM-DD' or 'YYYY-MM-DDTHH:MM:SS[.ffffff]Z' "
        "(or an offset such as '+02:00').",
    )
