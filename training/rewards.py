"""Programmatic GRPO rewards for a phone agent's reply. Each takes TRL's `completions` plus the dataset's `kind` and
`checks` columns (the eval schema) and returns one float per completion, or None where it does not apply.

| reward | weight | what it scores |
|---|---|---|
| fact | 2.0 | share of the asked fact's values the reply states (`checks.must_include_all`, normalized: "$30" = "thirty dollars") |
| brevity | 0.5 | 1 at <= 35 words, falling linearly to 0 at 70 words; halved past two sentences or when cut off unfinished |
| no_markdown | 0.5 | 1 without markdown, list bullets, links or emoji, else 0 |
| escalation | 1.0 | out-of-knowledge: 1 for saying it doesn't have that; human request: 1 for offering/confirming the transfer to the profile's team (0.5 without naming it); facts asked: -1 for a false "I don't have that" |
| persona | 1.0 | -1 for breaking persona ("as an AI", "language model") or naming another brand (`checks.must_not_include` without a number), else 0 |
| near_miss | 1.5 | -1 for stating a value the reply must not (`checks.must_not_include` with a number: another fact's fee next to the asked one, any fact's number in an out-of-knowledge reply), else 0; None where no value is forbidden |
| action | 1.5 | profiles with tools: 1 for calling the expected tool with the expected arguments (or rightly none), -1 for calling a tool that was not wanted, else 0 |

Every reward but `action` scores the spoken part of the reply: the text before any tool call.
"""

from __future__ import annotations

import re

from training.checks import check_action, has_markdown, split_call, word_count
from training.data.dialogues import DONT_KNOW
from training.textnorm import contains, normalize

FACT_KINDS = ("fact", "multi_fact", "slot", "two_fact", "follow_up", "correction")
UNKNOWN_KINDS = ("out_of_knowledge", "unknown")
REWARD_WEIGHTS = {"fact": 2.0, "brevity": 0.5, "no_markdown": 0.5, "escalation": 1.0, "persona": 1.0, "near_miss": 1.5, "action": 1.5}


def raw_text(completion: str | list[dict]) -> str:
    """A completion's text, whether TRL passes a string or a list of chat messages."""
    return completion if isinstance(completion, str) else "".join(m["content"] for m in completion)


def text_of(completion: str | list[dict]) -> str:
    """The spoken part of a completion."""
    return split_call(raw_text(completion))[0]


def sentence_count(text: str) -> int:
    text = re.sub(r"\b(?:[ap]\.m|Dr|Mr|Mrs|Ms|St)\.", "", text)
    return len([s for s in re.split(r"[.!?]+(?:\s|$)", text.strip()) if s.strip()])


def fact(completions: list, kind: list[str], checks: list[dict], **_) -> list[float | None]:
    out: list[float | None] = []
    for completion, k, c in zip(completions, kind, checks):
        wanted = c.get("must_include_all") or []
        if k not in FACT_KINDS or not wanted:
            out.append(None)
            continue
        reply = text_of(completion)
        out.append(sum(contains(reply, w) for w in wanted) / len(wanted))
    return out


def brevity(completions: list, **_) -> list[float]:
    out = []
    for completion in completions:
        reply = text_of(completion).strip()
        if not reply and split_call(raw_text(completion))[1]:  # a silent tool call (the server says the filler)
            out.append(1.0)
            continue
        words = word_count(reply)
        score = 0.0 if not reply else 1.0 if words <= 35 else max(0.0, 1 - (words - 35) / 35)
        unfinished = not reply.endswith((".", "?", "!"))  # cut off at the token limit
        out.append(score * (0.5 if sentence_count(reply) > 2 or unfinished else 1.0))
    return out


def no_markdown(completions: list, **_) -> list[float]:
    return [0.0 if has_markdown(text_of(c)) else 1.0 for c in completions]


def escalation(completions: list, kind: list[str], checks: list[dict], **_) -> list[float | None]:
    out: list[float | None] = []
    for completion, k, c in zip(completions, kind, checks):
        reply = text_of(completion)
        refuses = any(contains(reply, p) for p in DONT_KNOW)
        if k in UNKNOWN_KINDS:
            out.append(1.0 if refuses else 0.0)
        elif k == "human":
            offered = any(contains(reply, p) for p in c.get("must_include_any") or [])
            named = all(contains(reply, p) for p in c.get("must_include_all") or [])
            out.append(1.0 if offered and named else 0.5 if offered else 0.0)
        elif k in FACT_KINDS:
            out.append(-1.0 if refuses else 0.0)
        else:
            out.append(None)
    return out


def _forbidden(checks: dict, numbers: bool) -> list[str]:
    """The reply's forbidden phrases that hold a number (values), or those that do not (persona breaks, rival brands)."""
    return [p for p in checks.get("must_not_include") or [] if bool(re.search(r"\d", normalize(p))) == numbers]


def persona(completions: list, checks: list[dict], **_) -> list[float]:
    return [-1.0 if any(contains(text_of(x), p) for p in _forbidden(c, False)) else 0.0 for x, c in zip(completions, checks)]


def near_miss(completions: list, checks: list[dict], **_) -> list[float | None]:
    out: list[float | None] = []
    for completion, c in zip(completions, checks):
        values = _forbidden(c, True)
        out.append(None if not values else -1.0 if any(contains(text_of(completion), v) for v in values) else 0.0)
    return out


def action(completions: list, checks: list[dict], **_) -> list[float | None]:
    out: list[float | None] = []
    for completion, c in zip(completions, checks):
        if "action" not in c:
            out.append(None)
            continue
        call = split_call(raw_text(completion))[1]
        unwanted = call is not None and call["name"] != c["action"]
        out.append(1.0 if all(check_action(call, c).values()) else -1.0 if unwanted else 0.0)
    return out


REWARD_FUNCS = [fact, brevity, no_markdown, escalation, persona, near_miss, action]
