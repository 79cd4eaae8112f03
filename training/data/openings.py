"""How a dialogue opens: the agent's greeting, and a caller giving a record's code when asked for it."""

from __future__ import annotations

import random

from pipeline.prompt import Message
from training.data.brands import Brand
from training.data.callers import agent_says, caller_plain
from training.data.catalog import SlotIntent
from training.data.values import spoken_code


def greeting(brand: Brand) -> list[Message]:
    return [Message("assistant", brand.profile.greeting)]


def says_code(rng: random.Random, tone: str, code: str) -> str:
    said = rng.choice([code, spoken_code(code)])
    forms = {
        "elderly": ("Let me see... it's {c}.", "Oh, here it is. {c}."),
        "confused": ("Um, I think it's {c}?", "Is it the one that says {c}?"),
        "non_native": ("Number is {c}.", "It is {c}."),
        "hurried": ("{c}.",),
        "angry": ("It's {c}. Hurry up.", "{c}, like I said before."),
    }.get(tone, ("It's {c}.", "Sure, it's {c}.", "{c}."))
    return rng.choice(forms).format(c=said)


def code_given(rng: random.Random, brand: Brand, intent: SlotIntent, tone: str, code: str) -> list[Message]:
    """Greeting, the caller's request about a record, the agent asking for its code, the caller giving it."""
    return greeting(brand) + [
        Message("user", caller_plain(rng, tone, rng.choice(intent.asks))),
        Message(
            "assistant",
            agent_says(
                rng,
                tone,
                rng.choice(
                    [
                        f"Can I have your {intent.slot}, please?",
                        f"What's your {intent.slot}, please?",
                    ]
                ),
                close=False,
            ),
        ),
        Message("user", says_code(rng, tone, code)),
    ]
