"""One conversation of each kind for a brand: the caller/agent turns and the checks its last reply must pass."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.prompt import Message
from pipeline.tools import ToolCall
from training.data import generic as g
from training.data import tooluse as t
from training.data.brands import Brand, fact_intents
from training.data.callers import HARD_TONES, agent_says, caller_plain, caller_says, lower_first
from training.data.openings import code_given, greeting
from training.data.values import make_code, spoken_code, tidy

KINDS = ("fact", "multi_fact", "slot", "out_of_knowledge", "human", "small_talk", "tool")
DONT_KNOW = [
    "don't have",
    "do not have",
    "don't know",
    "not sure",
    "no information",
    "not able to say",
    "not able to provide",
    "can't provide",
    "cannot provide",
]
TRANSFER_WORDS = ["transfer", "transferring", "connect", "connecting", "put you through"]
CANT_TRANSFER = ["can't transfer", "cannot transfer", "not able to transfer", "unable to transfer"]
PERSONA_BREAKS = ["as an ai", "language model", "smollm", "openai", "hugging face"]
MAX_WORDS = 40


@dataclass
class Dialogue:
    history: list[Message]  # greeting first, the agent's target reply last
    intent: str
    kind: str
    tone: str
    include_all: list[str] = field(default_factory=list)
    include_any: list[str] = field(default_factory=list)
    answer: str = ""  # the bare answer sentence of a fact reply, for "say that again"
    tools: bool = False  # the profile declares tools: the checks then include the expected action
    action: str | None = None  # the tool the last reply must call (None: no call)
    arguments: dict = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)  # values a right reply never says (a neighbouring fact's)

    def __post_init__(self) -> None:
        self.history = [Message(m.role, tidy(m.content)) for m in self.history]

    def checks(self, rivals: list[str]) -> dict:
        """The checks the last reply must pass (the eval and reward schema)."""
        checks = {
            "must_include_any": self.include_any,
            "must_include_all": self.include_all,
            "must_not_include": PERSONA_BREAKS + rivals + self.exclude,
            "max_words": MAX_WORDS,
            "no_markdown": True,
        }
        if self.tools:
            checks |= {"action": self.action, "arguments": self.arguments}
        return checks


def curriculum_stage(kind: str, tone: str) -> str:
    """Easy to hard: plain facts, then multi-turn, then difficult callers, then refusals and escalation."""
    if kind in ("out_of_knowledge", "human"):
        return "escalation"
    if kind == "tool":
        return "multi_turn" if tone not in HARD_TONES else "tones"
    if tone in HARD_TONES:
        return "tones"
    return "facts" if kind in ("fact", "small_talk") else "multi_turn"


def _team(brand: Brand) -> str:
    return brand.team.removeprefix("a ").removeprefix("an ").removeprefix("the ") if brand.team else ""


def fact(rng: random.Random, brand: Brand, tone: str, exclude: str = "") -> Dialogue:
    name = rng.choice(sorted(set(brand.known) - {exclude}))
    intent = next(i for i in fact_intents(brand.sector) if i.name == name)
    value = brand.known[intent.name]
    ask = caller_says(rng, tone, rng.choice(intent.asks), intent.topic)
    answer = rng.choice(intent.answers).format(v=value.spoken)
    history = greeting(brand) + [Message("user", ask), Message("assistant", agent_says(rng, tone, answer))]
    return Dialogue(history, intent.name, "fact", tone, include_all=list(value.checks), answer=answer)


def multi_fact(rng: random.Random, brand: Brand, tone: str) -> Dialogue:
    """Two questions in a row, or one question and a request to repeat it."""
    first = fact(rng, brand, tone)
    if rng.random() < 0.3:
        intent, answer, lead = first.intent, first.answer, rng.choice(g.REPEAT_LEADS)
        reply = lead + (lower_first(answer) if lead.endswith(", ") else answer)
        history = first.history + [Message("user", rng.choice(g.REPEAT_ASKS)), Message("assistant", reply)]
        return Dialogue(history, intent, "multi_fact", tone, include_all=first.include_all)
    second = fact(rng, brand, "neutral", exclude=first.intent)
    ask = second.history[1].content
    ask = "And " + lower_first(ask) if rng.random() < 0.5 else ask
    reply = agent_says(rng, tone, second.answer, close=False)
    history = first.history + [Message("user", caller_plain(rng, tone, ask)), Message("assistant", reply)]
    return Dialogue(history, second.intent, "multi_fact", tone, include_all=second.include_all)


def slot(rng: random.Random, brand: Brand, tone: str) -> Dialogue:
    """Ask for the record's code, read it back (maybe corrected), then answer with the linked fact or transfer."""
    intent = rng.choice(brand.sector.slots)
    code = make_code(rng, intent.shape)
    history = code_given(rng, brand, intent, tone, code)
    if intent.follow_fact in brand.known:
        fact_intent = next(i for i in brand.sector.facts if i.name == intent.follow_fact)
        value = brand.known[intent.follow_fact]
        resolution, include = rng.choice(fact_intent.answers).format(v=value.spoken), list(value.checks)
    elif brand.team:
        resolution, include = f"I'll transfer you to {brand.team} to {intent.done}.", [_team(brand)]
    else:
        resolution, include = f"I've noted it so our team can {intent.done}.", []
    if rng.random() < 0.35:
        history.append(Message("assistant", f"Thanks, that's {spoken_code(code)}, is that right?"))
        if rng.random() < 0.5:
            history.append(Message("user", rng.choice(g.CODE_CONFIRMS)))
            history.append(Message("assistant", f"Great. {resolution}"))
            return Dialogue(history, intent.name, "slot", tone, include_all=include)
        code = make_code(rng, intent.shape)
        history.append(Message("user", f"No, sorry, it's {rng.choice([code, spoken_code(code)])}."))
    history.append(Message("assistant", f"Thanks, I have {spoken_code(code)}. {resolution}"))
    return Dialogue(history, intent.name, "slot", tone, include_all=[code] + include)


