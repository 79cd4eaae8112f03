"""Sector pools written as YAML: topics with their fact wordings, caller questions and agent answers.

Train and held-out pools live in separate folders and are written separately, so the held-out scenarios share no
sector, fact wording or caller line with training (tests assert it). One file per sector:

    sector: ferry operator
    brand_suffixes: [Ferries, Sea Link]            # brand name = a stem + one suffix
    roles: [the bookings assistant]                # persona: "You are Ava, the bookings assistant of ..."
    teams: [a sailings coordinator, "the {brand} customer desk"]
    policies: ["Never promise a refund for a cancelled sailing; the customer desk decides."]
    names: {port: [Gannet Quay, Port Ellis]}       # optional: one is drawn per brand, usable as {port} anywhere
    unknowns: ["Can I leave my car in the terminal car park for a week?"]   # near a topic, answered by none
    topics:
      - key: car_fare
        values: {a: money 35-80, b: count 5-7 metres, c: money 85-120}
        facts:                                     # how a company writes it: {a} is the written value
          - "Car deck tickets cost {a} one way including the driver; vehicles longer than {b} pay {c}."
        asks:                                      # per value a caller may ask for: their own words
          a: ["What does it cost to take my car over?", "how much to bring the car on the boat"]
          c: ["We've got a big camper van, what would that be?"]
        answers:                                   # the agent's sentence: {a} is the spoken value
          a: ["A car with its driver is {a} each way."]
          c: ["Vehicles longer than {b} are {c} each way."]
        choice:                                    # optional: the agent asks which case applies
          question: "Is it a regular car, or longer than {b}?"
          a: ["just a normal hatchback"]
          c: ["it's a camper van, about seven metres"]

Value specs: `money LO-HI [step N]` (also `pounds`, `euros`), `cents LO-HI` (money with cents), `count LO-HI UNIT
[step N]` (UNIT may be several words: `count 2-6 working days`), `percent LO-HI [step N]`, `clock H,H,...` (24 h, `7:30`
allowed), `words A|B|C` (said as written).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

POOLS = Path(__file__).resolve().parent / "pools"
SPLITS = ("train", "heldout")
VALUE_KINDS = ("money", "pounds", "euros", "cents", "count", "percent", "clock", "words")
_SLOT = re.compile(r"\{([a-z_]+)\}")


class PoolError(ValueError):
    """A pool file breaks the schema; the message names the file, the topic and the field."""


@dataclass(frozen=True)
class Topic:
    key: str
    values: dict[str, str]  # slot -> value spec
    facts: tuple[str, ...]
    asks: dict[str, tuple[str, ...]]  # slot asked for -> caller questions
    answers: dict[str, tuple[str, ...]]  # slot asked for -> agent sentences
    choice: dict | None = None  # {"question": str, slot: (caller replies, ...), ...}


@dataclass(frozen=True)
class SectorPool:
    name: str
    split: str
    brand_suffixes: tuple[str, ...]
    roles: tuple[str, ...]
    teams: tuple[str, ...]
    policies: tuple[str, ...]
    names: dict[str, tuple[str, ...]]
    unknowns: tuple[str, ...]
    topics: tuple[Topic, ...]

    @property
    def suffixes(self) -> tuple[str, ...]:
        """What `training.data.brands.brand_names` puts after a stem."""
        return self.brand_suffixes


def _strings(value, where: str, minimum: int = 1) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or len(value) < minimum or not all(isinstance(v, str) and v.strip() for v in value):
        raise PoolError(f"{where}: expected a list of at least {minimum} non-empty strings")
    return tuple(v.strip() for v in value)


def check_spec(spec: str, where: str) -> None:
    kind, _, rest = spec.partition(" ")
    if kind not in VALUE_KINDS or not rest.strip():
        raise PoolError(f"{where}: value spec {spec!r} must start with one of {', '.join(VALUE_KINDS)}")
    if kind in ("money", "pounds", "euros", "cents", "count", "percent") and not re.match(r"\d+-\d+\b", rest):
        raise PoolError(f"{where}: value spec {spec!r} needs a range LO-HI")
    if kind == "count" and len(rest.split()) < 2 and "step" not in rest:
        raise PoolError(f"{where}: count spec {spec!r} needs a unit")
    if kind == "clock" and not re.fullmatch(r"\d{1,2}(:\d\d)?(,\d{1,2}(:\d\d)?)*", rest.strip()):
        raise PoolError(f"{where}: clock spec {spec!r} must be hours like 7,8,9:30")


def _topic(raw: dict, where: str, names: set[str]) -> Topic:
    where = f"{where}, topic {raw.get('key', '?')}"
    values = raw.get("values") or {}
    if not isinstance(values, dict) or not values:
        raise PoolError(f"{where}: values must map slots (a, b, ...) to specs")
    for slot, spec in values.items():
        check_spec(str(spec), f"{where}, value {slot}")
    facts = _strings(raw.get("facts"), f"{where}, facts")
    known = set(values) | names | {"brand"}
    for text in facts:
        used = set(_SLOT.findall(text))
        if used - known or set(values) - used:
            raise PoolError(f"{where}: fact {text!r} must use every value slot {sorted(values)} and no other")
    asks = {k: _strings(v, f"{where}, asks.{k}") for k, v in (raw.get("asks") or {}).items()}
    answers = {k: _strings(v, f"{where}, answers.{k}") for k, v in (raw.get("answers") or {}).items()}
    if not asks or set(asks) - set(values) or set(asks) != set(answers):
        raise PoolError(f"{where}: asks and answers must cover the same value slots")
    for slot, texts in answers.items():
        for text in texts:
            if slot not in _SLOT.findall(text) or set(_SLOT.findall(text)) - known:
                raise PoolError(f"{where}: answer {text!r} must say {{{slot}}} and use only known slots")
    for texts in asks.values():
        for text in texts:
            if set(_SLOT.findall(text)) - names - {"brand"}:
                raise PoolError(f"{where}: ask {text!r} may use only {{brand}} and names, never a value")
    choice = raw.get("choice")
    if choice is not None:
        if not isinstance(choice, dict) or "question" not in choice or len(set(choice) - {"question"}) < 2:
            raise PoolError(f"{where}: choice needs a question and replies for at least two slots")
        if set(choice) - {"question"} - set(answers):
            raise PoolError(f"{where}: every choice slot needs answers")
        choice = {k: (str(v) if k == "question" else _strings(v, f"{where}, choice.{k}")) for k, v in choice.items()}
    return Topic(str(raw["key"]), {k: str(v) for k, v in values.items()}, facts, asks, answers, choice)


def parse_pool(raw: dict, split: str, where: str) -> SectorPool:
    if not isinstance(raw, dict) or not raw.get("sector"):
        raise PoolError(f"{where}: needs a sector name")
    names = {k: _strings(v, f"{where}, names.{k}", 2) for k, v in (raw.get("names") or {}).items()}
    topics = tuple(_topic(t, where, set(names)) for t in raw.get("topics") or [])
    if len(topics) < 12 or len({t.key for t in topics}) != len(topics):
        raise PoolError(f"{where}: needs at least 12 topics with distinct keys (has {len(topics)})")
    return SectorPool(
        str(raw["sector"]),
        split,
        _strings(raw.get("brand_suffixes"), f"{where}, brand_suffixes"),
        _strings(raw.get("roles"), f"{where}, roles"),
        _strings(raw.get("teams"), f"{where}, teams"),
        _strings(raw.get("policies"), f"{where}, policies"),
        names,
        _strings(raw.get("unknowns"), f"{where}, unknowns", 3),
        topics,
    )


@cache
def load_pools(split: str) -> tuple[SectorPool, ...]:
    """Every sector pool of a split, in file-name order."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}")
    out = []
    for path in sorted((POOLS / split).glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        out.append(parse_pool(yaml.safe_load(path.read_text(encoding="utf-8")), split, str(path.relative_to(POOLS))))
    return tuple(out)


if __name__ == "__main__":
    import sys

    for split in SPLITS:
        pools = load_pools(split)
        print(f"{split}: {len(pools)} sectors, {sum(len(p.topics) for p in pools)} topics")
    sys.exit(0)
