"""Temporal parsing against a fixed reference ``now``."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from khora_core.retrieval.dates import is_temporal_question, parse_temporal, wants_recency

NOW = datetime(2024, 6, 12, 15, 30, tzinfo=timezone.utc)  # a Wednesday


def d(y: int, m: int, day: int) -> datetime:
    return datetime(y, m, day, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("query", "text", "start", "end", "kind"),
    [
        ("What happened last week?", "last week", d(2024, 6, 3), d(2024, 6, 10), "window"),
        ("what did I do yesterday", "yesterday", d(2024, 6, 11), d(2024, 6, 12), "window"),
        ("revenue in Q1 2024", "Q1 2024", d(2024, 1, 1), d(2024, 4, 1), "window"),
        ("changes since March", "since March", d(2024, 3, 1), None, "since"),
        ("notes on 3 July, 2023", "3 July, 2023", d(2023, 7, 3), d(2023, 7, 4), "window"),
        ("what happened in 2023", "2023", d(2023, 1, 1), d(2024, 1, 1), "window"),
        ("the March 2024 launch", "March 2024", d(2024, 3, 1), d(2024, 4, 1), "window"),
        ("anything before 5 May 2024", "before 5 May 2024", None, d(2024, 5, 5), "before"),
        ("deals after 2020", "after 2020", d(2021, 1, 1), None, "after"),
        ("sales last month", "last month", d(2024, 5, 1), d(2024, 6, 1), "window"),
        ("hires last year", "last year", d(2023, 1, 1), d(2024, 1, 1), "window"),
        ("we met 3 days ago", "3 days ago", d(2024, 6, 9), d(2024, 6, 10), "window"),
        ("July 3, 2023 incident", "July 3, 2023", d(2023, 7, 3), d(2023, 7, 4), "window"),
        ("2024-01-15 standup", "2024-01-15", d(2024, 1, 15), d(2024, 1, 16), "window"),
        ("last Monday", "last Monday", d(2024, 6, 10), d(2024, 6, 11), "window"),
        ("the first quarter of 2023", "the first quarter of 2023", d(2023, 1, 1), d(2023, 4, 1), "window"),
        ("What did Alice do on 8 May?", "8 May", d(2024, 5, 8), d(2024, 5, 9), "window"),
        ("in December", "December", d(2023, 12, 1), d(2024, 1, 1), "window"),  # latest December
        ("until June", "until June", None, d(2024, 7, 1), "before"),
    ],
)
def test_parse(query: str, text: str, start: datetime | None, end: datetime | None, kind: str) -> None:
    refs = parse_temporal(query, now=NOW)
    assert len(refs) == 1, refs
    ref = refs[0]
    assert (ref.text, ref.start, ref.end, ref.kind) == (text, start, end, kind)


def test_relative_flag_and_rolling_window() -> None:
    (ref,) = parse_temporal("in the past two weeks", now=NOW)
    assert ref.relative and ref.end == NOW and ref.start == d(2024, 5, 29).replace(hour=15, minute=30)
    (ref,) = parse_temporal("in March 2024", now=NOW)
    assert not ref.relative


def test_naive_now_is_utc() -> None:
    (ref,) = parse_temporal("yesterday", now=datetime(2024, 6, 12, 9))
    assert ref.start == d(2024, 6, 11)


def test_no_false_positives() -> None:
    assert parse_temporal("Alice may come to the March", now=NOW) == []
    assert parse_temporal("Who is the CEO?", now=NOW) == []


def test_multiple_refs_in_order() -> None:
    refs = parse_temporal("between before 2020 and after 5 May 2024", now=NOW)
    assert [r.kind for r in refs] == ["before", "after"]


def test_recency_words() -> None:
    refs = parse_temporal("What is Alice's latest role?", now=NOW)
    assert [r.kind for r in refs] == ["recency"]
    assert wants_recency("What is Alice's latest role?", refs)
    assert wants_recency("news from last week", parse_temporal("news from last week", now=NOW))
    q = "What happened in March 2024?"
    assert not wants_recency(q, parse_temporal(q, now=NOW))


def test_contains_is_half_open() -> None:
    (ref,) = parse_temporal("in Q1 2024", now=NOW)
    assert ref.contains(d(2024, 1, 1))
    assert ref.contains(datetime(2024, 3, 31, 23, 59, tzinfo=timezone.utc))
    assert not ref.contains(d(2024, 4, 1))
    (recent,) = parse_temporal("latest", now=NOW)
    assert not recent.contains(NOW)


def test_is_temporal_question() -> None:
    assert is_temporal_question("When did Alice join Acme?")
    assert is_temporal_question("news from 2023")
    assert not is_temporal_question("Who is Alice's manager?")


@pytest.mark.parametrize(
    ("question", "now"),
    [
        ("what happened 12345678901234567890 days ago?", datetime(2024, 5, 1, tzinfo=timezone.utc)),
        ("what happened 99999999 years ago?", datetime(2024, 5, 1, tzinfo=timezone.utc)),
        ("what happened after 9999-12-31?", datetime(2024, 5, 1, tzinfo=timezone.utc)),
        (
            "what happened last year, yesterday, last monday or in the past 3 weeks?",
            datetime(1, 1, 1, tzinfo=timezone.utc),
        ),
        ("what happened in Q4 or since December 31?", datetime(9999, 12, 31, 23, tzinfo=timezone.utc)),
    ],
)
def test_expressions_off_the_calendar_are_skipped_not_raised(question: str, now: datetime) -> None:
    """They overflowed (OverflowError / 'year 0 is out of range'); a date outside the
    calendar names no window to boost, so the expression is left out."""
    refs = parse_temporal(question, now=now)
    assert all(r.start is None or r.start.year >= 1 for r in refs)
    assert not [r for r in refs if r.relative and r.kind == "window"]


def test_expressions_inside_the_calendar_still_resolve_near_its_edges() -> None:
    now = datetime(9999, 12, 31, 23, tzinfo=timezone.utc)
    (ref,) = parse_temporal("what happened last month?", now=now)
    assert (ref.start, ref.end) == (
        datetime(9999, 11, 1, tzinfo=timezone.utc),
        datetime(9999, 12, 1, tzinfo=timezone.utc),
    )
    (before,) = parse_temporal("what happened before 0001-01-02?", now=now)
    assert before.end == datetime(1, 1, 2, tzinfo=timezone.utc)
