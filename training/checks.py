"""Scenario checks on one reply: required facts, forbidden phrases, length, and voice-safe formatting."""

from __future__ import annotations

import re

from training.textnorm import contains

MARKDOWN = re.compile(r"\*\*|__|`|^\s*#|^\s*[-*•]\s|^\s*\d+[.)]\s|https?://|www\.|\[[^\]]*\]\(", re.M)
EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf\u2b50\u2b55]")
CHECK_NAMES = ("must_include_any", "must_include_all", "must_not_include", "max_words", "no_markdown")


def word_count(text: str) -> int:
    return len(text.split())


def has_markdown(text: str) -> bool:
    """Markdown, list bullets, links or emoji: things a voice must not read out."""
    return bool(MARKDOWN.search(text) or EMOJI.search(text))


def run_checks(reply: str, checks: dict) -> dict[str, bool]:
    """Pass/fail for each check that applies (empty lists and absent keys do not apply)."""
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
    return results
