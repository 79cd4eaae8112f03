"""How callers of one split word their turns: tone wrappers, lead-in context, two questions in one turn, and the way
speech recognition writes them down (lowercase, no punctuation, fillers, a misheard word)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import cache

import yaml

from training.data.callers import OPENERS, lower_first
from training.data.realistic.pools import POOLS, SPLITS

COMPOSED_SHARE = 0.5  # caller turns whose wrapper is composed from parts, where the pool has them (train)
PERSON_LINE_SHARE = 0.5  # requests for a person taken whole from the pool's lines where it also has parts to compose
MISHEARD = {  # words Whisper tiny often gets wrong on the phone
    "their": "there",
    "there": "their",
    "for": "four",
    "to": "too",
    "two": "to",
    "weight": "wait",
    "fair": "fare",
    "fare": "fair",
    "hour": "our",
    "our": "hour",
    "week": "weak",
    "buy": "by",
    "right": "write",
    "new": "knew",
    "cost": "cast",
    "price": "prize",
    "book": "look",
    "much": "munch",
    "car": "card",
    "pay": "play",
    "then": "than",
}


@dataclass(frozen=True)
class CallerPool:
    wraps: dict[str, tuple[str, ...]]
    context: tuple[str, ...]
    two_fact: tuple[str, ...]
    human: tuple[str, ...]
    small_talk: dict[str, tuple[str, ...]]
    off_topic: tuple[str, ...]
    corrections: tuple[str, ...]
    fillers: tuple[str, ...]
    before: dict[str, tuple[str, ...]] = field(default_factory=dict)  # composed wrappers: a tone's opening remarks
    after: dict[str, tuple[str, ...]] = field(default_factory=dict)  # ... its closing remarks
    asides: tuple[str, ...] = ()  # ... and remarks any caller makes
    person_asks: tuple[str, ...] = ()  # composed requests for a person: frames with {who}...
    person_who: tuple[str, ...] = ()  # ... whom they ask for...
    person_reasons: tuple[str, ...] = ()  # ... and why
    openers: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(OPENERS))  # the agent's first words per tone

    @property
    def tones(self) -> tuple[str, ...]:
        return tuple(self.wraps)

    def strings(self) -> set[str]:
        """Every line of the pool (for the split-disjointness check)."""
        groups = [
            *self.wraps.values(),
            *self.small_talk.values(),
            self.context,
            self.two_fact,
            self.human,
            self.off_topic,
            self.corrections,
            *self.before.values(),
            *self.after.values(),
            self.asides,
            self.person_asks,
            self.person_who,
            self.person_reasons,
        ]
        return {s for g in groups for s in g}


@cache
def caller_pool(split: str) -> CallerPool:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}")
    raw = yaml.safe_load((POOLS / split / "_callers.yaml").read_text(encoding="utf-8"))
    tup = lambda v: tuple(str(s) for s in v)  # noqa: E731
    parts = raw.get("parts") or {}
    person = parts.get("person") or {}
    return CallerPool(
        {k: tup(v) for k, v in raw["wraps"].items()},
        tup(raw["context"]),
        tup(raw["two_fact"]),
        tup(raw["human"]),
        {k: tup(v) for k, v in raw["small_talk"].items()},
        tup(raw["off_topic"]),
        tup(raw["corrections"]),
        tup(raw["fillers"]),
        {k: tup(v) for k, v in parts.get("before", {}).items()},
        {k: tup(v) for k, v in parts.get("after", {}).items()},
        tup(parts.get("asides", ())),
        tup(person.get("asks", ())),
        tup(person.get("who", ())),
        tup(person.get("reasons", ())),
        {**OPENERS, **{k: tup(v) for k, v in (parts.get("agent_openers") or {}).items()}},  # the pool's own for the tones it names
    )


def asr_style(rng: random.Random, text: str, misheard: float = 0.3) -> str:
    """The line as Whisper writes a phone caller: lowercase, no punctuation, maybe a filler and one misheard word."""
    out = re.sub(r"[^\w\s'$£€%.:-]|(?<!\d)[.:](?!\d)", " ", text.lower())
    tokens = out.split()
    if rng.random() < misheard:
        swappable = [i for i, t in enumerate(tokens) if t in MISHEARD]
        if swappable:
            i = rng.choice(swappable)
            tokens[i] = MISHEARD[tokens[i]]
    return " ".join(tokens)


def with_fillers(rng: random.Random, pool: CallerPool, text: str) -> str:
    words = text.split()
    at = rng.randrange(len(words) // 2 + 1) if words else 0
    return " ".join(words[:at] + [rng.choice(pool.fillers)] + words[at:])


def composed_wrap(rng: random.Random, pool: CallerPool, tone: str, ask: str) -> str:
    """The question inside remarks drawn piece by piece: the tone's opening, maybe an aside, maybe the tone's closing."""
    pieces = [rng.choice(pool.before[tone])] if rng.random() < 0.85 else []
    if rng.random() < 0.3:
        pieces.append(rng.choice(pool.asides))
    pieces.append(ask)
    if rng.random() < 0.35:
        pieces.append(rng.choice(pool.after[tone]))
    return " ".join(pieces)


def person_request(rng: random.Random, pool: CallerPool, tone: str, team: str | None) -> str:
    """A request for a person: a pool line, or (where the pool has the parts, half the time) one composed from a frame,
    whom the caller asks for (sometimes the brand's own team), maybe a reason, the tone's remarks and speech
    recognition's writing."""
    if not pool.person_asks or rng.random() < PERSON_LINE_SHARE:
        return rng.choice(pool.human)
    who = team if team and rng.random() < 0.3 else rng.choice(pool.person_who)
    ask = rng.choice(pool.person_asks).format(who=who)
    if rng.random() < 0.5:
        reason = rng.choice(pool.person_reasons)
        ask = f"{reason} {ask}" if rng.random() < 0.5 else f"{ask} {reason}"
    line = composed_wrap(rng, pool, tone, ask) if rng.random() < 0.6 else ask
    return asr_style(rng, line) if rng.random() < 0.3 else line


def caller_turn(rng: random.Random, pool: CallerPool, tone: str, ask: str, asr_share: float = 0.3) -> str:
    """One caller turn around a question: a tone wrapper, sometimes a lead-in, sometimes as speech recognition writes it."""
    if rng.random() < 0.25:
        ask = f"{rng.choice(pool.context)} {ask}"
    if pool.before and rng.random() < COMPOSED_SHARE:
        line = composed_wrap(rng, pool, tone, ask)
    else:
        line = rng.choice(pool.wraps[tone]).format(ask=ask, ask_lc=lower_first(ask))
    if rng.random() < asr_share:
        line = asr_style(rng, with_fillers(rng, pool, line) if rng.random() < 0.5 else line)
    return line


def two_questions(rng: random.Random, pool: CallerPool, first: str, second: str) -> str:
    return rng.choice(pool.two_fact).format(ask1=first, ask2_lc=lower_first(second))


def corrected(rng: random.Random, pool: CallerPool, first: str, second: str) -> str:
    """A caller who asks one thing, then takes it back and asks another."""
    return f"{first} {rng.choice(pool.corrections)} {lower_first(second)}"
