"""Prompt-lookup drafts: the token that followed the latest earlier occurrence of the context's last n tokens.

A voice agent's reply repeats its context (a profile's facts, the caller's booking code, its own earlier
phrases), where a small drafter guesses worst. A table of every n-gram in the context (n from `shortest`
to `longest`) gives, in O(1) a lookup, what came after its most recent occurrence. Where the context has
none, the target's past replies may (`models/phrases.py`).
"""

from __future__ import annotations

from models.phrases import PhraseMemory
from models.proposal import Proposal

LONG_MATCH = 6  # a proposal whose context agrees this far back is trusted over a drafter short of VETO_LONG
VETO = 0.99  # the drafter's top probability at which it overrides a disagreeing proposal...
VETO_LONG = 0.999  # ...and at which it overrides one backed by a LONG_MATCH


def context_proposal(token: int, matched: int) -> Proposal:
    """A token copied from the context: the longer its match, the surer the drafter must be to override it."""
    return Proposal(token, matched, VETO_LONG if matched >= LONG_MATCH else VETO)


class ContextLookup:
    """N-gram table over a growing token context; `propose` continues a tail the way the context did, else
    the way the target's past replies (`phrases`) most often did."""

    def __init__(self, ids: list[int], shortest: int = 2, longest: int = 4, phrases: PhraseMemory | None = None) -> None:
        self.ids: list[int] = []
        self.shortest, self.longest, self.phrases = shortest, longest, phrases
        self.reach = max(LONG_MATCH, longest, phrases.longest if phrases is not None else 0)  # tail tokens `propose` reads
        self.table: dict[tuple[int, ...], int] = {}
        self.extend(ids)

    def extend(self, tokens: list[int]) -> None:
        """Append verified tokens; each n-gram is indexed once the token after it is known."""
        for token in tokens:
            self.ids.append(token)
            end = len(self.ids) - 2  # the n-grams ending here are now continued by `token`
            for n in range(self.shortest, min(self.longest, end + 1) + 1):
                self.table[tuple(self.ids[end - n + 1 : end + 1])] = end + 1

    def propose(self, drafts: list[int]) -> Proposal | None:
        """The next token after context + `drafts` by the longest n-gram seen before, or None."""
        tail = (self.ids[-self.reach :] + drafts)[-self.reach :]
        for n in range(min(self.longest, len(tail)), self.shortest - 1, -1):
            at = self.table.get(tuple(tail[-n:]))
            if at is not None:
                matched = n
                while matched < len(tail) and matched < at and self.ids[at - 1 - matched] == tail[-1 - matched]:
                    matched += 1
                return context_proposal(self.ids[at], matched)
        return self.phrases.propose(tail) if self.phrases is not None else None
