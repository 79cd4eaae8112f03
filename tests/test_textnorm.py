"""Edges of the number normalizer that scenario writers meet: ordinals next to numbers, every ordinal word."""

from __future__ import annotations

import pytest

from training.textnorm import contains, normalize


@pytest.mark.parametrize(
    "text,expected",
    [
        ("the first 30 minutes", "the 1 30 minute"),
        ("the 1st 30 minutes", "the 1 30 minute"),
        ("your first two lessons", "your 1 2 lessons"),
        ("on the fourteenth", "on the 14"),
        ("the twenty first of June", "the 21 of june"),
        ("the nineteenth hole", "the 19 hole"),
    ],
)
def test_an_ordinal_never_runs_into_the_next_number(text, expected):
    assert normalize(text) == expected


def test_two_lessons_is_not_twelve_lessons():
    assert contains("Your first two lessons are free.", "2 lessons")
    assert not contains("Your first two lessons are free.", "12 lessons")


@pytest.mark.parametrize(
    "word,digits",
    [
        ("thirteenth", "13"),
        ("fourteenth", "14"),
        ("sixteenth", "16"),
        ("seventeenth", "17"),
        ("eighteenth", "18"),
        ("nineteenth", "19"),
        ("fortieth", "40"),
        ("ninetieth", "90"),
    ],
)
def test_every_ordinal_word_reads_as_a_number(word, digits):
    assert contains(f"It's on the {word}.", f"the {digits}th")


def test_digit_groups_and_spelled_codes_still_join():
    assert normalize("one, eight zero zero, five five five") == "1800555"
    assert normalize("K 7 Q 2") == "k7q2"
