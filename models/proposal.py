"""A token proposed by a lookup (the conversation's n-grams or the phrase memory) in place of the drafter's guess."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Proposal:
    """A drafted token, how many tokens before it agree with where it was seen (at least the n-gram's n), and
    the drafter's top probability at which a different guess overrides it."""

    token: int
    matched: int
    veto: float

    def vetoed_by(self, guess: int, confidence: float) -> bool:
        """Whether the drafter is sure enough of another token (measured on held-out scenarios: its generic
        priors lose to copied facts below `veto`, win above)."""
        return guess != self.token and confidence >= self.veto
