"""Run one Call over one WebSocket, whatever its wire format: accept, authenticate, start, feed, hang up, close.

Every transport (the browser's /ws/call and each phone carrier's media socket) is a `Wire` handed to `SocketCall`,
so limits, authentication, the call slot and error handling live here once."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time

from fastapi import WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from pipeline.call import Call
from pipeline.io import AudioIn, DtmfIn, HangUp, TextIn
from pipeline.playout import Segment
from server.limits import ErrorLog, SocketLimits
from server.transports.carrier_control import CallControl, ControlFactory
from server.transports.wire import Audio, Digit, Event, Played, Started, Stopped, Text, Wire, WireError

log = logging.getLogger(__name__)

SENT = (WebSocketDisconnect, RuntimeError, OSError)  # what a send to a socket the far end left raises


class SocketIO:
    """CallIO over one socket in its wire format; sends after the socket closed are dropped."""

    def __init__(self, ws: WebSocket, wire: Wire, rate: int, control: CallControl | None) -> None:
        self.ws, self.wire, self.output_rate, self.control = ws, wire, rate, control
        self.confirms_playback = wire.marks
        self.pending: dict[str, Segment] = {}  # marks sent, not yet echoed
        self._names = itertools.count(1)
        self._lock = asyncio.Lock()

    async def send(self, frame: str | bytes | None) -> None:
        if frame is None or self.ws.application_state != WebSocketState.CONNECTED:
            return
        async with self._lock:
            with contextlib.suppress(*SENT):
                await (self.ws.send_bytes(frame) if isinstance(frame, bytes) else self.ws.send_text(frame))

    async def close(self, code: int, reason: str = "") -> None:
        async with self._lock:
            if self.ws.application_state == WebSocketState.CONNECTED:
                with contextlib.suppress(*SENT):
                    await self.ws.close(code=code, reason=reason)

    async def send_event(self, event: dict) -> None:
        await self.send(self.wire.event(event))

    async def send_audio(self, pcm16: bytes) -> None:
        for frame in self.wire.audio(pcm16):
            await self.send(frame)

    async def clear_audio(self) -> None:
        self.pending.clear()  # a carrier returns these marks unplayed
        await self.send(self.wire.clear())

    async def segment_sent(self, segment: Segment) -> None:
        name = f"t{segment.turn}-{next(self._names)}"
        if (frame := self.wire.mark(name)) is not None:
            self.pending[name] = segment
            await self.send(frame)

    def played(self, name: str) -> Segment | None:
        """The segment an echoed mark confirms; None for a mark returned after a clear (or never sent)."""
        return self.pending.pop(name, None)

    async def transfer(self, target: str) -> None:
        """Through the carrier's REST API (carrier_control.py), which then stops the stream; a page cannot dial, so
        it is shown the hand-over (a `transfer` event) and the call ends."""
        if self.control is not None:
            await self.control.transfer(target)
            return
        await self.send_event({"type": "transfer", "target": target})
        await self.end("transferred")

    async def hang_up(self) -> None:
        if self.control is not None:
            await self.control.hang_up()
        else:
            await self.end("agent_hangup")

    async def end(self, reason: str) -> None:
        """The `end` event (where the wire carries events), then a normal close."""
        await self.send_event({"type": "end", "reason": reason})
        await self.close(1000)


class SocketCall:
    """One socket: wait for the start, run a Call, feed it until the far end stops or leaves, a limit ends it, or the
    call ends itself (a hang-up or transfer)."""

    def __init__(self, ws: WebSocket, wire: Wire, control: ControlFactory | None = None) -> None:
        self.ws, self.wire, self.control = ws, wire, control
        self.state = ws.app.state.talkline
        self.io = SocketIO(ws, wire, 16000, None)  # until the start: errors only
        self.call: Call | None = None
        self.limits = SocketLimits(ws, self.state.settings, self.deny)
        self.quota_key: str | None = None
        self._quota_taken = False
        self.errors = ErrorLog(self.state.metrics, wire.transport)

    async def serve(self) -> None:
        """Accept the socket and run it to the end; never raises."""
        await self.ws.accept()
        guard = self.state.guard
        if denial := (guard.client(self.ws) if self.wire.client else guard.carrier(self.ws)):
            await self.deny(denial.code, denial.message, denial.close)
            return
        reason = "error"
        try:
            opened = await self._until_started()
            reason = opened if isinstance(opened, str) else await self._run(*opened)
        except Exception:
            log.exception("%s: socket failed", self.wire.transport)
        finally:
            if self._quota_taken:
                guard.quotas.give_back(self.quota_key)
            await self.io.end(reason)

    async def _until_started(self) -> str | tuple[list[Event | WireError], float]:
        """Frames before the call starts; the events the starting frame released after the start, or an end reason."""
        while True:
            msg = await self.limits.receive()
            if isinstance(msg, str):
                return msg
            now = time.monotonic()
            events = self._decode(msg)
            for i, event in enumerate(events):
                if isinstance(event, Started):
                    try:
                        self._start(event)
                    except WireError as e:
                        events[i] = e
                    else:
                        return events[i + 1 :], now
                if reason := await self._on(events[i], now):
                    return reason

    def _decode(self, msg: dict) -> list[Event | WireError]:
        try:
            return self.wire.decode(msg["text"] if msg.get("text") is not None else msg.get("bytes") or b"")
        except WireError as e:
            return [e]

    def _start(self, started: Started) -> None:
        state, guard = self.state, self.state.guard
        if not self.wire.client and (denial := guard.carrier_start(self.ws, started.secret)):
            raise WireError(denial.code, "the stream carries no valid secret (TALKLINE_CARRIER_SECRET)", denial.close)
        profile_id = started.profile or self.ws.query_params.get("profile") or state.settings.default_profile
        if (profile := state.profiles.get(profile_id)) is None:
            message = f"no profile '{str(profile_id)[:64]}'; GET /profiles lists them"
            raise WireError("unknown_profile", message, self.wire.unknown_profile_close)
        if self.wire.client:
            self.quota_key = guard.key_of(self.ws)
            if not guard.quotas.take(self.quota_key):
                denial = guard.quotas.refusal(self.quota_key)
                raise WireError(denial.code, denial.message, denial.close)
            self._quota_taken = True
        if not state.calls.take():
            raise WireError(*state.calls.refusal(), self.wire.busy_close)
        try:
            control = self.control(state.settings, started.call_id or self.ws.query_params.get("call_id")) if self.control else None
            self.io = SocketIO(self.ws, self.wire, started.output_rate or started.rate, control)
            self.call = Call(profile, state.stages, self.io, state.store, state.metrics, started.rate, self.wire.transport)
        except Exception:
            state.calls.give_back()
            raise
        state.calls.hold(self.call)
        log.info("%s call %s started: profile %s, %d Hz", self.wire.transport, self.call.id, profile.id, started.rate)

    async def _run(self, events: list[Event | WireError], now: float) -> str:
        """Feed the started call until either side ends; hang it up, wait for it and give its slot back."""
        call = self.call
        await self.io.send_event({"type": "ready", "call_id": call.id})
        runner = asyncio.create_task(call.run())
        feeding = asyncio.create_task(self._feed(events, now))
        runner.add_done_callback(lambda _: feeding.cancel())  # the call ended itself: a hang-up, a transfer, a drain
        reason = "error"
        try:
            await asyncio.wait({feeding})
            reason = "call_ended" if feeding.cancelled() else feeding.result()
        except Exception:
            log.exception("%s call %s: receive loop failed", self.wire.transport, call.id)
        finally:
            feeding.cancel()
            call.push(HangUp(reason))
            try:
                reason = await runner
            except Exception:
                log.exception("%s call %s: call loop failed", self.wire.transport, call.id)
            finally:
                self.state.calls.give_back(call)
        log.info("%s call %s ended: %s", self.wire.transport, call.id, reason)
        return reason

    async def _feed(self, events: list[Event | WireError], now: float) -> str:
        while True:
            for event in events:
                if reason := await self._on(event, now):
                    return reason
            msg = await self.limits.receive()
            if isinstance(msg, str):
                return msg
            events, now = self._decode(msg), time.monotonic()

    async def _on(self, event: Event | WireError, now: float) -> str | None:
        """Hand one event to the call; returns an end reason when the socket is done."""
        if isinstance(event, WireError):
            return await self._reject(event)
        if isinstance(event, Stopped):
            return "caller_stop"
        if self.call is None:
            return await self._reject(WireError("not_started", f"{type(event).__name__.lower()} before the start"))
        if isinstance(event, Audio):
            self.call.push(AudioIn(event.samples, now))
        elif isinstance(event, Text):
            self.call.push(TextIn(event.text, now))
        elif isinstance(event, Digit):
            self.call.push(DtmfIn(event.digit, now))
        elif isinstance(event, Played):
            if (segment := self.io.played(event.mark)) is not None:
                self.call.playout.confirm(segment)
        else:
            return await self._reject(WireError("already_started", "this call has already started"))
        return None

    async def _reject(self, error: WireError) -> str | None:
        """Bad input: reported; only before the call started does it close the socket (with the error's code)."""
        close = error.close if self.call is None else None
        await self.deny(error.code, str(error), close)
        return error.code if close else None

    async def deny(self, code: str, message: str, close: int | None) -> None:
        """Count, log (a warning the first time per kind), send an `error` event where the wire has events, and close
        with `close` if given."""
        self.errors.record(self.call.id if self.call else None, code, message)
        await self.io.send_event({"type": "error", "code": code, "message": message})
        if close:
            await self.io.close(close, code)