def slot_request(rng: random.Random, brand: Brand, tone: str) -> Dialogue:
    """The first step of slot filling alone: the agent must ask for the code (used for eval scenarios)."""
    full = slot(rng, brand, tone)
    intent = next(s for s in brand.sector.slots if s.name == full.intent)
    return Dialogue(full.history[:3], full.intent, "slot", tone, include_any=[intent.slot, "code", "number"])


def out_of_knowledge(rng: random.Random, brand: Brand, tone: str) -> Dialogue:
    """A sector question this profile has no fact for, or an off-topic one: say so, offer a transfer."""
    if brand.unknown and rng.random() < 0.6:
        intent = rng.choice(brand.unknown)
        ask, name = caller_says(rng, tone, rng.choice(intent.asks), intent.topic), f"unknown_{intent.name}"
        tail = rng.choice(g.OFFER_TRANSFER).format(team=brand.team) if brand.team else rng.choice(g.CLOSERS_NO_TEAM)
    else:
        ask, name = caller_plain(rng, tone, rng.choice(g.OFF_TOPIC)), "off_topic"
        tail = rng.choice(g.ONLY_BRAND).format(brand=brand.name)
    reply = f"{rng.choice(g.DONT_HAVE)} {tail}"
    history = greeting(brand) + [Message("user", ask), Message("assistant", reply)]
    return Dialogue(history, name, "out_of_knowledge", tone, include_any=DONT_KNOW)


def human(rng: random.Random, brand: Brand, tone: str, offer_share: float = 0.3) -> Dialogue:
    """The caller asks for a person: transfer to the profile's escalation target (offering first in
    `offer_share` of dialogues), or say it is not possible."""
    history = greeting(brand) + [Message("user", caller_plain(rng, tone, rng.choice(g.HUMAN_ASKS)))]
    if not brand.team:
        history.append(Message("assistant", rng.choice(g.NO_TRANSFER).format(brand=brand.name)))
        return Dialogue(history, "human_request", "human", tone, include_any=CANT_TRANSFER)
    if rng.random() < offer_share:
        history += [
            Message("assistant", rng.choice(g.TRANSFER_OFFER).format(team=brand.team)),
            Message("user", rng.choice(g.CONFIRMS)),
            Message("assistant", rng.choice(g.TRANSFERRING).format(team=brand.team)),
        ]
        return Dialogue(history, "human_confirm", "human", tone, include_all=[_team(brand)], include_any=TRANSFER_WORDS)
    history.append(Message("assistant", rng.choice(g.TRANSFER_NOW).format(team=brand.team)))
    return Dialogue(history, "human_request", "human", tone, include_all=[_team(brand)], include_any=TRANSFER_WORDS)


def small_talk(rng: random.Random, brand: Brand, tone: str) -> Dialogue:
    intent = rng.choice(sorted(g.SMALL_TALK))
    asks, replies, must = g.SMALL_TALK[intent]
    reply = rng.choice(replies).format(name=brand.agent, brand=brand.name)
    history = greeting(brand) + [Message("user", caller_plain(rng, tone, rng.choice(asks))), Message("assistant", reply)]
    include = {"name": [brand.agent], "brand": [brand.name], "": []}[must]
    return Dialogue(history, intent, "small_talk", tone, include_all=include)


def tool(rng: random.Random, brand: Brand, tone: str) -> Dialogue:
    """A record lookup through the brand's tool and its spoken result, or a goodbye that hangs up."""
    if brand.lookup and rng.random() < 0.65:
        history, got = t.lookup_dialogue(rng, brand, tone)
        include = [got["date"]] if got["date"] else []
        return Dialogue(history, t.lookup_name(brand.lookup), "tool", tone, include_all=include, include_any=got["expect_any"], tools=True)
    history = t.goodbye(rng, brand, tone)
    if not brand.profile.tools:
        return Dialogue(history, "goodbye", "tool", tone, include_all=[brand.name])
    call = ToolCall("end_call")
    return Dialogue(t.ends_with_call(history, call), "goodbye", "tool", tone, include_all=[brand.name], tools=True, action="end_call")


def with_actions(dialogue: Dialogue, brand: Brand) -> Dialogue:
    """For a brand with tools: a transfer the agent announces also calls transfer_to_human; nothing else calls a tool."""
    if not brand.profile.tools or dialogue.tools:
        return dialogue
    dialogue.tools = True
    if dialogue.kind == "human" and brand.team:
        dialogue.history = t.ends_with_call(dialogue.history, ToolCall("transfer_to_human"))
        dialogue.action = "transfer_to_human"
    return dialogue


def catalog_intents() -> set[str]:
    """Every intent the generator can produce (an unknown fact counts as its fact intent)."""
    from training.data.brands import SECTORS

    facts = {i.name for sector in SECTORS.values() for i in fact_intents(sector)}
    slots = {s.name for sector in SECTORS.values() for s in sector.slots}
    lookups = {t.lookup_name(s) for sector in SECTORS.values() for s in sector.slots}
    return facts | slots | lookups | set(g.SMALL_TALK) | {"off_topic", "human_request", "human_confirm", "goodbye"}


BUILDERS: dict[str, Callable[[random.Random, Brand, str], Dialogue]] = {
    "fact": fact,
    "multi_fact": multi_fact,
    "slot": slot,
    "out_of_knowledge": out_of_knowledge,
    "human": human,
    "small_talk": small_talk,
    "tool": tool,
}
