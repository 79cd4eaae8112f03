"""Scenario checks on one reply: required facts, forbidden phrases, length, and voice-safe formatting."""

from __future__ import annotations

import json
import re

from pipeline.tools import CLOSE, OPEN
from training.data.dialogues import DONT_KNOW
from training.textnorm import contains

MARKDOWN = re.compile(r"\*\*|__|`|^\s*#|^\s*[-*•]\s|^\s*\d+[.)]\s|https?://|www\.|\[[^\]]*\]\(", re.M)
EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf\u2b50\u2b55]")
CHECK_NAMES = ("must_include_any", "must_include_all", "must_not_include", "max_words", "no_markdown", "action", "arguments")


def word_count(text: str) -> int:
    return len(text.split())


def has_markdown(text: str) -> bool:
    """Markdown, list bullets, links or emoji: things a voice must not read out."""
    return bool(MARKDOWN.search(text) or EMOJI.search(text))


def split_call(reply: str) -> tuple[str, dict | None]:
    """The spoken part of a reply, and its tool call as {"name", "arguments"} (None: no call, or not parseable)."""
    speech, tag, rest = reply.partition(OPEN)
    payload, closed, _ = rest.partition(CLOSE)
    if not (tag and closed):
        return speech.strip(), None
    try:
        call = json.loads(payload)
    except json.JSONDecodeError:
        return speech.strip(), None
    ok = isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("arguments", {}), dict)
    return speech.strip(), ({"name": call["name"], "arguments": call.get("arguments", {})} if ok else None)


def same_value(got: object, want: object) -> bool:
    """Arguments match ignoring case, spaces and dashes ("hx 48213" = "HX-48213")."""
    squash = lambda v: re.sub(r"[\s\-]", "", str(v)).lower()  # noqa: E731
    return squash(got) == squash(want)


def check_action(call: dict | None, checks: dict) -> dict[str, bool]:
    """`action`: the tool the reply must call, None for no call; `arguments`: values the call must carry."""
    if "action" not in checks:
        return {}
    results = {"action": (call or {}).get("name") == checks["action"]}
    if checks.get("arguments"):
        args = (call or {}).get("arguments", {})
        results["arguments"] = all(k in args and same_value(args[k], v) for k, v in checks["arguments"].items())
    return results


def run_checks(reply: str, checks: dict) -> dict[str, bool]:
    """Pass/fail for each check that applies (empty lists and absent keys do not apply); text checks read the
    spoken part, action checks the tool call."""
    reply, call = split_call(reply)
    results: dict[str, bool] = {}
    if checks.get("must_include_any"):
        results["must_include_any"] = any(contains(reply, s) for s in checks["must_include_any"])
    if checks.get("must_include_all"):
        results["must_include_all"] = all(contains(reply, s) for s in checks["must_include_all"])
    if checks.get("must_not_include"):
        results["must_not_include"] = not any(contains(reply, s) for s in checks["must_not_include"])
    if checks.get("max_words"):
        results["max_words"] = word_count(reply) <= checks["max_words"]
    if checks.get("no_markdown"):
        results["no_markdown"] = not has_markdown(reply)
    return results | check_action(call, checks)


ANSWER_KINDS = ("fact", "two_fact", "slot")  # scenarios whose reply must state a value of the profile


def failure(kind: str, reply: str, checks: dict[str, bool]) -> str | None:
    """Why a scenario failed, for the report (None if it passed): `forbidden` (it said a value or name the checks
    rule out: a neighbouring fact's number, another brand), `refused` (it said it doesn't know a value the profile
    has), `missed` (neither the value nor a refusal), else the first failed check."""
    if all(checks.values()):
        return None
    if not checks.get("must_not_include", True):
        return "forbidden"
    if kind in ANSWER_KINDS:
        spoken, _ = split_call(reply)
        return "refused" if any(contains(spoken, phrase) for phrase in DONT_KNOW) else "missed"
    return next(name for name, ok in checks.items() if not ok)
