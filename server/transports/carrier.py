"""Run one Call over a phone carrier's media WebSocket; each carrier module supplies only its wire format."""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from fastapi import WebSocket
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from pipeline.call import Call
from pipeline.io import AudioIn, DtmfIn, HangUp
from pipeline.playout import Segment
from server.limits import CLOSE_BUSY_CARRIER, SocketLimits
from server.transports.carrier_control import CallControl, ControlFactory
from server.transports.jsonframe import load_json

log = logging.getLogger(__name__)

CLOSE_POLICY = 1008  # the call cannot go on (a start we cannot serve)
MAX_FRAME_S = 1.0  # the longest caller audio frame accepted


# ---- what a wire format decodes a frame into ----------------------------------------------------
@dataclass(frozen=True)
class Started:
    rate: int  # caller audio rate; agent audio goes back at the same rate
    profile: str | None = None  # from the start message; else the URL's ?profile=, else the default
    secret: str | None = None  # from the start message; else the URL's ?secret= (TALKLINE_CARRIER_SECRET)
    call_id: str | None = None  # the carrier's id of the call, for transfer and hang-up; else the URL's ?call_id=


@dataclass(frozen=True)
class Audio:
    samples: np.ndarray  # float32 at the started rate


@dataclass(frozen=True)
class Digit:
    digit: str


@dataclass(frozen=True)
class Played:
    mark: str  # the name of a mark the carrier echoed once the audio before it played


@dataclass(frozen=True)
class Stopped:
    pass


Event = Started | Audio | Digit | Played | Stopped


class WireError(Exception):
    """A frame the carrier should not have sent: logged and ignored, or with `close` the socket closes."""

    def __init__(self, code: str, message: str, close: int | None = None) -> None:
        super().__init__(message)
        self.code, self.close = code, close


class Wire(Protocol):
    """One socket's wire format (a Pipecat serializer): frames in -> events; agent audio and controls -> frames."""

    transport: str  # the call's transport name in the database and metrics
    marks: bool  # the carrier echoes our marks once the audio before them played

    def decode(self, frame: str | bytes) -> list[Event | WireError]:
        """Raises WireError for a bad frame; returns one for a bad message among several a frame released."""

    def audio(self, pcm16: bytes) -> list[str | bytes]: ...

    def mark(self, name: str) -> str | None: ...

    def clear(self) -> str: ...


