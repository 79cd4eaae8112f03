"""WS /ws/call: the browser call protocol (JSON control frames, PCM s16le binary frames) <-> the call loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Annotated, Literal

from fastapi import APIRouter, WebSocket
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from pipeline.audio import pcm16_to_float
from pipeline.call import Call
from pipeline.io import AudioIn, DtmfIn, HangUp, TextIn
from pipeline.playout import Segment
from pipeline.profile import PROFILE_ID_PATTERN
from server.limits import CLOSE_BUSY, SocketLimits
from server.transports.jsonframe import load_json

log = logging.getLogger(__name__)
router = APIRouter()

RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)

CLOSE_BAD_START = 4400
CLOSE_UNKNOWN_PROFILE = 4404


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Start(_Msg):
    type: Literal["start"]
    profile: str = Field(..., pattern=PROFILE_ID_PATTERN)
    sample_rate: Literal[RATES] = 16000  # type: ignore[valid-type]
    output_sample_rate: Literal[RATES] | None = None  # type: ignore[valid-type]


class Text(_Msg):
    type: Literal["text"]
    text: str = Field(..., min_length=1)


class Dtmf(_Msg):
    type: Literal["dtmf"]
    digit: str = Field(..., pattern=r"^[0-9*#A-D]$")


class Stop(_Msg):
    type: Literal["stop"]


ClientMessage = TypeAdapter(Annotated[Start | Text | Dtmf | Stop, Field(discriminator="type")])


class ProtocolError(Exception):
    def __init__(self, code: str, message: str, close: int | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.close = code, message, close


def parse_message(raw: str) -> Start | Text | Dtmf | Stop:
    """One client text frame; ProtocolError says what is wrong with it."""
    try:
        data = load_json(raw)
    except ValueError as e:
        raise ProtocolError("bad_json", f"frame is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise ProtocolError("bad_message", "a text frame must be a JSON object with a string 'type'")
    if data["type"] not in ("start", "text", "dtmf", "stop"):
        raise ProtocolError("unknown_type", f"unknown message type '{data['type'][:40]}'")
    try:
        return ClientMessage.validate_python(data)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"][1:]) or "message"
        raise ProtocolError("bad_message", f"{data['type']}: field '{field}': {first['msg']}") from None


class BrowserIO:
    """CallIO over one WebSocket; sends after the socket closed are dropped."""

    confirms_playback = False

    def __init__(self, ws: WebSocket, output_rate: int) -> None:
        self.ws, self.output_rate = ws, output_rate
        self._lock = asyncio.Lock()

    async def _send(self, kind: str, payload) -> None:
        if self.ws.application_state != WebSocketState.CONNECTED:
            return
        async with self._lock:
            try:
                await (self.ws.send_bytes(payload) if kind == "bytes" else self.ws.send_text(payload))
            except (WebSocketDisconnect, RuntimeError, OSError):
                pass

    async def send_event(self, event: dict) -> None:
        await self._send("text", json.dumps(event))

    async def send_audio(self, pcm16: bytes) -> None:
        await self._send("bytes", pcm16)

    async def clear_audio(self) -> None:
        await self.send_event({"type": "interrupt"})

    async def segment_sent(self, segment: Segment) -> None:
        return None

    async def transfer(self, target: str) -> None:
        """The page shows the hand-over (a browser cannot dial): a `transfer` event, then the call ends."""
        await self.send_event({"type": "transfer", "target": target})
        await self._end("transferred")

    async def hang_up(self) -> None:
        await self._end("agent_hangup")

    async def _end(self, reason: str) -> None:
        """The agent ends the call: the `end` event, then a normal close."""
        await self.send_event({"type": "end", "reason": reason})
        async with self._lock:
            if self.ws.application_state == WebSocketState.CONNECTED:
                with contextlib.suppress(RuntimeError, OSError):
                    await self.ws.close(code=1000)

    async def error(self, code: str, message: str, close: int | None = None) -> None:
        log.info("ws/call error %s: %s", code, message)
        self.ws.app.state.talkline.metrics.errors.labels(code=code).inc()
        await self.send_event({"type": "error", "code": code, "message": message})
        if close and self.ws.application_state == WebSocketState.CONNECTED:
            await self.ws.close(code=close, reason=code)


async def _receive_start(ws: WebSocket, io: BrowserIO, limits: SocketLimits) -> Start | None:
    msg = await limits.receive()
    if isinstance(msg, str):
        return None
    if msg.get("text") is None:
        await io.error("not_started", 'send {"type":"start",...} before any audio', CLOSE_BAD_START)
        return None
    try:
        start = parse_message(msg["text"])
    except ProtocolError as e:
        await io.error(e.code, e.message, CLOSE_BAD_START)
        return None
    if not isinstance(start, Start):
        await io.error("not_started", f"the first frame must be 'start', got '{start.type}'", CLOSE_BAD_START)
        return None
    if start.profile not in ws.app.state.talkline.profiles:
        await io.error("unknown_profile", f"no profile '{start.profile}'; GET /profiles lists them", CLOSE_UNKNOWN_PROFILE)
        return None
    return start


async def _pump(ws: WebSocket, io: BrowserIO, call: Call, runner: asyncio.Task, limits: SocketLimits) -> str:
    """Client frames -> the call's inbox, until the caller stops, disconnects, a limit ends it or the call ends."""
    settings = ws.app.state.talkline.settings
    limit = settings.max_frame_bytes
    while not runner.done():
        msg = await limits.receive()
        if isinstance(msg, str):
            return msg
        now = time.monotonic()
        if (data := msg.get("bytes")) is not None:
            if len(data) > limit:
                await io.error("frame_too_large", f"binary frames are limited to {limit} bytes; send 20 ms frames")
            elif len(data) % 2:
                await io.error("bad_audio", "audio must be PCM s16le: an even number of bytes")
            elif data:
                call.push(AudioIn(pcm16_to_float(data), now))
            continue
        try:
            message = parse_message(msg.get("text") or "")
        except ProtocolError as e:
            await io.error(e.code, e.message)
            continue
        if isinstance(message, Stop):
            return "caller_stop"
        if isinstance(message, Start):
            await io.error("already_started", "this call has already started")
        elif isinstance(message, Text):
            if len(message.text) > settings.max_text_chars:
                await io.error("text_too_long", f"text turns are limited to {settings.max_text_chars} characters")
            else:
                call.push(TextIn(message.text, now))
        else:
            call.push(DtmfIn(message.digit, now))
    return "call_ended"


