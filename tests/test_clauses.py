"""Cutting streamed LLM text into speakable clauses, and markdown removal."""

from __future__ import annotations

import re

import pytest

from pipeline.clauses import ClauseSplitter, clean_for_speech


def split_all(text: str, pieces: list[str] | None = None, min_words: int = 4) -> list[str]:
    splitter = ClauseSplitter(min_words, first_clause_words=min_words)
    out: list[str] = []
    for piece in pieces if pieces is not None else [text]:
        out += splitter.push(piece)
    if (tail := splitter.flush()) is not None:
        out.append(tail)
    return out


def tokens(text: str) -> list[str]:
    """LLM-like deltas: words with their leading space, punctuation as separate tokens."""
    return re.findall(r"\s*[\w']+|\s*[^\w\s]|\s+", text)


def test_sentence_end_cuts_and_rest_stays_buffered():
    s = ClauseSplitter()
    assert s.push("Hello there. How are") == ["Hello there."]
    assert s.buffer == "How are"
    assert s.push(" you") == []
    assert s.flush() == "How are you"
    assert s.buffer == ""
    assert s.flush() is None


@pytest.mark.parametrize("end", ["!", "?", "...", "?!"])
def test_other_sentence_ends_cut(end):
    s = ClauseSplitter()
    assert s.push(f"Hi{end} Next") == [f"Hi{end}"]
    assert s.flush() == "Next"


def test_sentence_end_needs_following_whitespace():
    s = ClauseSplitter()
    assert s.push("Hello there.") == []
    assert s.push(" Bye") == ["Hello there."]


def test_closing_quote_or_paren_stays_with_sentence():
    s = ClauseSplitter()
    assert s.push('Say "block my card." Then') == ['Say "block my card."']
    assert s.push(" wait (a bit.) Ok") == ["Then wait (a bit.)"]


def test_multiple_sentences_in_one_delta():
    s = ClauseSplitter()
    assert s.push("One. Two! Three? Four") == ["One.", "Two!", "Three?"]
    assert s.flush() == "Four"


def test_first_clause_may_be_one_word_later_ones_need_four():
    s = ClauseSplitter()
    assert s.push("Sure, I can, of course, help") == ["Sure,", "I can, of course,"]
    assert s.flush() == "help"


def test_comma_does_not_cut_a_short_clause():
    s = ClauseSplitter(first_clause_words=4)
    assert s.push("Yes, sure, I") == []
    assert s.flush() == "Yes, sure, I"


def test_comma_cuts_once_clause_has_four_words():
    s = ClauseSplitter(first_clause_words=4)
    assert s.push("Sure, I can help, and then") == ["Sure, I can help,"]
    assert s.buffer == "and then"


def test_comma_cut_with_exactly_four_words():
    s = ClauseSplitter(first_clause_words=4)
    assert s.push("one two three four, five") == ["one two three four,"]
    s = ClauseSplitter(first_clause_words=4)
    assert s.push("one two three, four") == []


@pytest.mark.parametrize("mark", [";", ":", "\u2014"])
def test_other_clause_marks_cut_when_long_enough(mark):
    s = ClauseSplitter()
    assert s.push(f"a checked bag costs{mark} thirty") == [f"a checked bag costs{mark}"]


def test_min_clause_words_is_configurable():
    s = ClauseSplitter(min_clause_words=2, first_clause_words=2)
    assert s.push("Well then, okay") == ["Well then,"]


def test_comma_after_sentence_end_is_not_considered_first():
    s = ClauseSplitter()
    assert s.push("One two. Three four, five six, seven") == ["One two.", "Three four, five six,"]


@pytest.mark.parametrize(
    "text",
    [
        "It costs 3.50 dollars per bag",
        "The flight leaves at 8:30 tomorrow morning",
        "Pay 1,000 dollars or 2.5 percent",
        "Version 1.2.3 works on example.com",
    ],
)
def test_numbers_and_dotted_tokens_are_not_cut(text):
    s = ClauseSplitter()
    assert s.push(text) == []
    assert s.flush() == text


def test_price_at_sentence_end_still_cuts_after_the_sentence():
    s = ClauseSplitter()
    assert s.push("It is 3.50. At 8:30 we open") == ["It is 3.50."]
    assert s.flush() == "At 8:30 we open"


