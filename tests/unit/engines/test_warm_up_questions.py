"""The questions a warm-up cuts from a namespace's documents."""

from __future__ import annotations

from khora_core.engines.vectorcypher.warm_up import QUESTION_WORDS, warm_up_questions

TEXTS = [
    " ".join(f"alpha{i}" for i in range(40)),
    "A short one.",
    "   ",
    " ".join(f"beta{i}" for i in range(QUESTION_WORDS)),
]


def test_each_question_is_a_window_of_one_text_in_turn() -> None:
    questions = warm_up_questions(TEXTS, 7)
    assert len(questions) == 7
    sources = [t.split() for t in TEXTS if t.strip()]
    for i, question in enumerate(questions):
        words = sources[i % len(sources)]
        got = question.split()
        assert len(got) == min(QUESTION_WORDS, len(words))
        start = words.index(got[0])
        assert words[start : start + len(got)] == got  # consecutive words of that text
    assert questions[1] == "A short one." and questions[2] == " ".join(TEXTS[3].split())


def test_the_same_seed_gives_the_same_questions_and_nothing_gives_nothing() -> None:
    assert warm_up_questions(TEXTS, 9, seed=3) == warm_up_questions(TEXTS, 9, seed=3)
    assert warm_up_questions(TEXTS, 9, seed=3) != warm_up_questions(TEXTS, 9, seed=4)
    assert warm_up_questions([], 5) == []
    assert warm_up_questions(["", "  "], 5) == []
    assert warm_up_questions(TEXTS, 0) == []
