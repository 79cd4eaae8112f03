"""One conversation of each kind for a composed brand, ending on the agent reply under test, with its checks."""

from __future__ import annotations

import random
from collections.abc import Callable

from pipeline.prompt import Message
from pipeline.tools import ToolCall
from training.data import generic as g
from training.data import tooluse as t
from training.data.callers import agent_says
from training.data.dialogues import CANT_TRANSFER, DONT_KNOW, TRANSFER_WORDS, Dialogue, with_actions
from training.data.realistic.brands import RealBrand, Stated
from training.data.realistic.callers import CallerPool, caller_turn, corrected, person_request, two_questions

SMALL_TALK_REPLIES = {"name": "agent_name", "robot": "is_robot", "thanks": "thanks_bye", "goodbye": "thanks_bye", "hold": "hold_on"}
Builder = Callable[[random.Random, RealBrand, str, CallerPool], Dialogue]


def _start(brand: RealBrand) -> list[Message]:
    return [Message("assistant", brand.profile.greeting)]


def _question(rng: random.Random, brand: RealBrand, stated: Stated, slot: str) -> str:
    return rng.choice(stated.topic.asks[slot]).format(**brand.names, brand=brand.name)


def _answer(rng: random.Random, brand: RealBrand, stated: Stated, slot: str) -> str:
    return stated.fill(rng.choice(stated.topic.answers[slot]), brand.names, brand.name)


def _pick(rng: random.Random, brand: RealBrand, avoid: Stated | None = None) -> tuple[Stated, str]:
    stated = rng.choice([s for s in brand.stated if s is not avoid])
    return stated, rng.choice(sorted(stated.topic.asks))


def _answering(
    history: list[Message], brand: RealBrand, stated: Stated, slot: str, kind: str, tone: str, exclude: list[str] | None = None
) -> Dialogue:
    """A dialogue whose last reply states one value (and, by default, none of its near misses)."""
    exclude = brand.distractors(stated, slot) if exclude is None else exclude
    return Dialogue(history, f"{stated.topic.key}.{slot}", kind, tone, include_all=list(stated.values[slot].checks), exclude=exclude)


def fact(rng: random.Random, brand: RealBrand, tone: str, callers: CallerPool) -> Dialogue:
    """One question in the caller's own words; the reply states the one value asked for."""
    stated, slot = _pick(rng, brand)
    ask = caller_turn(rng, callers, tone, _question(rng, brand, stated, slot))
    reply = agent_says(rng, tone, _answer(rng, brand, stated, slot), openers=callers.openers)
    return _answering(_start(brand) + [Message("user", ask), Message("assistant", reply)], brand, stated, slot, "fact", tone)


def two_fact(rng: random.Random, brand: RealBrand, tone: str, callers: CallerPool) -> Dialogue:
    """Two questions in one turn; the reply answers both."""
    first, a = _pick(rng, brand)
    second, b = _pick(rng, brand, avoid=first)
    ask = two_questions(rng, callers, _question(rng, brand, first, a), _question(rng, brand, second, b))
    ask = caller_turn(rng, callers, tone, ask, asr_share=0.15)
    reply = agent_says(rng, tone, f"{_answer(rng, brand, first, a)} {_answer(rng, brand, second, b)}", close=False, openers=callers.openers)
    include = list(first.values[a].checks) + list(second.values[b].checks)
    history = _start(brand) + [Message("user", ask), Message("assistant", reply)]
    return Dialogue(history, f"{first.topic.key}.{a}+{second.topic.key}.{b}", "two_fact", tone, include_all=include)


def slot(rng: random.Random, brand: RealBrand, tone: str, callers: CallerPool) -> Dialogue:
    """The agent asked which case applies; the caller's answer picks the value (the other branch's is wrong)."""
    options = [s for s in brand.stated if s.topic.choice]
    if not options:
        return fact(rng, brand, tone, callers)
    stated = rng.choice(options)
    branches = sorted(k for k in stated.topic.choice if k != "question")
    chosen = rng.choice(branches)
    ask = caller_turn(rng, callers, tone, _question(rng, brand, stated, rng.choice(branches)))
    question = stated.fill(stated.topic.choice["question"], brand.names, brand.name)
    history = _start(brand) + [
        Message("user", ask),
        Message("assistant", agent_says(rng, tone, question, close=False, openers=callers.openers)),
        Message("user", rng.choice(stated.topic.choice[chosen])),
        Message("assistant", _answer(rng, brand, stated, chosen)),
    ]
    other = [c for b in branches if b != chosen for c in stated.values[b].checks]
    return Dialogue(history, f"{stated.topic.key}.{chosen}", "slot", tone, include_all=list(stated.values[chosen].checks), exclude=other)