TEXTS = [
    "Hello there. How are you today? I can help with that, of course, just give me a moment.",
    "A checked bag costs 30 dollars; a second checked bag costs 45 dollars. Anything else?",
    "Sure, no problem, your flight at 8:30 costs 3.50 extra, and the gate is B12. Thanks!",
    "Well... let me check. **Yes**, it is free, on orders over 50 dollars, every day",
    'Say "block my card." Then wait (a bit.) Okay, that is all, nothing more to add here',
]


@pytest.mark.parametrize("text", TEXTS)
def test_token_by_token_deltas_match_whole_text(text):
    whole = split_all(text)
    assert "".join(tokens(text)) == text
    assert split_all(text, tokens(text)) == whole
    assert split_all(text, list(text)) == whole  # character by character
    assert len(whole) >= 2


@pytest.mark.parametrize("text", TEXTS)
def test_clauses_cover_the_whole_text(text):
    assert " ".join(split_all(text)) == clean_for_speech(text)


def test_flush_returns_tail_and_resets():
    s = ClauseSplitter()
    s.push("Done. Goodbye")
    assert s.flush() == "Goodbye"
    assert s.flush() is None
    assert s.push("New turn. ") == ["New turn."]


def test_flush_of_whitespace_or_markup_only_is_none():
    s = ClauseSplitter()
    s.push("  ** ")
    assert s.flush() is None


def test_markup_only_remainder_is_not_emitted():
    s = ClauseSplitter()
    assert s.push("Hello. ** ") == ["Hello."]
    assert s.push("## ") == []
    assert s.flush() is None


def test_clauses_are_cleaned_of_markdown():
    s = ClauseSplitter()
    assert s.push("The `gate` is [B12](http://x/b12). **Next** one") == ["The gate is B12."]
    assert s.flush() == "Next one"


def test_markup_before_punctuation_keeps_words():
    # clean_for_speech replaces markup by a space, so "**Yes**," becomes "Yes ,": spacing aside, words survive
    s = ClauseSplitter(first_clause_words=4)
    (clause,) = s.push("**Yes**, I think so. ")
    assert re.sub(r"\s+([,.;:!?])", r"\1", clause) == "Yes, I think so."


@pytest.mark.parametrize(
    "raw, spoken",
    [
        ("**bold** text", "bold text"),
        ("__also bold__ here", "also bold here"),
        ("*italic* word", "italic word"),
        ("# Heading", "Heading"),
        ("## Sub heading\nbody", "Sub heading body"),
        ("run `make test` now", "run make test now"),
        ("```code```", "code"),
        ("see [the link](http://x) please", "see the link please"),
        ("see [our site](https://example.com/a?b=c) now", "see our site now"),
        ("> quoted", "quoted"),
        ("~~gone~~ kept", "gone kept"),
        ("a | b", "a b"),
        ("  lots   of\n\nspace  ", "lots of space"),
        ("plain text, 3.50 and 8:30.", "plain text, 3.50 and 8:30."),
    ],
)
def test_clean_for_speech_removes_markdown(raw, spoken):
    assert clean_for_speech(raw) == spoken


def test_clean_for_speech_keeps_no_markdown_symbols():
    out = clean_for_speech("# Title\n**Bold** and `code` and [link](http://x) and _em_")
    assert not set(out) & set("*_#`[]()")
    assert "http" not in out
    assert out == "Title Bold and code and link and em"


def hurried(text: str, low: bool = True) -> list[str]:
    splitter = ClauseSplitter(running_low=lambda: low)
    out = [clause for piece in tokens(text) for clause in splitter.push(piece)]
    return out + [splitter.flush()]


def test_running_low_cuts_a_long_clause_at_a_word_boundary():
    assert hurried("A second checked bag costs forty dollars. Bye") == ["A second checked bag", "costs forty dollars.", "Bye"]
    assert hurried("A second checked bag costs forty dollars. Bye", low=False) == ["A second checked bag costs forty dollars.", "Bye"]


def test_a_hurried_cut_waits_for_the_word_to_end_and_never_trails_off_or_splits_a_number():
    s = ClauseSplitter(running_low=lambda: True)
    assert s.push("Drivers must be at") == [], "the fourth word may still be growing"
    assert s.push(" least twenty two years old") == ["Drivers must be at least"], "not after 'at'"
    assert hurried("The fee is thirty five dollars an hour") == ["The fee is thirty five dollars", "an hour"]
    assert hurried("You pay 35 dollars an hour") == ["You pay 35 dollars", "an hour"]


def test_punctuation_still_wins_when_running_low():
    assert hurried("Sure, the checked bag fee today is") == ["Sure,", "the checked bag fee", "today is"]
