"""Split a document into overlapping, token-budgeted chunks with exact character offsets.

Boundaries, from strongest to weakest:

1. a Markdown heading (``#`` to ``######`` at the start of a line) starts a new chunk once
   the current one holds at least a third of the budget of body text; a short section
   stays with its neighbours, so no chunk is a lone heading or a two-line fragment;
2. a paragraph (blank-line separated) is kept whole when it fits a fresh chunk;
3. sentences (``.``, ``!``, ``?`` followed by space, or a line break) are the packing unit;
4. a sentence longer than the budget is cut at token boundaries.

Overlap is carried as *whole sentences* from the end of the previous chunk (up to
``overlap_tokens``), and not across a heading, whose section starts fresh.

Token counts are an approximation: one token per run of word characters and one per
punctuation mark (``\\w+|[^\\w\\s]``), a run longer than :data:`MAX_WORD_CHARS` counting one
token per that many characters (so text without spaces, such as a base64 blob or Chinese
prose, is still cut into chunks of bounded size). For English prose this is within about
25% of BPE tokenizers (it undercounts long rare words, which BPE splits), is
tokenizer-free and runs at regex speed, which is what a chunk budget needs.

Every span satisfies ``text[span.start:span.end] == span.text``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from khora_core.errors import InvalidInputError

__all__ = [
    "MAX_WORD_CHARS",
    "TextSpan",
    "chunk_context",
    "chunk_text",
    "count_tokens",
    "heading_path",
    "split_sentences",
]

#: The most characters one token stands for (a longer run of word characters is several).
MAX_WORD_CHARS = 24

_TOKEN = re.compile(rf"\w{{1,{MAX_WORD_CHARS}}}|[^\w\s]")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+\S.*$", re.MULTILINE)
# A sentence ends at . ! ? (plus closing quotes/brackets) followed by whitespace, or at a newline.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)|\n")
# Abbreviations whose trailing period does not end a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e fig no vol approx dept est jan feb mar apr "
    "jun jul aug sep sept oct nov dec mt gen col lt sgt rev hon".split()
)


def count_tokens(text: str) -> int:
    """Approximate token count: word runs plus punctuation marks (see module docstring)."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class TextSpan:
    """A chunk of the original text: ``text == original[start:end]``."""

    start: int
    end: int
    text: str
    token_count: int


