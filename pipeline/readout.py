"""Reading out the fact the caller asked about when the model declines to answer from it.

Asked in words far from a fact's ("when's the first ferry" for "Daily sailings run from six a.m."), the 135M model
often says "I'm sorry, I don't have that information" with the answering fact first in its block; made to answer
instead, it picks the right value about one time in three. The retriever's encoder reads such paraphrases better. So
when a one-question turn's first fact is close to the caller's words (cosine at least READOUT_FLOOR) and the reply
opens a sentence with a refusal, the caller hears that fact (as the company wrote it, numbers spoken) in place of the
refusal and whatever followed it. The floor was chosen on validation scenarios of training sectors (docs/retrieval.md).
"""

from __future__ import annotations

import re

from pipeline.profile import Profile
from pipeline.spoken import speakable

READOUT_FLOOR = 0.4
_LEADS = ("", "i'm sorry", "sorry", "i'm afraid", "i am afraid", "unfortunately", "i apologize")
_CORES = ("i don't have", "i do not have", "i don't know", "i'm not sure", "i am not sure", "i'm not able to", "i can't provide")
DECLINES = tuple(f"{lead} {core}".split() for lead in _LEADS for core in _CORES)
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*\s+")
_ENDS_SENTENCE = re.compile(r"[.!?]+[\"')\]]*\s*$")
_WORD = re.compile(r"[a-z']+")


def readout_fact(profile: Profile, first: str | None, cosine: float | None) -> str | None:
    """The fact to read if the model declines: the block's first item when it is a fact (never a policy, which is
    an instruction to the agent) scoring at least READOUT_FLOOR against the caller's words."""
    if not profile.llm.read_out_facts or first is None or cosine is None or cosine < READOUT_FLOOR or first not in profile.facts:
        return None
    return speakable(first)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def declines(sentence: str) -> bool:
    """Whether a sentence opens with a refusal ("I'm sorry, I don't have ...")."""
    words = _words(sentence)
    return any(words[: len(d)] == d for d in DECLINES)


def may_decline(sentence: str) -> bool:
    """Whether the words of an unfinished sentence could still open a refusal (its last word may be cut: "I don")."""
    words = _words(sentence)
    if not words:
        return True
    *whole, last = words
    n = len(whole)
    return any(len(d) > n and d[:n] == whole and d[n].startswith(last) for d in DECLINES)


class DeclineGuard:
    """Sits between the model's speech and the clause splitter: holds a sentence only while its opening could still
    be a refusal (a word or two), releases it once it cannot; `feed` returns the text to speak now. Once a sentence
    opens with a refusal, `declined` is set and the rest of the reply is dropped: say `fact` instead."""

    def __init__(self, fact: str) -> None:
        self.fact, self.declined = fact, False
        self.released, self._held = "", ""
        self._mid = False  # the held text continues a sentence whose opening was let out

    def feed(self, text: str) -> str:
        if self.declined:
            return ""
        self._held += text
        start, mid = 0, self._mid
        for m in _SENTENCE_END.finditer(self._held):
            if not mid and declines(self._held[start : m.start()]):
                return self._decline(start)
            start, mid = m.end(), False
        sentence = self._held[start:]
        if not mid and declines(sentence):
            return self._decline(start)
        if not mid and may_decline(sentence):
            out, self._held, self._mid = self._held[:start], sentence, False
        else:
            out, self._held = self._held, ""
            self._mid = bool(sentence) and not _ENDS_SENTENCE.search(sentence)
        self.released += out
        return out

    def _decline(self, start: int) -> str:
        out, self._held, self.declined = self._held[:start], "", True
        self.released += out
        return out

    def flush(self) -> str:
        """What is held when the reply ends (an opening that never became a refusal)."""
        out, self._held = ("" if self.declined else self._held), ""
        self.released += out
        return out

    @property
    def speech(self) -> str:
        """What the caller hears of this reply: the released text, and the fact after a refusal."""
        return f"{self.released.rstrip()} {self.fact}".strip() if self.declined else self.released

    def finish(self, text: str = "") -> str:
        """The rest of the reply as spoken: `text` and whatever is held, or, once it declined, the fact."""
        out = self.feed(text) + self.flush()
        return f"{out} {self.fact}" if self.declined else out

    def apply(self, reply: str) -> str:
        """The whole reply as a call would speak it (for evaluation)."""
        self.finish(reply)
        return self.speech
