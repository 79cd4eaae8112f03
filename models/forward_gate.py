"""Target forwards of concurrent conversations taken in order of urgency: at most `slots` run at once, and when more
wait, the one whose listener has the least audio left to hear goes first.

Unscheduled, every conversation's forward runs the moment it is asked for, so on a few cores a reply whose caller is
waiting for its first word gets the same share as one with seconds of speech queued ahead of its listener. Each
forward here says its slack (seconds of speech its listener has yet to hear; 0 while they wait), and a free slot goes
to the least slack. A forward alone never waits. Output is unchanged: only the order in which forwards start moves.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

WARM_UP_SLACK_S = 30.0  # a prompt warmed ahead of a turn the caller is still speaking: anything else goes first


class ForwardGate:
    """At most `slots` forwards at once; waiting forwards start least slack first (ties: first come)."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self.slots = slots
        self.running = 0
        self._waiting: list[tuple[float, int]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()

    @contextmanager
    def forward(self, slack_s: float) -> Iterator[None]:
        """Hold a slot for one forward, once no waiting forward has less slack."""
        ticket = (slack_s, next(self._order))
        with self._changed:
            heapq.heappush(self._waiting, ticket)
            while self.running >= self.slots or self._waiting[0] != ticket:
                self._changed.wait()
            heapq.heappop(self._waiting)
            self.running += 1
            self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self.running -= 1
                self._changed.notify_all()

    @property
    def waiting(self) -> int:
        return len(self._waiting)
