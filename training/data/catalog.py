"""The shapes the sector tables are written in: fact intents, slot-filling intents, sectors."""

from __future__ import annotations

from dataclasses import dataclass

from training.data.values import ValueGen


@dataclass(frozen=True)
class FactIntent:
    """A question whose answer is one fact of the brand's profile."""

    name: str
    fact: str  # profile text, "{v}" is the written value
    value: ValueGen
    topic: str  # a noun phrase: "the checked bag fee"
    asks: tuple[str, ...]  # how callers ask it
    answers: tuple[str, ...]  # the agent's sentence, "{v}" is the spoken value


@dataclass(frozen=True)
class SlotIntent:
    """A request about the caller's own record: ask for its code, read it back, then answer or transfer."""

    name: str
    asks: tuple[str, ...]
    slot: str  # "booking code"
    shape: str  # values.make_code's shape: letters_digits (K7Q2ZP), digits (4821937) or prefixed (HX-48213)
    follow_fact: str | None  # a FactIntent to state once the code is confirmed, else transfer
    done: str  # what the agent says it will do: "pull up that booking"


@dataclass(frozen=True)
class Sector:
    name: str
    suffixes: tuple[str, ...]  # brand = stem + suffix
    roles: tuple[str, ...]  # persona: "the phone agent"
    teams: tuple[str, ...]  # escalation descriptions, "{brand}" allowed
    policies: tuple[str, ...]
    facts: tuple[FactIntent, ...]
    slots: tuple[SlotIntent, ...]