def unknown(rng: random.Random, brand: RealBrand, tone: str, callers: CallerPool) -> Dialogue:
    """A question near the brand's topics that no fact answers, or an off-topic one: say so; state no number."""
    if rng.random() < 0.12:
        ask, intent = caller_turn(rng, callers, tone, rng.choice(callers.off_topic)), "off_topic"
        reply = f"{rng.choice(g.DONT_HAVE)} {rng.choice(g.ONLY_BRAND).format(brand=brand.name)}"
    else:
        if brand.absent and rng.random() < 0.55:
            topic = rng.choice(brand.absent)
            question, intent = rng.choice(topic.asks[rng.choice(sorted(topic.asks))]), f"unknown_{topic.key}"
        else:
            question, intent = rng.choice(brand.pool.unknowns), "unknown_near"
        ask = caller_turn(rng, callers, tone, question.format(**brand.names, brand=brand.name))
        reply = _dont_have(rng, brand)
    history = _start(brand) + [Message("user", ask), Message("assistant", reply)]
    return Dialogue(history, intent, "unknown", tone, include_any=DONT_KNOW, exclude=brand.all_values())


def _dont_have(rng: random.Random, brand: RealBrand) -> str:
    tail = rng.choice(g.OFFER_TRANSFER).format(team=brand.team) if brand.team else rng.choice(g.CLOSERS_NO_TEAM)
    return f"{rng.choice(g.DONT_HAVE)} {tail}"


def unanswerable_twin(rng: random.Random, brand: RealBrand, answered: Dialogue) -> tuple[RealBrand, Dialogue] | None:
    """A one-fact dialogue's twin: the same caller words to the brand without that fact, answered "I don't have
    that", so the only difference between answering and not is whether the fact is there to read."""
    if answered.kind != "fact":
        return None
    key = answered.intent.rpartition(".")[0]
    stated = next(s for s in brand.stated if s.topic.key == key)
    other = brand.without(stated)
    history = answered.history[:-1] + [Message("assistant", _dont_have(rng, other))]
    exclude = sorted(set(other.all_values()) | {c for v in stated.values.values() for c in v.checks})
    twin = Dialogue(history, f"absent_{key}", "unknown", answered.tone, include_any=DONT_KNOW, exclude=exclude)
    return other, with_actions(twin, other)


def human(rng: random.Random, brand: RealBrand, tone: str, callers: CallerPool) -> Dialogue:
    """The caller asks for a person: transfer at once (calling transfer_to_human where declared), or say it can't."""
    history = _start(brand) + [Message("user", person_request(rng, callers, tone, brand.team))]
    if not brand.team:
        history.append(Message("assistant", rng.choice(g.NO_TRANSFER).format(brand=brand.name)))
        return Dialogue(history, "human_request", "human", tone, include_any=CANT_TRANSFER)
    history.append(Message("assistant", rng.choice(g.TRANSFER_NOW).format(team=brand.team)))
    return Dialogue(history, "human_request", "human", tone, include_any=TRANSFER_WORDS)


def small_talk(rng: random.Random, brand: RealBrand, tone: str, callers: CallerPool) -> Dialogue:
    intent = rng.choice(sorted(callers.small_talk))
    _, replies, must = g.SMALL_TALK[SMALL_TALK_REPLIES[intent]]
    history = _start(brand) + [
        Message("user", rng.choice(callers.small_talk[intent])),
        Message("assistant", rng.choice(replies).format(name=brand.agent, brand=brand.name)),
    ]
    include = {"name": [brand.agent], "brand": [brand.name], "": []}[must]
    if intent == "goodbye" and any(tool.name == "end_call" for tool in brand.profile.tools):
        return Dialogue(
            t.ends_with_call(history, ToolCall("end_call")), intent, "small_talk", tone, include_all=include, tools=True, action="end_call"
        )
    return Dialogue(history, intent, "small_talk", tone, include_all=include)


def follow_up(rng: random.Random, brand: RealBrand, tone: str, callers: CallerPool) -> Dialogue:
    """A fact answered, then a second question about another fact in the next turn."""
    first = fact(rng, brand, tone, callers)
    stated, key = _pick(rng, brand)
    history = first.history + [
        Message("user", caller_turn(rng, callers, "neutral", _question(rng, brand, stated, key))),
        Message("assistant", _answer(rng, brand, stated, key)),
    ]
    return _answering(history, brand, stated, key, "follow_up", tone)


def correction(rng: random.Random, brand: RealBrand, tone: str, callers: CallerPool) -> Dialogue:
    """The caller asks one thing, takes it back and asks another: answer the second."""
    dropped, a = _pick(rng, brand)
    stated, key = _pick(rng, brand, avoid=dropped)
    ask = corrected(rng, callers, _question(rng, brand, dropped, a), _question(rng, brand, stated, key))
    reply = agent_says(rng, tone, _answer(rng, brand, stated, key), openers=callers.openers)
    history = _start(brand) + [Message("user", ask), Message("assistant", reply)]
    return _answering(
        history, brand, stated, key, "correction", tone, exclude=[c for c in dropped.values[a].checks if c not in stated.values[key].checks]
    )


BUILDERS: dict[str, Builder] = {
    "fact": fact,
    "two_fact": two_fact,
    "slot": slot,
    "unknown": unknown,
    "human": human,
    "small_talk": small_talk,
    "follow_up": follow_up,
    "correction": correction,
}


def build(rng: random.Random, brand: RealBrand, kind: str, tone: str, callers: CallerPool) -> Dialogue:
    """A dialogue of `kind`; for a brand with tools the checks expect the right call (or rightly none)."""
    return with_actions(BUILDERS[kind](rng, brand, tone, callers), brand)
