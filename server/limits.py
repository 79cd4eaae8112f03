"""Per-call limits shared by every transport: concurrent calls (and the drain that refuses new ones), call duration,
inbound frames per second."""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.websockets import WebSocket

from pipeline.io import Closing
from pipeline.metrics import Metrics
from server.security import RATE_LIMITED
from server.settings import Settings

if TYPE_CHECKING:
    from pipeline.call import Call

log = logging.getLogger(__name__)

CLOSE_BUSY = 4503  # browser: the server is at TALKLINE_MAX_CALLS
CLOSE_BUSY_CARRIER = 1013  # carriers: "try again later", the standard code
ABUSE_S = 5.0  # a socket over its frame rate for longer than this is closed

# How a transport tells the far end about a limit: deny(code, message, close code or None).
Deny = Callable[[str, str, int | None], Awaitable[None]]


class ErrorLog:
    """One call's refusals and bad input: counted in talkline_errors_total, logged as a warning the first time per code."""

    def __init__(self, metrics: Metrics, transport: str) -> None:
        self.metrics, self.transport = metrics, transport
        self.warned: set[str] = set()

    def record(self, call_id: str | None, code: str, message: str) -> None:
        self.metrics.errors.labels(code=code).inc()
        level = logging.DEBUG if code in self.warned else logging.WARNING
        self.warned.add(code)
        log.log(level, "%s call %s: %s: %s", self.transport, call_id or "(not started)", code, message)


class CallSlots:
    """At most `limit` calls at once in this process, the calls that hold a slot, and whether the server drains."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self.live: set[Call] = set()
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    def take(self) -> bool:
        if self.draining or self.used >= self.limit:
            return False
        self.used += 1
        self._idle.clear()
        return True

    def refusal(self) -> tuple[str, str]:
        """Why `take` said no: the `error` code and what the caller should do."""
        if self.draining:
            return "draining", "the server is restarting and takes no new calls; call again in a moment"
        return "busy", f"the server is at its limit of {self.limit} calls; try again later"

    def hold(self, call: Call) -> None:
        """The call that now uses a taken slot (so a drain can end it)."""
        self.live.add(call)

    def give_back(self, call: Call | None = None) -> None:
        self.used -= 1
        self.live.discard(call)
        if self.used <= 0:
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """True once no call holds a slot, False if `timeout` seconds pass first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def close_all(self, reason: str) -> int:
        """Ask every live call to say its closing line and end; returns how many were asked."""
        for call in self.live:
            call.push(Closing(reason))
        return len(self.live)


class Verdict(enum.Enum):
    PASS = "pass"
    DROP = "drop"  # over the rate: dropped silently
    WARN = "warn"  # over the rate: dropped, and the first such frame this second
    CLOSE = "close"  # over the rate for longer than ABUSE_S


class FrameRate:
    """Inbound frames per one-second window; frames over the limit are dropped, a socket that keeps it up is closed."""

    def __init__(self, per_s: int, abuse_s: float = ABUSE_S) -> None:
        self.per_s, self.abuse_s = per_s, abuse_s
        self.window, self.count = float("-inf"), 0
        self.over_since: float | None = None

    def check(self, now: float) -> Verdict:
        if now - self.window >= 1.0:
            if self.count <= self.per_s or now - self.window >= 2.0:  # the last window (or a quiet one) was within the rate
                self.over_since = None
            self.window, self.count = now, 0
        self.count += 1
        if self.count <= self.per_s:
            return Verdict.PASS
        if self.over_since is None:
            self.over_since = self.window
        if now - self.over_since > self.abuse_s:
            return Verdict.CLOSE
        return Verdict.WARN if self.count == self.per_s + 1 else Verdict.DROP


class SocketLimits:
    """One socket's deadline (TALKLINE_MAX_CALL_S from the moment it connected) and frame rate, applied on receive."""

    def __init__(self, ws: WebSocket, settings: Settings, deny: Deny) -> None:
        self.ws, self.deny = ws, deny
        self.max_s = settings.max_call_s
        self.deadline = time.monotonic() + settings.max_call_s
        self.frames = FrameRate(settings.max_frames_per_s)

    async def receive(self) -> dict | str:
        """The next frame within the limits, or why the socket is done: caller_disconnected, max_duration, rate_limited."""
        while True:
            try:
                msg = await asyncio.wait_for(self.ws.receive(), max(self.deadline - time.monotonic(), 0))
            except TimeoutError:
                await self.deny("max_duration", f"calls are limited to {self.max_s:g} s", None)
                return "max_duration"
            if msg["type"] == "websocket.disconnect":
                return "caller_disconnected"
            verdict = self.frames.check(time.monotonic())
            if verdict is Verdict.PASS:
                return msg
            if verdict is Verdict.WARN:
                await self.deny("rate_limited", f"over {self.frames.per_s} frames per second: frames dropped", None)
            elif verdict is Verdict.CLOSE:
                await self.deny("rate_limited", f"over {self.frames.per_s} frames per second for {ABUSE_S:g} s", RATE_LIMITED.close)
                return "rate_limited"