@dataclass
class _Unit:
    start: int
    end: int
    tokens: int
    paragraph: int  # index of the paragraph the unit belongs to
    heading: bool  # the unit is a Markdown heading line


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _paragraphs(text: str, markdown: bool) -> list[tuple[int, int, bool]]:
    """(start, end, is_heading) blocks; headings become their own block."""
    cuts: list[int] = [0]
    for m in _PARAGRAPH_BREAK.finditer(text):
        cuts.extend((m.start(), m.end()))
    cuts.append(len(text))
    raw = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts), 2)]
    blocks: list[tuple[int, int, bool]] = []
    for start, end in raw:
        if not markdown:
            blocks.append((start, end, False))
            continue
        pos = start
        for h in _HEADING.finditer(text, start, end):
            if h.start() > pos:
                blocks.append((pos, h.start(), False))
            blocks.append((h.start(), h.end(), True))
            pos = h.end()
        if pos < end:
            blocks.append((pos, end, False))
    out = []
    for start, end, heading in blocks:
        s, e = _trimmed(text, start, end)
        if s < e:
            out.append((s, e, heading))
    return out


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    pos = start
    for m in _SENTENCE_END.finditer(text, start, end):
        if m.group() != "\n":
            # A sentence starts with a capital, digit, quote or bracket: "Acme Inc. announced" goes on.
            follow = re.match(r"\s*(\S)", text[m.end() : m.end() + 8])
            if follow and follow.group(1).islower():
                continue
            # "Dr. Smith": the word before the period is an abbreviation or an initial.
            word = re.search(r"([\w.]+)$", text[max(pos, m.start() - 24) : m.start()])
            if m.group().startswith(".") and word:
                w = word.group(1).lower().rstrip(".")
                if w in _ABBREVIATIONS or (len(w) == 1 and w.isalpha()):
                    continue
        s, e = _trimmed(text, pos, m.end())
        if s < e:
            spans.append((s, e))
        pos = m.end()
    s, e = _trimmed(text, pos, end)
    if s < e:
        spans.append((s, e))
    return spans


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences in ``text[start:end]`` (whitespace trimmed).

    Sentences end at ``.``/``!``/``?`` followed by whitespace (not after common
    abbreviations such as "Dr." or single initials) and at line breaks.
    """
    return _sentences(text, start, len(text) if end is None else end)


def _split_long(text: str, start: int, end: int, max_tokens: int) -> list[tuple[int, int, int]]:
    """Cut one over-long sentence at token boundaries into pieces of at most max_tokens."""
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text, start, end)]
    pieces = []
    for i in range(0, len(tokens), max_tokens):
        group = tokens[i : i + max_tokens]
        pieces.append((group[0][0], group[-1][1], len(group)))
    return pieces


def _units(text: str, max_tokens: int, markdown: bool) -> list[_Unit]:
    units: list[_Unit] = []
    for p_index, (p_start, p_end, heading) in enumerate(_paragraphs(text, markdown)):
        spans = [(p_start, p_end)] if heading else _sentences(text, p_start, p_end)
        for s, e in spans:
            tokens = count_tokens(text[s:e])
            if tokens == 0:
                continue
            if tokens <= max_tokens:
                units.append(_Unit(s, e, tokens, p_index, heading))
            else:
                for ps, pe, pt in _split_long(text, s, e, max_tokens):
                    units.append(_Unit(ps, pe, pt, p_index, heading))
    return units


def chunk_text(
    text: str, *, max_tokens: int, overlap_tokens: int = 0, markdown: bool = True
) -> list[TextSpan]:
    """Split ``text`` into chunks of at most ``max_tokens`` approximate tokens.

    Args:
        text: the document.
        max_tokens: token budget per chunk (approximate tokens, see the module docstring).
        overlap_tokens: how many tokens of whole trailing sentences to repeat at the start
            of the next chunk; clamped below ``max_tokens``.
        markdown: treat ``#`` heading lines as section starts.

    Returns:
        Spans in document order; empty for blank text.

    Raises:
        InvalidInputError: ``max_tokens < 1`` or ``overlap_tokens < 0``.
    """
    if max_tokens < 1:
        raise InvalidInputError(f"max_tokens must be at least 1, got {max_tokens}")
    if overlap_tokens < 0:
        raise InvalidInputError(f"overlap_tokens must be >= 0, got {overlap_tokens}")
    overlap_tokens = min(overlap_tokens, max_tokens - 1)
    units = _units(text, max_tokens, markdown)
    if not units:
        return []

    # Tokens in each paragraph from unit i to the paragraph's end (for "keep paragraphs whole").
    rest_of_paragraph = [0] * len(units)
    for i in range(len(units) - 1, -1, -1):
        nxt = (
            rest_of_paragraph[i + 1]
            if i + 1 < len(units) and units[i + 1].paragraph == units[i].paragraph
            else 0
        )
        rest_of_paragraph[i] = units[i].tokens + nxt

    groups: list[list[int]] = []
    current: list[int] = []
    fresh: list[int] = []  # units of `current` that are not overlap from the previous chunk
    used = 0
    for i, unit in enumerate(units):
        new_paragraph = i > 0 and unit.paragraph != units[i - 1].paragraph
        break_here = False
        carry = True
        if current and unit.heading and used >= max_tokens // 3 and any(not units[j].heading for j in fresh):
            break_here, carry = True, False
        elif current and used + unit.tokens > max_tokens:
            break_here = True
        elif (
            fresh
            and new_paragraph
            and used + rest_of_paragraph[i] > max_tokens
            and rest_of_paragraph[i] <= max_tokens
            and used >= max_tokens // 2
        ):
            # The next paragraph fits a fresh chunk but not this one: break between paragraphs.
            break_here = True
        if break_here:
            if fresh:
                groups.append(current)
            current, fresh, used = _overlap(units, current, overlap_tokens, unit.tokens, max_tokens, carry)
        current.append(i)
        fresh.append(i)
        used += unit.tokens
    if fresh:
        groups.append(current)

    spans = []
    for group in groups:
        start, end = units[group[0]].start, units[group[-1]].end
        piece = text[start:end]
        spans.append(TextSpan(start=start, end=end, text=piece, token_count=count_tokens(piece)))
    return spans


def _overlap(
    units: list[_Unit],
    previous: list[int],
    overlap_tokens: int,
    next_tokens: int,
    max_tokens: int,
    carry: bool,
) -> tuple[list[int], list[int], int]:
    """Trailing whole sentences of ``previous`` to repeat in the next chunk."""
    if not carry or overlap_tokens == 0:
        return [], [], 0
    budget = min(overlap_tokens, max_tokens - next_tokens)
    kept: list[int] = []
    used = 0
    for idx in reversed(previous):
        if units[idx].heading or used + units[idx].tokens > budget:
            break
        kept.insert(0, idx)
        used += units[idx].tokens
    return kept, [], used


_HEADING_PARTS = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")


def heading_path(text: str, offset: int) -> list[str]:
    """The Markdown headings that ``text[offset:]`` sits under, outermost first.

    A heading at ``offset`` itself is not above the chunk (the chunk shows it); a deeper
    heading ends where one of the same or a higher level starts.
    """
    path: list[tuple[int, str]] = []
    for m in _HEADING.finditer(text, 0, max(0, offset)):
        parts = _HEADING_PARTS.match(m.group(0))
        if parts is None or not parts.group(2):
            continue
        level = len(parts.group(1))
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, parts.group(2)))
    return [title for _, title in path]


def chunk_context(title: str | None, text: str, span: TextSpan) -> str | None:
    """The context searched with a chunk: the document's title, then the heading path above
    the chunk joined by " > " (``None`` when there is neither)."""
    lines = [title.strip()] if title and title.strip() else []
    path = heading_path(text, span.start) if "#" in text[: span.start] else []
    if path:
        lines.append(" > ".join(path))
    return "\n".join(lines) or None
