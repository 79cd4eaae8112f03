"""WS /ws/call: the browser call protocol (JSON control frames and events, PCM s16le binary frames). Wire format only."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, WebSocket
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from pipeline.audio import pcm16_to_float
from pipeline.profile import PROFILE_ID_PATTERN
from server.limits import CLOSE_BUSY
from server.settings import Settings
from server.transports.socket_call import SocketCall
from server.transports.wire import Audio, Digit, Event, Started, Stopped, Text, WireError, parse_message

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


class TextTurn(_Msg):
    type: Literal["text"]
    text: str = Field(..., min_length=1)


class Dtmf(_Msg):
    type: Literal["dtmf"]
    digit: str = Field(..., pattern=r"^[0-9*#A-D]$")


class Stop(_Msg):
    type: Literal["stop"]


ClientMessage = TypeAdapter(Annotated[Start | TextTurn | Dtmf | Stop, Field(discriminator="type")])


class BrowserWire:
    """One page's socket: a `start` frame first, then PCM frames and JSON controls; every event goes back as JSON."""

    transport = "browser"
    marks = False  # what the caller heard is estimated from the pacing
    client = True
    unknown_profile_close = CLOSE_UNKNOWN_PROFILE
    busy_close = CLOSE_BUSY

    def __init__(self, settings: Settings) -> None:
        self.max_frame_bytes, self.max_text_chars = settings.max_frame_bytes, settings.max_text_chars
        self.started = False

    def decode(self, frame: str | bytes) -> list[Event | WireError]:
        if not self.started:
            return [self._start(frame)]
        if isinstance(frame, bytes):
            return self._audio(frame)
        msg = parse_message(frame, ClientMessage, key="type")
        if isinstance(msg, Start):
            raise WireError("already_started", "this call has already started")
        if isinstance(msg, TextTurn):
            if len(msg.text) > self.max_text_chars:
                raise WireError("text_too_long", f"text turns are limited to {self.max_text_chars} characters")
            return [Text(msg.text)]
        if isinstance(msg, Dtmf):
            return [Digit(msg.digit)]
        return [Stopped()]

    def _start(self, frame: str | bytes) -> Started:
        """Any problem with the first frame closes the socket (4400)."""
        if isinstance(frame, bytes):
            raise WireError("not_started", 'send {"type":"start",...} before any audio', CLOSE_BAD_START)
        try:
            msg = parse_message(frame, ClientMessage, key="type")
        except WireError as e:
            raise WireError(e.code, str(e), CLOSE_BAD_START) from None
        if not isinstance(msg, Start):
            raise WireError("not_started", f"the first frame must be 'start', got '{msg.type}'", CLOSE_BAD_START)
        self.started = True
        return Started(msg.sample_rate, msg.profile, output_rate=msg.output_sample_rate)

    def _audio(self, data: bytes) -> list[Event]:
        if len(data) > self.max_frame_bytes:
            raise WireError("frame_too_large", f"binary frames are limited to {self.max_frame_bytes} bytes; send 20 ms frames")
        if len(data) % 2:
            raise WireError("bad_audio", "audio must be PCM s16le: an even number of bytes")
        return [Audio(pcm16_to_float(data))] if data else []

    def audio(self, pcm16: bytes) -> list[str | bytes]:
        return [pcm16]

    def mark(self, name: str) -> None:
        """The page plays what it gets; it echoes no marks."""
        return None

    def clear(self) -> str:
        return self.event({"type": "interrupt"})

    def event(self, event: dict) -> str:
        return json.dumps(event)


@router.websocket("/ws/call")
async def browser_call(ws: WebSocket) -> None:
    await SocketCall(ws, BrowserWire(ws.app.state.talkline.settings)).serve()