@router.websocket("/ws/call")
async def browser_call(ws: WebSocket) -> None:
    await ws.accept()
    state = ws.app.state.talkline
    io = BrowserIO(ws, 16000)
    if denial := state.guard.client(ws):
        await io.error(denial.code, denial.message, denial.close)
        return
    limits = SocketLimits(ws, state.settings, io.error)
    start = await _receive_start(ws, io, limits)
    if start is None:
        return
    key = state.guard.key_of(ws)
    if not state.guard.quotas.take(key):
        denial = state.guard.quotas.refusal(key)
        await io.error(denial.code, denial.message, denial.close)
        return
    try:
        if not state.calls.take():
            await io.error(*state.calls.refusal(), CLOSE_BUSY)
            return
        io.output_rate = start.output_sample_rate or start.sample_rate
        call = None
        try:
            call = Call(state.profiles[start.profile], state.stages, io, state.store, state.metrics, start.sample_rate, "browser")
            state.calls.hold(call)
            await _run_call(ws, io, call, limits)
        finally:
            state.calls.give_back(call)
    finally:
        state.guard.quotas.give_back(key)


async def _run_call(ws: WebSocket, io: BrowserIO, call: Call, limits: SocketLimits) -> None:
    await io.send_event({"type": "ready", "call_id": call.id})
    runner = asyncio.create_task(call.run())
    pump = asyncio.create_task(_pump(ws, io, call, runner, limits))
    runner.add_done_callback(lambda _: pump.cancel())  # the call ended itself: a hang-up, a transfer, a drain
    reason = "error"
    try:
        await asyncio.wait({pump})
        reason = "call_ended" if pump.cancelled() else pump.result()
    except Exception:
        log.exception("ws/call %s: receive loop failed", call.id)
    finally:
        pump.cancel()
        call.push(HangUp(reason))
        try:
            reason = await runner
        except Exception:
            log.exception("ws/call %s: call loop failed", call.id)
        await io.send_event({"type": "end", "reason": reason})
        if ws.application_state == WebSocketState.CONNECTED:
            await ws.close(code=1000)
