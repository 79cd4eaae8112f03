"""Numbers as a person says them on the phone, and profile text rewritten that way for the prompt.

A 135M model copies a phrase from its prompt far more reliably than it turns "$450" into words, so the prompt
builder gives it facts already spoken ("four hundred fifty dollars") and the model only has to repeat them.
"""

from __future__ import annotations

import re

UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
MONEY_SIGNS = {"$": "dollars", "€": "euros", "£": "pounds"}


def number_words(n: int) -> str:
    """12 -> "twelve", 125 -> "one hundred twenty five", 2500 -> "two thousand five hundred"."""
    if n < 0:
        return "minus " + number_words(-n)
    if n < 20:
        return UNITS[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + UNITS[n % 10])
    for scale, size in (("million", 1_000_000), ("thousand", 1000), ("hundred", 100)):
        if n >= size:
            head, rest = divmod(n, size)
            return f"{number_words(head)} {scale}" + ("" if rest == 0 else " " + number_words(rest))
    raise AssertionError(n)


def say_money(amount: float, unit: str = "dollars") -> str:
    """30 -> "thirty dollars", 4.99 -> "four dollars ninety nine", 1 -> "one dollar"."""
    whole, cents = divmod(round(amount * 100), 100)
    name = unit[:-1] if whole == 1 and unit.endswith("s") else unit
    return f"{number_words(whole)} {name}" + (f" {number_words(cents)}" if cents else "")


def say_time(hour: int, minute: int = 0) -> str:
    """(9, 0) -> "nine a.m.", (13, 30) -> "one thirty p.m.", (12, 0) -> "twelve p.m."."""
    suffix = "a.m." if hour % 24 < 12 else "p.m."
    h12 = hour % 12 or 12
    mins = "" if minute == 0 else " " + (f"oh {UNITS[minute]}" if minute < 10 else number_words(minute))
    return f"{number_words(h12)}{mins} {suffix}"


def say_digits(code: str) -> str:
    """Read a code out character by character: "K7Q2" -> "K 7 Q 2" (spaces keep TTS from reading it as a word)."""
    return " ".join(code.replace("-", "").replace(" ", ""))


def say_phone(number: str) -> str:
    """ "1-800-555-0199" -> "one, eight zero zero, five five five, zero one nine nine": digit by digit, a pause per group."""
    return ", ".join(" ".join(UNITS[int(d)] for d in group) for group in number.split("-"))


def _integer(text: str) -> int:
    return int(text.replace(",", ""))


def _money(m: re.Match) -> str:
    groups = m.groupdict()
    amount = _integer(groups["whole"]) + (int(groups["cents"]) / 100 if groups["cents"] else 0)
    return say_money(amount, groups.get("unit") or MONEY_SIGNS[groups["sign"]])


def _clock(m: re.Match) -> str:
    hour = int(m["hour"]) % 12 + (12 if m["half"] == "p" else 0)
    return say_time(hour, int(m["minute"] or 0))


def _plain_number(m: re.Match) -> str:
    whole = number_words(_integer(m["whole"]))
    return whole + (" point " + " ".join(UNITS[int(d)] for d in m["frac"]) if m["frac"] else "")


_NUMBER = r"(?P<whole>\d{1,3}(?:,\d{3})+|\d+)"
_SPEAKERS = [
    (re.compile(r"(?<![\w-])\d{1,4}(?:-\d{2,4}){2,3}(?![\w-])"), lambda m: say_phone(m[0])),
    (re.compile(rf"(?P<sign>[$€£])\s?{_NUMBER}(?:\.(?P<cents>\d\d))?(?!\d)"), _money),
    (re.compile(rf"(?<![\w.]){_NUMBER}(?:\.(?P<cents>\d\d))?\s(?P<unit>dollars|euros|pounds)\b"), _money),
    (re.compile(r"(?<![\w.])(?P<n>\d+)\s?(?:%|percent\b)"), lambda m: f"{number_words(int(m['n']))} percent"),
    (re.compile(r"(?<![\w.:])(?P<hour>\d{1,2})(?::(?P<minute>\d\d))?\s?(?P<half>[ap])\.?m\b\.?"), _clock),
    (re.compile(rf"(?<![\w.,-]){_NUMBER}(?:\.(?P<frac>\d+))?(?![\w]|[.,]\d)"), _plain_number),
]


def speakable(text: str) -> str:
    """Profile text with its written numbers as a person says them: prices, percentages, times, phone numbers, counts.

    Codes, ordinals and anything else glued to letters ("HX-48213", "21st", "A4") are left as written.
    """
    for pattern, speak in _SPEAKERS:
        text = pattern.sub(speak, text)
    return text
