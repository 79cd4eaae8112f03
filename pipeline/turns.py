"""Adaptive endpointing: how much silence ends the caller's turn, judged from what they said so far."""

from __future__ import annotations

import re

# A turn that ends on one of these words is trailing off ("my booking code is ...") or holding the floor
# ("Wait.", "Hmm, actually."), not finished, whatever punctuation the recognizer put after it.
TRAILING_WORDS = frozenset(
    """
    wait hold actually hmm well oh sorry
    a an the and or but so because if that which who whose whom when where while to of for from with
    about into onto at by on in as than then is are was were be been am my your our their his her its
    this these those um uh er like just also very really some any no not can could would should will
    i i'm we you he she they it's there's what's
    """.split()
)
_WORDS = re.compile(r"[a-z']+")


def looks_complete(text: str) -> bool:
    """True for a transcript that reads as a finished sentence or question."""
    stripped = text.strip()
    if not stripped or stripped.endswith((",", "...", "-", "\u2026", ":")):
        return False
    words = _WORDS.findall(stripped.lower())
    if not words or words[-1] in TRAILING_WORDS:
        return False
    return stripped.endswith(("?", ".", "!")) or len(words) >= 3


def endpoint_ms(text: str, complete_ms: int, default_ms: int) -> int:
    """The silence that ends this turn: short once the words form a complete sentence, else the default."""
    return min(complete_ms, default_ms) if looks_complete(text) else default_ms
