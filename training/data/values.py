"""Randomized fact values: how the profile writes one, how the agent says it, what a check looks for."""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.spoken import MONEY_SIGNS, number_words, say_digits, say_money, say_phone, say_time


@dataclass(frozen=True)
class Value:
    written: str  # as it appears in the profile's facts
    spoken: str  # as the agent says it on the phone
    checks: tuple[str, ...]  # what a correct reply must contain (matched after normalization)


ValueGen = Callable[[random.Random], Value]


SIGNS = {unit: sign for sign, unit in MONEY_SIGNS.items()}


def money(lo: int, hi: int, step: int = 1, cents: bool = False, unit: str = "dollars", signs: tuple[str, ...] = ("dollars",)) -> ValueGen:
    """An amount like 30 dollars; written as "$30" or "30 dollars" (a sign for the units in `signs`), spoken "thirty dollars"."""

    def gen(rng: random.Random) -> Value:
        amount = rng.randrange(lo, hi + 1, step) + (rng.choice([0.49, 0.99, 0.5]) if cents else 0)
        digits = f"{amount:.2f}" if cents else str(int(amount))
        written = rng.choice([f"{SIGNS[unit]}{digits}", f"{digits} {unit}"]) if unit in signs else f"{digits} {unit}"
        return Value(written, say_money(amount, unit), (f"{digits} {unit}",))

    return gen


def count(lo: int, hi: int, unit: str, step: int = 1) -> ValueGen:
    """A quantity with its unit, like 5 business days; written with digits or words."""

    def gen(rng: random.Random) -> Value:
        n = rng.randrange(lo, hi + 1, step)
        name = unit if n != 1 else unit.removesuffix("s")
        written = rng.choice([f"{n} {name}", f"{number_words(n)} {name}"]).strip()
        return Value(written, f"{number_words(n)} {name}".strip(), (f"{n} {name}".strip(),))

    return gen


def percent(lo: int, hi: int, step: int = 5) -> ValueGen:
    def gen(rng: random.Random) -> Value:
        n = rng.randrange(lo, hi + 1, step)
        return Value(rng.choice([f"{n}%", f"{n} percent"]), f"{number_words(n)} percent", (f"{n} percent",))

    return gen


def _clock(hour: int, style: int, minute: int = 0) -> str:
    h12, suffix = hour % 12 or 12, "am" if hour < 12 else "pm"
    if minute:
        return [f"{h12}:{minute:02d} {suffix}", f"{h12}:{minute:02d} {suffix}", f"{h12}:{minute:02d} {suffix[0]}.m."][style]
    return [f"{h12} {suffix}", f"{h12}:00 {suffix}", f"{h12} {suffix[0]}.m."][style]


def clock(hours: tuple[int | tuple[int, int], ...]) -> ValueGen:
    """One time of day, like 11 am; an (hour, minute) pair gives 7:30 am."""

    def gen(rng: random.Random) -> Value:
        pick = rng.choice(hours)
        hour, minute = pick if isinstance(pick, tuple) else (pick, 0)
        said = say_time(hour, minute)
        return Value(_clock(hour, rng.randrange(3), minute), said, (said,))

    return gen


def hours(opens: tuple[int, ...], closes: tuple[int, ...], days: tuple[str, ...] = ("",)) -> ValueGen:
    """Opening hours, like "Monday to Friday from 9 am to 5 pm"."""

    def gen(rng: random.Random) -> Value:
        start, end, style, span = rng.choice(opens), rng.choice(closes), rng.randrange(3), rng.choice(days)
        prefix = f"{span} " if span else ""
        written = f"{prefix}from {_clock(start, style)} to {_clock(end, style)}"
        spoken = f"{prefix}from {say_time(start)} to {say_time(end)}"
        return Value(written, spoken, (say_time(start), say_time(end)))

    return gen


def phone() -> ValueGen:
    """A toll-free number, read out in groups."""

    def gen(rng: random.Random) -> Value:
        area, line = rng.choice(["800", "888", "877", "866"]), f"{rng.randrange(10000):04d}"
        written = f"1-{area}-555-{line}"
        return Value(written, say_phone(written), (written,))

    return gen


def choice(options: tuple[str, ...]) -> ValueGen:
    """One of a few words or phrases, said as written."""

    def gen(rng: random.Random) -> Value:
        text = rng.choice(options)
        return Value(text, text, (text,))

    return gen


def tidy(text: str) -> str:
    """Drop the doubled period a value ending in "a.m." leaves before a sentence's full stop."""
    return re.sub(r"([ap]\.m\.)\.(?=\s|$)", r"\1", text)


def make_code(rng: random.Random, shape: str) -> str:
    """A booking/order/account code of one shape: K7Q2ZP, 4821937 or HX-48213."""
    if shape == "letters_digits":
        alphabet = string.ascii_uppercase.replace("O", "").replace("I", "") + "23456789"
        return "".join(rng.choice(alphabet) for _ in range(6))
    if shape == "digits":
        return str(rng.randrange(1_000_000, 9_999_999))
    return "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(2)) + f"-{rng.randrange(10000, 99999)}"


def spoken_code(code: str) -> str:
    """How the agent reads a code back: one character at a time."""
    return say_digits(code)
