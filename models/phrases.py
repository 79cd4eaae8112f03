"""Phrase-memory drafts: how the target most often went on after its last few tokens, in its own past replies.

A voice agent says the same things across calls ("I'm sorry about that", "can I have your order number,
please"), where a one-layer drafter trained on other profiles swaps in its own habit. Counting every n-gram of
the target's replies (shipped with the drafter, then each reply it serves) gives the continuation it took most
often. Like SGLang's n-gram speculation across requests, it changes speed only: verification keeps the output.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from models.proposal import Proposal

PHRASES_NAME = "phrases.json"  # beside a drafter's config.json: the target's replies, token ids
PHRASE_VETO = 0.95  # the drafter's top probability at which it overrides a disagreeing phrase (chosen on held-out)
MIN_SHARE = 0.6  # a continuation must be at least this share of what followed the n-gram to be proposed
CAPACITY = 10_000  # replies remembered; the oldest are forgotten past it


class PhraseMemory:
    """Continuation counts of every n-gram (n from `shortest` to `longest`) over the last `capacity` replies."""

    def __init__(self, replies: Iterable[list[int]] = (), capacity: int = CAPACITY, shortest: int = 2, longest: int = 6) -> None:
        self.capacity, self.shortest, self.longest = capacity, shortest, longest
        self.replies: deque[list[int]] = deque()
        self.counts: dict[tuple[int, ...], dict[int, int]] = {}
        self.lock = threading.Lock()
        for reply in replies:
            self.add(reply)

    def __len__(self) -> int:
        return len(self.replies)

    def _count(self, reply: list[int], delta: int) -> None:
        for end in range(len(reply) - 1):
            after = reply[end + 1]
            for n in range(self.shortest, min(self.longest, end + 1) + 1):
                key = tuple(reply[end - n + 1 : end + 1])
                followers = self.counts.setdefault(key, {})
                left = followers.get(after, 0) + delta
                if left > 0:
                    followers[after] = left
                else:
                    followers.pop(after, None)
                    if not followers:
                        del self.counts[key]

    def add(self, reply: list[int]) -> None:
        """Remember a reply (forgetting the oldest past `capacity`)."""
        if len(reply) < self.shortest + 1:
            return
        with self.lock:
            self.replies.append(list(reply))
            self._count(self.replies[-1], 1)
            while len(self.replies) > self.capacity:
                self._count(self.replies.popleft(), -1)

    def propose(self, tail: list[int]) -> Proposal | None:
        """The most frequent continuation of the longest remembered n-gram ending `tail`, if it has MIN_SHARE."""
        with self.lock:
            for n in range(min(self.longest, len(tail)), self.shortest - 1, -1):
                followers = self.counts.get(tuple(tail[-n:]))
                if followers:
                    token, count = max(followers.items(), key=lambda item: item[1])
                    if count < MIN_SHARE * sum(followers.values()):
                        return None
                    return Proposal(token, n, PHRASE_VETO)
        return None

    def save(self, path: Path) -> None:
        """The remembered replies, oldest first, as JSON."""
        path.write_text(json.dumps({"replies": list(self.replies)}, separators=(",", ":")) + "\n")

    @classmethod
    def load(cls, path: Path, capacity: int = CAPACITY) -> PhraseMemory:
        return cls(json.loads(path.read_text())["replies"], capacity)