class WireMessage(BaseModel):
    """Base of carrier message models: carriers add fields over time, so unknown ones are ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


# ---- helpers the wire formats share -------------------------------------------------------------
def parse_message(frame: str | bytes, adapter: TypeAdapter, key: str = "event", fatal: tuple[str, ...] = ()):
    """A JSON text frame validated into one of a carrier's message models; a bad `fatal` one closes the socket."""
    if isinstance(frame, bytes):
        raise WireError("bad_message", "binary frame on a JSON socket")
    try:
        data = load_json(frame)
    except ValueError as e:
        raise WireError("bad_json", f"frame is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get(key), str):
        raise WireError("bad_message", f"a frame must be a JSON object with a string '{key}'")
    try:
        return adapter.validate_python(data)
    except ValidationError as e:
        first = e.errors()[0]
        if first["type"] == "union_tag_invalid":
            raise WireError("unknown_event", f"unknown {key} '{data[key][:40]}'") from None
        field = ".".join(str(p) for p in first["loc"][1:]) or key
        close = CLOSE_POLICY if data[key] in fatal else None
        raise WireError("bad_message", f"{data[key][:40]}: field '{field}': {first['msg']}", close) from None


def decode_payload(payload: str, decode: Callable[[bytes], np.ndarray], max_bytes: int) -> np.ndarray:
    """Base64 audio -> float32 samples; WireError for bad base64 or an empty or over-long payload."""
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise WireError("bad_audio", "media payload is not valid base64") from None
    if not 0 < len(data) <= max_bytes:
        raise WireError("bad_audio", f"media payload of {len(data)} bytes; expected 1 to {max_bytes}")
    return decode(data)


def encode_payload(pcm16: bytes, encode: Callable[[np.ndarray], bytes]) -> str:
    """PCM s16le agent audio -> base64 of the carrier's codec."""
    return base64.b64encode(encode(np.frombuffer(pcm16, "<i2"))).decode("ascii")


# ---- the call over the socket -------------------------------------------------------------------
class CarrierIO:
    """CallIO over a carrier socket: audio, marks and clears in the carrier's format; text events stay server-side."""

    def __init__(self, ws: WebSocket, wire: Wire, rate: int, control: CallControl) -> None:
        self.ws, self.wire, self.output_rate, self.control = ws, wire, rate, control
        self.confirms_playback = wire.marks
        self.pending: dict[str, Segment] = {}  # marks sent, not yet echoed
        self._names = itertools.count(1)
        self._lock = asyncio.Lock()

    async def _send(self, frame: str | bytes) -> None:
        if self.ws.application_state != WebSocketState.CONNECTED:
            return
        async with self._lock:
            try:
                await (self.ws.send_bytes(frame) if isinstance(frame, bytes) else self.ws.send_text(frame))
            except (WebSocketDisconnect, RuntimeError, OSError):
                pass

    async def send_event(self, event: dict) -> None:
        """Phone carriers carry audio only; transcripts and replies are in the database."""

    async def send_audio(self, pcm16: bytes) -> None:
        for frame in self.wire.audio(pcm16):
            await self._send(frame)

    async def clear_audio(self) -> None:
        self.pending.clear()  # the carrier returns these marks unplayed
        await self._send(self.wire.clear())

    async def segment_sent(self, segment: Segment) -> None:
        name = f"t{segment.turn}-{next(self._names)}"
        if (frame := self.wire.mark(name)) is not None:
            self.pending[name] = segment
            await self._send(frame)

    def played(self, name: str) -> Segment | None:
        """The segment an echoed mark confirms; None for a mark returned after a clear (or never sent)."""
        return self.pending.pop(name, None)

    async def transfer(self, target: str) -> None:
        """Through the carrier's REST API (carrier_control.py), which then stops this stream."""
        await self.control.transfer(target)

    async def hang_up(self) -> None:
        await self.control.hang_up()


class CarrierCall:
    """One carrier socket: wait for the start, run a Call, feed it until the carrier stops or hangs up, or the call
    ends itself (a transfer or hang-up through the carrier's API; the carrier then stops the stream too)."""

    def __init__(self, ws: WebSocket, wire: Wire, control: ControlFactory) -> None:
        self.ws, self.wire, self.control = ws, wire, control
        self.state = ws.app.state.talkline
        self.io: CarrierIO | None = None
        self.call: Call | None = None
        self.runner: asyncio.Task | None = None
        self.receiving: asyncio.Task | None = None
        self.limits = SocketLimits(ws, self.state.settings, self._deny)
        self._warned: set[str] = set()

    async def serve(self) -> None:
        """Accept the socket and run it to the end; never raises."""
        await self.ws.accept()
        if denial := self.state.guard.carrier(self.ws):
            await self._deny(denial.code, denial.message, denial.close)
            return
        reason = "error"
        self.receiving = asyncio.create_task(self._receive())
        try:
            await asyncio.wait({self.receiving})
            reason = "call_ended" if self.receiving.cancelled() else self.receiving.result()
        except Exception:
            log.exception("%s: receive loop failed", self.wire.transport)
        finally:
            self.receiving.cancel()
            await self._finish(reason)

    async def _receive(self) -> str:
        while self.runner is None or not self.runner.done():
            msg = await self.limits.receive()
            if isinstance(msg, str):
                return msg
            now = time.monotonic()
            try:
                events = self.wire.decode(msg["text"] if msg.get("text") is not None else msg.get("bytes") or b"")
            except WireError as e:
                events = [e]
            for event in events:
                if reason := await self._on(event, now):
                    return reason
        return "call_ended"

    async def _on(self, event: Event | WireError, now: float) -> str | None:
        """Hand one event to the call; returns an end reason when the socket is done."""
        if isinstance(event, Started):
            try:
                self._start(event)
            except WireError as e:
                return await self._reject(e)
        elif isinstance(event, WireError):
            return await self._reject(event)
        elif isinstance(event, Audio):
            self.call.push(AudioIn(event.samples, now))
        elif isinstance(event, Digit):
            self.call.push(DtmfIn(event.digit, now))
        elif isinstance(event, Played):
            if (segment := self.io.played(event.mark)) is not None:
                self.call.playout.confirm(segment)
        else:
            return "caller_stop"
        return None

    def _start(self, started: Started) -> None:
        if denial := self.state.guard.carrier_start(self.ws, started.secret):
            raise WireError(denial.code, "the stream carries no valid secret (TALKLINE_CARRIER_SECRET)", denial.close)
        profile_id = started.profile or self.ws.query_params.get("profile") or self.state.settings.default_profile
        if (profile := self.state.profiles.get(profile_id)) is None:
            raise WireError("unknown_profile", f"no profile '{str(profile_id)[:64]}'; GET /profiles lists them", CLOSE_POLICY)
        if not self.state.calls.take():
            raise WireError(*self.state.calls.refusal(), CLOSE_BUSY_CARRIER)
        call_id = started.call_id or self.ws.query_params.get("call_id")
        state, control = self.state, self.control(self.state.settings, call_id)
        self.io = CarrierIO(self.ws, self.wire, started.rate, control)
        self.call = Call(profile, state.stages, self.io, state.store, state.metrics, started.rate, self.wire.transport)
        state.calls.hold(self.call)
        self.runner = asyncio.create_task(self.call.run())
        self.runner.add_done_callback(lambda _: self.receiving.cancel())  # the call ended itself (transfer, hang-up)
        log.info("%s call %s started: profile %s, %d Hz", self.wire.transport, self.call.id, profile.id, started.rate)

    async def _reject(self, error: WireError) -> str | None:
        """Bad input: counted, logged (a warning the first time per kind); only an unservable start closes the socket."""
        close = error.close if self.call is None else None
        await self._deny(error.code, str(error), close)
        return error.code if close else None

    async def _deny(self, code: str, message: str, close: int | None) -> None:
        """Carriers have no error event: count, log (a warning the first time per kind), and close with `close` if given."""
        self.state.metrics.errors.labels(code=code).inc()
        level = logging.DEBUG if code in self._warned else logging.WARNING
        self._warned.add(code)
        call = self.call.id if self.call else "(not started)"
        log.log(level, "%s call %s: %s: %s", self.wire.transport, call, code, message)
        if close and self.ws.application_state == WebSocketState.CONNECTED:
            try:
                await self.ws.close(code=close, reason=code)
            except (WebSocketDisconnect, RuntimeError, OSError):
                pass

    async def _finish(self, reason: str) -> None:
        if self.call is not None:
            self.call.push(HangUp(reason))
            try:
                reason = await self.runner
            except Exception:
                log.exception("%s call %s: call loop failed", self.wire.transport, self.call.id)
            finally:
                self.state.calls.give_back(self.call)
            log.info("%s call %s ended: %s", self.wire.transport, self.call.id, reason)
        if self.ws.application_state == WebSocketState.CONNECTED:
            try:
                await self.ws.close(code=1000)
            except (WebSocketDisconnect, RuntimeError, OSError):
                pass
