"""The normalizer that lets "$30" match "thirty dollars"."""

from __future__ import annotations

import re

from pipeline.spoken import MONEY_SIGNS, TENS, UNITS

ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "eleventh": 11,
    "twelfth": 12,
    "thirteenth": 13,
    "fourteenth": 14,
    "fifteenth": 15,
    "sixteenth": 16,
    "seventeenth": 17,
    "eighteenth": 18,
    "nineteenth": 19,
    "twentieth": 20,
    "thirtieth": 30,
    "fortieth": 40,
    "fiftieth": 50,
    "sixtieth": 60,
    "seventieth": 70,
    "eightieth": 80,
    "ninetieth": 90,
}
ORDINAL_END = "||"  # after an ordinal: "the first 30 minutes" is 1 and 30, never 130
SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
WORD_VALUES = {w: i for i, w in enumerate(UNITS)} | {w: 10 * i for i, w in enumerate(TENS) if w != "_"}


def _parse_number(tokens: list[str], i: int) -> tuple[int, int]:
    """Parse one spoken number starting at tokens[i]; (value, index after it). "five five" is two numbers."""
    total, current, prev, j = 0, 0, "", i
    while j < len(tokens):
        word = tokens[j]
        if word in ORDINALS and prev in ("", "ten"):
            return total + current + ORDINALS[word], j + 1
        if word in WORD_VALUES:
            value = WORD_VALUES[word]
            if prev in ("unit", "teen") or (prev == "ten" and value >= 10):
                break
            current += value
            prev = "ten" if value >= 20 else "teen" if value >= 10 else "unit"
        elif word == "hundred" and prev in ("unit", "teen"):
            current, prev = current * 100, "hundred"
        elif word in ("thousand", "million") and prev and prev != "scale":
            total, current, prev = total + current * SCALES[word], 0, "scale"
        elif word == "and" and prev in ("hundred", "scale") and j + 1 < len(tokens) and tokens[j + 1] in WORD_VALUES:
            pass
        else:
            break
        j += 1
    return total + current, j


def _words_to_digits(tokens: list[str]) -> list[str]:
    """["thirty", "five", "dollars"] -> ["35", "dollars"]; other words pass through."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        value, j = _parse_number(tokens, i)
        if j == i:
            out.append(tokens[i])
            i += 1
        else:
            out.append(str(value))
            if tokens[j - 1] in ORDINALS:
                out.append(ORDINAL_END)
            i = j
    return out


def _join_codes(tokens: list[str]) -> list[str]:
    """Join adjacent digit groups ("1 800 555" -> "1800555") and spelled codes ("k 7 q 2" -> "k7q2"); "||" (a
    sentence end) stops both."""
    joined: list[str] = []
    for token in tokens:
        if token.isdigit() and joined and joined[-1].isdigit():
            joined[-1] += token
        else:
            joined.append(token)
    out: list[str] = []
    i = 0
    while i < len(joined):
        j = i
        while j < len(joined) and (len(joined[j]) == 1 or joined[j].isdigit()):
            j += 1
        run = joined[i:j]
        mixed = len(run) >= 3 and any(t.isalpha() for t in run) and any(t.isdigit() for t in run)
        if mixed or (len(run) >= 4 and all(t.isalpha() for t in run)):  # "k 7 q 2", "a n w m t q"
            out.append("".join(run))
        else:
            out.extend(run or [joined[i]])
        i = max(j, i + 1)
    return out


_SUBSTITUTIONS = [
    (r"(\d),(\d{3})", r"\1\2"),  # 1,200 -> 1200
    (r"(?<=\d)-(?=[a-z0-9])|(?<=[a-z0-9])-(?=\d)", ""),  # HX-48213, 1-800-555-0199
    (r"([$€£])\s?(\d+)\.(\d\d)\b", lambda m: f"{m[2]} {MONEY_SIGNS[m[1]]} {m[3]}"),
    (r"([$€£])\s?(\d+)", lambda m: f"{m[2]} {MONEY_SIGNS[m[1]]}"),
    (r"\b(\d+)\.(\d\d) (dollars|euros|pounds)\b", r"\1 \3 \2"),
    (r"\b(dollars?|euros?|pounds?) and (\w+(?: \w+)?) cents?\b", r"\1 \2"),
    (r"\b(\d+)\.(\d+)\b", r"\1 point \2"),
    (r"%", " percent"),
    (r"\b(\d+)(st|nd|rd|th)\b", rf"\1 {ORDINAL_END} "),
    (r"\b([ap])\.?\s?m\b\.?", r" \1m"),
    (r"(\d+):00\b", r"\1"),
    (r"(\d+):(\d\d)\b", r"\1 \2"),
    (r"\bo'?clock\b", ""),
    (r"\bnoon\b", "12 pm"),
    (r"\bmidnight\b", "12 am"),
    (r"\b(dollar|euro|pound|day|hour|minute|week|month|year|night|bag|point)s\b", r"\1"),
    (r"\ba (hundred|thousand|million)\b", r"one \1"),
    (r"\boh (?=(one|two|three|four|five|six|seven|eight|nine)\b)", "zero "),
    (r"['’]", ""),
]


def normalize(text: str) -> str:
    """Lowercase, numbers as digits, "$30" -> "30 dollar", "9 a.m." -> "9 am", punctuation dropped; an ordinal
    never runs into the number after it."""
    text = text.lower().replace("-", " - ")
    text = re.sub(r"(?<=\w) - (?=\w)", "-", text)
    for pattern, repl in _SUBSTITUTIONS:
        text = re.sub(pattern, repl, text)
    text = re.sub(r"[.!?]+", " || ", text.replace("-", " "))  # a sentence end also ends a spelled code
    text = re.sub(r"[,;:()+/]+", " | ", text)  # a pause (or a bracket, "65+", "8/10") ends a spoken number
    tokens = re.sub(r"[^a-z0-9| ]+", " ", text).split()
    return " ".join(t for t in _join_codes([t for t in _words_to_digits(tokens) if t != "|"]) if t != "||")


def contains(haystack: str, needle: str) -> bool:
    """Whether `needle` occurs in `haystack` as whole words, after normalizing both."""
    want = normalize(needle)
    return bool(want) and f" {want} " in f" {normalize(haystack)} "
