"""One worker thread for a model shared by all calls, running its queued jobs earliest deadline first.

A job's deadline is how long its call can wait: a final transcript's caller is waiting now, an interim one can wait
for the next interim, a clause can wait as long as the audio already queued ahead of it plays. Under load the call
about to fall silent is served first instead of whichever thread won a lock."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class DeadlineWorker:
    """Runs `run(slack_s, fn, ...)` jobs one at a time in its own thread, the earliest deadline first (FIFO on ties);
    a job whose awaiting task was cancelled before its turn is skipped."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: list[tuple[float, int, Callable[[], Any], asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._order = itertools.count()
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def waiting(self) -> int:
        """Jobs queued, not started."""
        with self._ready:
            return len(self._queue)

    async def run(self, slack_s: float, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args) in the worker thread, due `slack_s` seconds from now."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._ready:
            if self._closed:
                raise RuntimeError(f"{self.name} worker is closed")
            heapq.heappush(self._queue, (time.monotonic() + slack_s, next(self._order), lambda: fn(*args), loop, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._thread.start()
            self._ready.notify()
        return await future

    def close(self) -> None:
        """Stop after the running job; queued ones are cancelled."""
        with self._ready:
            self._closed = True
            queued, self._queue = self._queue, []
            self._ready.notify()
        for *_, loop, future in queued:
            _settle(loop, future.cancel)

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if self._closed:
                    return
                _, _, job, loop, future = heapq.heappop(self._queue)
            if future.cancelled():
                continue
            try:
                result = job()
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
                _settle(loop, lambda f=future, e=e: f.done() or f.set_exception(e))
            else:
                _settle(loop, lambda f=future, r=result: f.done() or f.set_result(r))


def _settle(loop: asyncio.AbstractEventLoop, action: Callable[[], Any]) -> None:
    """Run `action` on the awaiting task's loop; a loop that has closed needs nothing."""
    try:
        loop.call_soon_threadsafe(action)
    except RuntimeError:
        pass
