"""Tool use in the generated conversations: which tools a brand declares, lookups with their results, and the
transfer / hang-up calls that end a human request or a goodbye."""

from __future__ import annotations

import json
import random
from dataclasses import replace

from pipeline.profile import parse_profile
from pipeline.prompt import Message
from pipeline.tools import ToolCall
from training.data.brands import Brand
from training.data.callers import caller_plain
from training.data.catalog import SlotIntent
from training.data.openings import code_given, greeting
from training.data.values import make_code

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
STATUSES = (  # what a lookup returns; "{d}" is a date the reply must repeat
    "confirmed for {d}",
    "scheduled for {d}",
    "on its way and due on {d}",
    "cancelled, with a refund issued on {d}",
    "active and paid up until {d}",
    "pending review, with an update expected by {d}",
    "on hold until {d}",
)
FILLERS = ("One moment while I look that up.", "Let me check that for you.", "Just a second while I pull that up.")
FOUND = ("I found it. Your {noun} is {status}.", "Thanks for waiting. Your {noun} is {status}.", "Okay, your {noun} is {status}.")
NOT_FOUND = (
    "I couldn't find a {noun} with that {slot}. Could you read it to me again?",
    "Sorry, nothing comes up for that {slot}. Could you check it and say it again?",
)
LOOKUP_FAILED = ("Sorry, I can't look that up right now.", "I'm sorry, our system isn't answering right now.")
GOODBYES = (
    "Thanks, that's all.",
    "Great, thank you, bye.",
    "Okay, that's everything, thanks.",
    "That's all I needed, goodbye.",
    "Bye now.",
)
BYE_REPLIES = ("You're welcome, thanks for calling {brand}. Goodbye.", "My pleasure. Thanks for calling {brand}, have a great day.")


def slot_noun(slot: str) -> str:
    return slot.split()[0]


def lookup_name(intent: SlotIntent) -> str:
    return f"lookup_{slot_noun(intent.slot)}"


def lookup_param(intent: SlotIntent) -> str:
    return intent.slot.replace(" ", "_")


def with_tools(rng: random.Random, brand: Brand) -> Brand:
    """The brand with tools declared: transfer_to_human (when it has a team), end_call, and a lookup of its records."""
    intent = rng.choice(brand.sector.slots)
    noun = slot_noun(intent.slot)
    tools: list[dict] = [{"name": "transfer_to_human"}] if brand.team else []
    tools += [
        {"name": "end_call"},
        {
            "name": lookup_name(intent),
            "description": f"Look up the caller's {noun} by its {intent.slot}.",
            "parameters": {"type": "object", "properties": {lookup_param(intent): {"type": "string"}}, "required": [lookup_param(intent)]},
            "url": f"https://tools.example.com/{brand.profile.id}/{lookup_name(intent)}",
            "filler": rng.choice(FILLERS),
        },
    ]
    rng.shuffle(tools)
    dtmf = {"0": {"tool": "transfer_to_human"}} if brand.team and rng.random() < 0.5 else {}
    data = brand.profile.model_dump(mode="json", exclude_defaults=True) | {"tools": tools, "dtmf": dtmf}
    return replace(brand, profile=parse_profile(data, brand.name), lookup=intent)


def result_for(rng: random.Random, code: str) -> tuple[dict, str | None]:
    """A lookup's JSON answer, and the date the spoken reply must repeat (None when not found)."""
    if rng.random() < 0.2:
        return {"found": False}, None
    with_day = rng.random() < 0.3
    date = f"{rng.choice(DAYS)}, {rng.choice(MONTHS)} {rng.randint(1, 28)}" if with_day else f"{rng.choice(MONTHS)} {rng.randint(1, 28)}"
    return {"found": True, "reference": code, "status": rng.choice(STATUSES).format(d=date)}, date.split(", ")[-1]


def lookup_dialogue(rng: random.Random, brand: Brand, tone: str) -> tuple[list[Message], dict]:
    """Ask for the code, call the lookup with it, then speak the result. Returns the history and check fields."""
    intent = brand.lookup
    code = make_code(rng, intent.shape)
    call = ToolCall(lookup_name(intent), {lookup_param(intent): code})
    history = code_given(rng, brand, intent, tone, code) + [Message("assistant", call.markup())]
    if rng.random() < 0.1:
        result, date = {"error": "the lookup service did not answer in time"}, None
        team = brand.team
        answer = rng.choice(LOOKUP_FAILED) + (f" I can transfer you to {team} instead." if team else " Please try again later.")
        expect_any = ["right now"]
    else:
        result, date = result_for(rng, code)
        noun = slot_noun(intent.slot)
        answer = (
            rng.choice(FOUND).format(noun=noun, status=result["status"])
            if date
            else rng.choice(NOT_FOUND).format(noun=noun, slot=intent.slot)
        )
        expect_any = [] if date else ["again"]
    history += [Message("tool", json.dumps(result)), Message("assistant", answer)]
    return history, {"call": call, "date": date, "code": code, "expect_any": expect_any}


def ends_with_call(history: list[Message], call: ToolCall) -> list[Message]:
    """The history with the call appended to the agent's last reply."""
    last = history[-1]
    return history[:-1] + [Message(last.role, f"{last.content} {call.markup()}")]


def goodbye(rng: random.Random, brand: Brand, tone: str) -> list[Message]:
    reply = rng.choice(BYE_REPLIES).format(brand=brand.name)
    return greeting(brand) + [Message("user", caller_plain(rng, tone, rng.choice(GOODBYES))), Message("assistant", reply)]
