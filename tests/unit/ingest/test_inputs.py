from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from khora_core.config import IngestConfig
from khora_core.errors import ContentTooLargeError, InvalidInputError, UnsupportedContentError
from khora_core.ingest.inputs import normalise_content_type, prepare_input, to_utc

CFG = IngestConfig(max_content_chars=100)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "text/plain"),
        ("text", "text/plain"),
        ("TEXT/PLAIN; charset=utf-8", "text/plain"),
        ("markdown", "text/markdown"),
        ("md", "text/markdown"),
        ("text/markdown", "text/markdown"),
    ],
)
def test_content_type_aliases(given: str | None, expected: str) -> None:
    assert normalise_content_type(given) == expected


@pytest.mark.parametrize("given", ["application/pdf", "text/html", "image/png"])
def test_unsupported_content_types(given: str) -> None:
    with pytest.raises(UnsupportedContentError):
        prepare_input(CFG, content="hello", content_type=given)


def test_content_rules() -> None:
    with pytest.raises(InvalidInputError):
        prepare_input(CFG, content="  \n\t ")
    with pytest.raises(InvalidInputError):
        prepare_input(CFG, content=None)
    with pytest.raises(ContentTooLargeError, match="KHORA_INGEST_MAX_CONTENT_CHARS"):
        prepare_input(CFG, content="x" * 101)
    with pytest.raises(InvalidInputError, match="Unknown"):
        prepare_input(CFG, content="ok", titel="typo")


def test_context_is_an_optional_string_within_the_content_limit() -> None:
    assert prepare_input(CFG, content="ok").context is None
    assert prepare_input(CFG, content="ok", context="What is for dinner?").context == "What is for dinner?"
    with pytest.raises(InvalidInputError, match="context must be a string"):
        prepare_input(CFG, content="ok", context=["a list"])
    with pytest.raises(ContentTooLargeError, match="context has 101 characters"):
        prepare_input(CFG, content="ok", context="x" * 101)


def test_dates_become_aware_utc() -> None:
    assert to_utc("2024-01-15T10:00:00Z", "d") == datetime(2024, 1, 15, 10, tzinfo=timezone.utc)
    assert to_utc(datetime(2024, 1, 15, 10), "d") == datetime(
        2024, 1, 15, 10, tzinfo=timezone.utc
    )  # naive = UTC
    plus_two = datetime(2024, 1, 15, 12, tzinfo=timezone(timedelta(hours=2)))
    assert to_utc(plus_two, "d") == datetime(2024, 1, 15, 10, tzinfo=timezone.utc)
    assert to_utc(date(2024, 1, 15), "d") == datetime(2024, 1, 15, tzinfo=timezone.utc)
    assert to_utc(0, "d") == datetime(1970, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(InvalidInputError, match="ISO-8601"):
        to_utc("last tuesday", "occurred_at")


def test_occurred_at_from_metadata_stays_in_metadata() -> None:
    inp = prepare_input(CFG, content="notes", metadata={"occurred_at": "2024-01-15T10:00:00Z", "author": "a"})
    assert inp.occurred_at == datetime(2024, 1, 15, 10, tzinfo=timezone.utc)
    assert inp.metadata == {"occurred_at": "2024-01-15T10:00:00Z", "author": "a"}
    explicit = prepare_input(
        CFG, content="notes", occurred_at="2023-01-01", metadata={"occurred_at": "2024-01-15"}
    )
    assert explicit.occurred_at == datetime(2023, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(InvalidInputError, match="metadata"):
        prepare_input(CFG, content="notes", metadata={"occurred_at": "soon"})


def test_metadata_is_made_json_and_tags_are_cleaned() -> None:
    inp = prepare_input(
        CFG,
        content="notes",
        metadata={
            "when": datetime(2024, 1, 15, 10),
            "day": date(2024, 1, 2),
            "ids": (1, 2),
            "nested": {"k": {3}},
        },
        tags=["a", "b", "a", " "],
    )
    assert inp.metadata == {
        "when": "2024-01-15T10:00:00+00:00",
        "day": "2024-01-02",
        "ids": [1, 2],
        "nested": {"k": [3]},
    }
    assert inp.tags == ["a", "b"]
    with pytest.raises(InvalidInputError, match="NaN"):
        prepare_input(CFG, content="x", metadata={"v": float("nan")})
    with pytest.raises(InvalidInputError, match="not JSON"):
        prepare_input(CFG, content="x", metadata={"v": object()})
    with pytest.raises(InvalidInputError, match="tags"):
        prepare_input(CFG, content="x", tags="single")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"content": "a \ud800 b"},
        {"content": "a \x00 b"},
        {"content": "ok", "title": "\udfff"},
        {"content": "ok", "context": "a \x00 b"},
        {"content": "ok", "tags": ["\x00"]},
        {"content": "ok", "entity_types": ["PER\ud800"]},
        {"content": "ok", "metadata": {"k\ud800": 1}},
        {"content": "ok", "metadata": {"k": ["a", {"b": "\x00"}]}},
    ],
)
def test_lone_surrogates_and_nul_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        prepare_input(CFG, **kwargs)


def test_metadata_depth_and_cycles_are_refused_without_recursion_error() -> None:
    from khora_core.ingest.inputs import MAX_METADATA_DEPTH

    def deep(levels: int) -> dict[str, object]:
        out: dict[str, object] = {}
        for _ in range(levels):
            out = {"k": out}
        return out

    prepare_input(CFG, content="ok", metadata=deep(MAX_METADATA_DEPTH - 1))
    with pytest.raises(InvalidInputError, match="nested"):
        prepare_input(CFG, content="ok", metadata=deep(MAX_METADATA_DEPTH))
    with pytest.raises(InvalidInputError, match="nested"):
        prepare_input(CFG, content="ok", metadata=deep(100_000))
    loop: dict[str, object] = {}
    loop["self"] = loop
    with pytest.raises(InvalidInputError, match="itself"):
        prepare_input(CFG, content="ok", metadata=loop)
    shared = ["x"]  # the same list twice is a DAG, not a cycle
    assert prepare_input(CFG, content="ok", metadata={"a": shared, "b": shared}).metadata == {
        "a": ["x"],
        "b": ["x"],
    }


@pytest.mark.parametrize(
    "value",
    [
        datetime.min,
        datetime.max,
        "0001-01-01",
        "9999-12-31T12:00:00Z",
        -62135596800,
        253402300799,
        "0001-01-01T00:00:00-05:00",
    ],
)
def test_dates_at_the_calendar_edges_are_refused(value: object) -> None:
    with pytest.raises(InvalidInputError, match="date range"):
        to_utc(value, "occurred_at")


def test_extract_is_a_bool_that_defaults_to_true():
    assert prepare_input(CFG, content="x").extract is True
    assert prepare_input(CFG, content="x", extract=False).extract is False
    with pytest.raises(InvalidInputError, match="extract"):
        prepare_input(CFG, content="x", extract="no")
