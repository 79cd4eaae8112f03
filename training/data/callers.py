"""How callers of each tone word a request, and how the agent opens and closes its reply to them."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping

TONES = ("polite", "neutral", "hurried", "angry", "confused", "elderly", "non_native")
HARD_TONES = frozenset({"angry", "confused", "elderly", "non_native"})

_WRAPS: dict[str, tuple[str, ...]] = {
    "neutral": ("{ask}", "{ask}", "I'd like to know {topic}.", "Can you tell me {topic}?"),
    "polite": (
        "Hi, good morning. {ask} Thank you so much.",
        "Hello there, could you please tell me {topic}?",
        "Sorry to bother you, {ask_lc}",
        "Hi! {ask} Thanks in advance.",
    ),
    "hurried": ("Quick question, {ask_lc}", "I'm in a rush. {ask}", "{Topic}? Quickly please.", "Real quick, {topic_bare}?"),
    "angry": (
        "This is the third time I'm calling! {ask}",
        "I've been on hold forever. {ask}",
        "Your service is a joke. {ask}",
        "Unbelievable. Nobody can give me a straight answer. {ask}",
        "I'm really annoyed right now. {ask}",
    ),
    "confused": (
        "Um, hi, I'm not really sure who to ask... {ask}",
        "Sorry, I'm a bit lost. I think I need {topic}?",
        "Okay so, uh, {ask_lc}",
        "I don't really understand how this works. {ask}",
    ),
    "elderly": (
        "Hello, dear. My grandson usually handles these things. {ask}",
        "Good afternoon. I'd like to know {topic}, please.",
        "Could you speak slowly, please? {ask}",
        "Hello? Yes, hello. {ask}",
    ),
    "non_native": (
        "Hello, please, I want know {topic_bare}.",
        "Excuse me, my English not so good. {topic_bare}, how is it?",
        "Please, {topic_bare}? I need to know.",
        "Hello. Question about {topic_bare}, please.",
    ),
}

OPENERS: dict[str, tuple[str, ...]] = {
    "neutral": ("", "", "Sure, "),
    "polite": ("Of course, ", "Happy to help. ", "Sure, "),
    "hurried": ("",),
    "angry": ("I'm sorry for the frustration. ", "I understand, and I'm sorry about the wait. ", "I'm sorry about that. "),
    "confused": ("No problem, I can help with that. ", "That's okay, I can help. ", "No worries. "),
    "elderly": ("Of course. ", "Certainly, no rush. ", "Of course, "),
    "non_native": ("Sure. ", "Yes, ", ""),
}

CLOSERS = ("Anything else I can help with?", "Is there anything else?", "Can I help with anything else?")


def lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != "I " and not text.startswith("I'") else text


def bare(topic: str) -> str:
    """A topic without its article: "the checked bag fee" -> "checked bag fee"."""
    return re.sub(r"^(the|your|a|an|my) ", "", topic)


def caller_says(rng: random.Random, tone: str, ask: str, topic: str) -> str:
    """One caller utterance asking `ask` (a full question) about `topic` (a noun phrase), in `tone`."""
    template = rng.choice(_WRAPS[tone])
    return template.format(
        ask=ask,
        ask_lc=lower_first(ask),
        topic=topic,
        Topic=topic[:1].upper() + topic[1:],
        topic_bare=bare(topic),
    )


def caller_plain(rng: random.Random, tone: str, text: str) -> str:
    """A caller line that is already a full sentence, with a tone-typical lead-in for the strong tones."""
    lead = {
        "angry": ("Ugh. ", "Look, ", ""),
        "confused": ("Um, ", "Uh, sorry, ", ""),
        "elderly": ("Oh, ", "Well, dear, ", ""),
        "non_native": ("Please, ", ""),
    }.get(tone, ("",))
    chosen = rng.choice(lead)
    return chosen + (lower_first(text) if chosen else text)


def agent_says(rng: random.Random, tone: str, sentence: str, close: bool = True, openers: Mapping[str, tuple[str, ...]] = OPENERS) -> str:
    """The agent's reply: a tone opener, the answer sentence, and maybe a short closing question (two sentences max)."""
    opener = rng.choice(openers[tone])
    body = opener + (lower_first(sentence) if opener.endswith(", ") else sentence)
    if close and not opener.endswith(". ") and tone != "hurried" and rng.random() < 0.35:
        body += " " + rng.choice(CLOSERS)
    return body
