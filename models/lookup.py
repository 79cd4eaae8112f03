"""Prompt-lookup drafts: the token that followed the latest earlier occurrence of the context's last n tokens.

A voice agent's reply repeats its context (a profile's facts, the caller's booking code, its own earlier
phrases), where a small drafter guesses worst. A table of every n-gram in the context (n from `shortest`
to `longest`) gives, in O(1) a lookup, what came after its most recent occurrence.
"""

from __future__ import annotations


class ContextLookup:
    """N-gram table over a growing token context; `propose` continues a tail the way the context did."""

    def __init__(self, ids: list[int], shortest: int = 2, longest: int = 4) -> None:
        self.ids: list[int] = []
        self.shortest, self.longest = shortest, longest
        self.table: dict[tuple[int, ...], int] = {}
        self.extend(ids)

    def extend(self, tokens: list[int]) -> None:
        """Append verified tokens; each n-gram is indexed once the token after it is known."""
        for token in tokens:
            self.ids.append(token)
            end = len(self.ids) - 2  # the n-grams ending here are now continued by `token`
            for n in range(self.shortest, min(self.longest, end + 1) + 1):
                self.table[tuple(self.ids[end - n + 1 : end + 1])] = end + 1

    def propose(self, drafts: list[int]) -> int | None:
        """The next token after context + `drafts` by the longest n-gram seen before, or None."""
        tail = (self.ids[-self.longest :] + drafts)[-self.longest :]
        for n in range(min(self.longest, len(tail)), self.shortest - 1, -1):
            at = self.table.get(tuple(tail[-n:]))
            if at is not None:
                return self.ids[at]
        return None
