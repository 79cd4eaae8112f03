"""Graceful drain: the first SIGTERM stops new calls and lets running ones finish (up to TALKLINE_DRAIN_S), then ends
the rest with their profile's closing line and stops the server, exit code 0; a second SIGTERM stops it at once."""

from __future__ import annotations

import asyncio
import logging
import signal
from types import FrameType

import uvicorn
from fastapi import FastAPI

from server.limits import CallSlots

log = logging.getLogger(__name__)
CLOSING_S = 30.0  # time for the closing lines to play once the drain ran out


async def drain(calls: CallSlots, drain_s: float) -> None:
    """Refuse new calls, wait for the running ones, end what is left after `drain_s` seconds."""
    calls.draining = True
    log.warning("SIGTERM: draining; %d call(s) may run for up to %g s (a second SIGTERM stops at once)", calls.used, drain_s)
    if await calls.wait_idle(drain_s):
        return
    log.warning("drain: %g s passed; ending %d call(s) with their closing line", drain_s, calls.close_all("server_shutdown"))
    if not await calls.wait_idle(CLOSING_S):
        log.error("drain: %d call(s) still open %g s after their closing line; stopping anyway", calls.used, CLOSING_S)


class DrainingServer(uvicorn.Server):
    """uvicorn's server, with SIGTERM as a drain (phone systems drain; they do not drop calls) rather than a stop."""

    def __init__(self, config: uvicorn.Config, app: FastAPI, drain_s: float) -> None:
        super().__init__(config)
        self.app, self.drain_s = app, drain_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self.terms = 0  # SIGTERMs received once serving

    async def startup(self, sockets=None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().startup(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        state = getattr(self.app.state, "talkline", None)
        if sig != signal.SIGTERM or state is None or self.loop is None:
            super().handle_exit(sig, frame)
            return
        self.terms += 1
        if self.terms == 1:
            self.loop.call_soon_threadsafe(self._start_drain, state.calls)
        else:  # stop now (uvicorn closes the sockets); calls left open are marked interrupted at the next start
            log.warning("second SIGTERM: stopping without waiting for calls")
            self.should_exit = self.force_exit = True

    def _start_drain(self, calls: CallSlots) -> None:
        task = asyncio.ensure_future(drain(calls, self.drain_s))
        task.add_done_callback(lambda _: setattr(self, "should_exit", True))
