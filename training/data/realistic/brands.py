"""A brand profile composed from a sector pool: 6 to 16 of its topics with drawn values, written as the company
writes them, every value a reply must say standing in exactly one fact."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from pipeline.profile import Profile, parse_profile
from training.data.brands import AGENT_NAMES, profile_data
from training.data.realistic.pools import SectorPool, Topic
from training.data.values import Value, ValueGen, clock, count, money, percent, tidy
from training.textnorm import normalize

MONEY_UNITS = {"money": "dollars", "cents": "dollars", "pounds": "pounds", "euros": "euros"}
REDRAWS = 30


def value_gen(spec: str) -> ValueGen:
    """A pool's value spec ("money 35-80 step 5", "count 2-6 working days", "clock 7:30,8") as a value generator."""
    kind, _, rest = spec.partition(" ")
    step = int(m[1]) if (m := re.search(r"\bstep (\d+)", rest)) else 1
    rest = re.sub(r"\s*\bstep \d+", "", rest).strip()
    if kind in MONEY_UNITS:
        lo, hi = map(int, rest.split("-"))
        unit = MONEY_UNITS[kind]
        return money(lo, hi, step, cents=kind == "cents", unit=unit, signs=(unit,))
    if kind == "count":
        span, _, unit = rest.partition(" ")
        lo, hi = map(int, span.split("-"))
        return count(lo, hi, unit, step)
    if kind == "percent":
        lo, hi = map(int, rest.split("-"))
        return percent(lo, hi, step)
    if kind == "clock":
        return clock(tuple((int(h), int(m)) if m else int(h) for h, _, m in (t.partition(":") for t in rest.split(","))))
    options = tuple(o.strip() for o in rest.split("|"))
    return lambda rng: (text := rng.choice(options)) and Value(text, text, (text,))


def value_class(spec: str) -> str:
    """Values of one class can be confused with each other: money, a clock time, a percentage, or a count's unit."""
    kind, _, rest = spec.partition(" ")
    if kind in MONEY_UNITS:
        return "money"
    if kind == "count":
        return "count " + re.sub(r"\s*\bstep \d+", "", rest).partition(" ")[2].rstrip("s")
    return kind


@dataclass(frozen=True)
class Stated:
    """One topic as a profile states it: the drawn values and the written fact."""

    topic: Topic
    values: dict[str, Value]
    fact: str

    def fill(self, template: str, names: dict[str, str], brand: str) -> str:
        """An answer template with the values as spoken."""
        return tidy(template.format(**names, brand=brand, **{k: v.spoken for k, v in self.values.items()}))


@dataclass(frozen=True)
class RealBrand:
    profile: Profile
    pool: SectorPool
    agent: str
    team: str | None
    stated: tuple[Stated, ...]
    absent: tuple[Topic, ...]
    names: dict[str, str]

    @property
    def name(self) -> str:
        return self.profile.brand

    @property
    def sector(self) -> SectorPool:
        return self.pool

    def distractors(self, stated: Stated, slot: str) -> list[str]:
        """Values of other facts that could be mistaken for this one (same class), never one this fact also states."""
        mine = {normalize(c) for v in stated.values.values() for c in v.checks}
        want = value_class(stated.topic.values[slot])
        out = []
        for other in self.stated:
            if other is stated:
                continue
            for key, value in other.values.items():
                if value_class(other.topic.values[key]) == want and not {normalize(c) for c in value.checks} & mine:
                    out += list(value.checks)
        return sorted(set(out))

    def without(self, stated: Stated) -> RealBrand:
        """The same brand with one fact taken out of its profile (its topic then absent)."""
        profile = self.profile.model_copy(update={"facts": [f for f in self.profile.facts if f != stated.fact]})
        kept = tuple(s for s in self.stated if s is not stated)
        return RealBrand(profile, self.pool, self.agent, self.team, kept, self.absent + (stated.topic,), self.names)

    def all_values(self) -> list[str]:
        return sorted({c for s in self.stated for v in s.values.values() for c in v.checks if re.search(r"\d", normalize(c))})


def _draw(rng: random.Random, topic: Topic, names: dict[str, str], brand: str, taken: set[str]) -> Stated:
    """Values for one topic whose checks appear nowhere else in the profile (redrawn on a clash)."""
    for _ in range(REDRAWS):
        values = {slot: value_gen(spec)(rng) for slot, spec in topic.values.items()}
        checks = [normalize(c) for v in values.values() for c in v.checks]
        if len(set(checks)) == len(checks) and not set(checks) & taken:
            break
    fact = rng.choice(topic.facts).format(**names, brand=brand, **{k: v.written for k, v in values.items()})
    fact = tidy(fact[:1].upper() + fact[1:])
    return Stated(topic, values, fact)


def _clashes(new: Stated, kept: list[Stated]) -> bool:
    """Whether a value of `new` shows up in a kept fact's text, or a kept value in `new`'s (each required value must
    stand in one fact only)."""

    def inside(values: Stated, text: str) -> bool:
        return any(f" {normalize(c)} " in f" {normalize(text)} " for v in values.values.values() for c in v.checks)

    return any(inside(new, k.fact) or inside(k, new.fact) for k in kept)


def make_real_brand(
    rng: random.Random, pool: SectorPool, brand: str, facts: tuple[int, int], tools_share: float, team_share: float = 0.9
) -> RealBrand:
    """A brand with facts[0] to facts[1] of its sector's topics (at least two stay absent for unknown questions)."""
    agent = rng.choice(AGENT_NAMES)
    names = {key: rng.choice(options) for key, options in sorted(pool.names.items())}
    topics = list(pool.topics)
    rng.shuffle(topics)
    n = rng.randint(facts[0], min(facts[1], len(topics) - 2))
    stated: list[Stated] = []
    taken: set[str] = set()
    for topic in topics:
        if len(stated) == n:
            break
        s = _draw(rng, topic, names, brand, taken)
        if not _clashes(s, stated):
            stated.append(s)
            taken |= {normalize(c) for v in s.values.values() for c in v.checks}
    team = rng.choice(pool.teams).format(brand=brand) if rng.random() < team_share else None
    data = profile_data(rng, brand, pool.name, agent, pool.roles, [s.fact for s in stated], pool.policies, team, at="at")
    if rng.random() < tools_share:
        data["tools"] = ([{"name": "transfer_to_human"}] if team else []) + [{"name": "end_call"}]
    keys = {s.topic.key for s in stated}
    absent = tuple(t for t in topics if t.key not in keys)
    return RealBrand(parse_profile(data, brand), pool, agent, team, tuple(stated), absent, names)
