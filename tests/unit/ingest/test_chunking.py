from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from khora_core.errors import InvalidInputError
from khora_core.ingest.chunking import chunk_text, count_tokens, split_sentences


def _sentences(n: int, words: int = 8) -> list[str]:
    # Sentences start with a capital: a lowercase word after a period continues the sentence.
    return [" ".join(f"W{i}x{j}" for j in range(words - 1)) + f" end{i}." for i in range(n)]


def test_offsets_are_exact_and_budget_holds() -> None:
    text = "  Intro line.\n\n" + " ".join(_sentences(40)) + "\n\nLast paragraph here!  "
    spans = chunk_text(text, max_tokens=30, overlap_tokens=0)
    assert len(spans) > 5
    for span in spans:
        assert text[span.start : span.end] == span.text
        assert span.token_count == count_tokens(span.text) <= 30
        assert span.text == span.text.strip()
    # Without overlap, spans are disjoint, ordered, and together hold every token.
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))
    assert sum(s.token_count for s in spans) == count_tokens(text)


def test_sentences_are_not_split_when_they_fit() -> None:
    sentences = _sentences(12)  # 9 tokens each (8 words + period)
    text = " ".join(sentences)
    for span in chunk_text(text, max_tokens=20, overlap_tokens=0):
        pieces = split_sentences(span.text)
        assert all(span.text[s:e] in sentences for s, e in pieces)


def test_overlap_is_whole_trailing_sentences() -> None:
    sentences = _sentences(12)
    text = " ".join(sentences)
    spans = chunk_text(text, max_tokens=30, overlap_tokens=10)
    assert len(spans) >= 4
    for prev, nxt in itertools.pairwise(spans):
        assert nxt.start < prev.end, "consecutive chunks should overlap"
        shared = text[nxt.start : prev.end]
        assert shared in sentences  # exactly one whole sentence (9 tokens <= 10)
        assert prev.text.endswith(shared) and nxt.text.startswith(shared)
        assert nxt.token_count <= 30


def test_markdown_headings_start_new_chunks_once_a_chunk_has_body() -> None:
    body = " ".join(f"Sentence number {i} has some words." for i in range(12))  # ~84 tokens
    text = f"# Title\n\n{body}\n\n## Section A\n{body}\n\n## Section B\n\n{body}"
    spans = chunk_text(text, max_tokens=200, overlap_tokens=20)
    assert [s.text.splitlines()[0] for s in spans] == ["# Title", "## Section A", "## Section B"]
    assert spans[1].text == f"## Section A\n{body}"
    assert all(text[s.start : s.end] == s.text for s in spans)


def test_short_sections_stay_together_and_no_chunk_is_a_lone_heading() -> None:
    text = (
        "# Title\n\nShort intro.\n\n## Section A\nAlpha text here.\n\n## Section B\n\n### Sub\n\nBeta text."
    )
    spans = chunk_text(text, max_tokens=200, overlap_tokens=20)
    assert len(spans) == 1 and spans[0].text == text
    small = chunk_text(text, max_tokens=12, overlap_tokens=0)
    assert all(text[s.start : s.end] == s.text for s in small)
    assert not any(all(line.startswith("#") for line in s.text.splitlines() if line.strip()) for s in small)
    # Headings are plain text when markdown handling is off.
    assert len(chunk_text(text, max_tokens=200, markdown=False)) == 1


def test_paragraph_kept_whole_when_it_fits_a_fresh_chunk() -> None:
    p1 = " ".join(_sentences(2))  # 18 tokens
    p2 = " ".join(_sentences(2, words=3))  # 8 tokens: its first sentence alone would still fit
    text = p1 + "\n\n" + p2
    spans = chunk_text(text, max_tokens=24, overlap_tokens=0)
    assert [s.text for s in spans] == [p1, p2]


def test_long_sentence_is_cut_at_token_boundaries() -> None:
    text = " ".join(f"word{i}" for i in range(95)) + "."
    spans = chunk_text(text, max_tokens=20, overlap_tokens=0)
    assert [s.token_count for s in spans] == [20, 20, 20, 20, 16]
    assert all(text[s.start : s.end] == s.text for s in spans)


def test_abbreviations_do_not_end_sentences() -> None:
    text = "Dr. Smith met Mr. Jones at Acme Inc. yesterday. Then they left."
    pieces = [text[s:e] for s, e in split_sentences(text)]
    assert pieces == ["Dr. Smith met Mr. Jones at Acme Inc. yesterday.", "Then they left."]


def test_blank_and_invalid_arguments() -> None:
    assert chunk_text("   \n\n  ", max_tokens=10) == []
    with pytest.raises(InvalidInputError):
        chunk_text("text", max_tokens=0)
    with pytest.raises(InvalidInputError):
        chunk_text("text", max_tokens=5, overlap_tokens=-1)
    # An overlap as large as the budget is clamped, and chunking still terminates.
    spans = chunk_text(" ".join(_sentences(6)), max_tokens=10, overlap_tokens=50)
    assert spans and all(s.token_count <= 10 for s in spans)


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab .!?\n#,é\t")), max_size=400),
    max_tokens=st.integers(1, 25),
    overlap=st.integers(0, 10),
)
def test_property_offsets_budget_and_coverage(text: str, max_tokens: int, overlap: int) -> None:
    spans = chunk_text(text, max_tokens=max_tokens, overlap_tokens=overlap)
    covered = set()
    for span in spans:
        assert text[span.start : span.end] == span.text
        assert 0 < span.token_count <= max_tokens
        covered.update(range(span.start, span.end))
    assert [s.start for s in spans] == sorted(s.start for s in spans)
    # Every non-space character belongs to some chunk.
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_heading_path_gives_the_headings_above_an_offset_outermost_first() -> None:
    from khora_core.ingest.chunking import heading_path

    text = "# Guide\nintro\n## Install\nsteps\n### Linux\napt\n## Use\nrun it\n"
    assert heading_path(text, text.index("apt")) == ["Guide", "Install", "Linux"]
    assert heading_path(text, text.index("run it")) == ["Guide", "Use"]  # a sibling ends Install
    assert heading_path(text, text.index("## Install")) == ["Guide"]  # its own heading is in the chunk
    assert heading_path(text, 0) == []
    assert heading_path("no headings here", 10) == []


def test_chunk_context_is_the_title_then_the_heading_path() -> None:
    from khora_core.ingest.chunking import chunk_context, chunk_text

    text = "# Guide\n\nintro text.\n\n## Install\n\n" + "Run the installer and wait. " * 40
    spans = chunk_text(text, max_tokens=64, overlap_tokens=0)
    last = spans[-1]
    assert chunk_context("Handbook", text, last) == "Handbook\nGuide > Install"
    assert chunk_context(None, text, last) == "Guide > Install"
    assert chunk_context("  ", "plain", chunk_text("plain", max_tokens=64, overlap_tokens=0)[0]) is None
