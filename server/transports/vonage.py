"""WS /vonage/media: Vonage Voice WebSockets (binary PCM s16le 20 ms frames, JSON text events) <-> a carrier call."""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

from fastapi import APIRouter, WebSocket
from pydantic import Field, TypeAdapter

from pipeline.audio import pcm16_to_float
from server.transports.carrier_control import VonageControl
from server.transports.socket_call import SocketCall
from server.transports.wire import (
    CLOSE_POLICY,
    MAX_FRAME_S,
    Audio,
    CarrierWire,
    Digit,
    Event,
    Started,
    WireError,
    WireMessage,
    parse_message,
)

router = APIRouter()

CONTENT_TYPE = re.compile(r"^\s*audio/l16\s*;\s*rate=(8000|16000)\s*$", re.IGNORECASE)
FRAME_MS = 20


class Connected(WireMessage):
    event: Literal["websocket:connected"]
    content_type: str = Field(..., alias="content-type")
    profile: str | None = None  # a header of the NCCO's websocket endpoint
    secret: str | None = None  # another header (TALKLINE_CARRIER_SECRET), or ?secret= in its uri
    call_id: str | None = Field(None, max_length=128)  # the call's uuid (for transfer and hang-up), or ?call_id= in its uri


class Dtmf(WireMessage):
    event: Literal["websocket:dtmf"]
    digit: str = Field(..., pattern=r"^[0-9*#A-D]$")


Message = TypeAdapter(Annotated[Connected | Dtmf, Field(discriminator="event")])


class VonageWire(CarrierWire):
    """One Vonage call leg: the first text frame sets the rate; audio both ways in exact 20 ms binary frames."""

    transport = "vonage"
    marks = False  # Vonage echoes no marks: what the caller heard is estimated from the pacing

    def __init__(self) -> None:
        self.rate: int | None = None

    @property
    def frame_bytes(self) -> int:
        return 2 * self.rate * FRAME_MS // 1000

    def decode(self, frame: str | bytes) -> list[Event | WireError]:
        if isinstance(frame, bytes):
            return [self._audio(frame)]
        msg = parse_message(frame, Message, fatal=("websocket:connected",))
        if isinstance(msg, Dtmf):
            if self.rate is None:
                raise WireError("not_started", "'websocket:dtmf' before 'websocket:connected'")
            return [Digit(msg.digit)]
        if self.rate is not None:
            raise WireError("already_started", "this call has already connected")
        if not (match := CONTENT_TYPE.match(msg.content_type)):
            found = msg.content_type[:60]
            raise WireError("unsupported_format", f"content-type '{found}'; use audio/l16;rate=16000 or 8000", CLOSE_POLICY)
        self.rate = int(match.group(1))
        return [Started(self.rate, msg.profile, msg.secret, msg.call_id)]

    def _audio(self, data: bytes) -> Audio:
        if self.rate is None:
            raise WireError("not_started", "audio before 'websocket:connected'")
        if len(data) % 2 or not 0 < len(data) <= 2 * self.rate * MAX_FRAME_S:
            raise WireError("bad_audio", f"audio frame of {len(data)} bytes; expected 16-bit PCM, {self.frame_bytes} bytes per 20 ms")
        return Audio(pcm16_to_float(data))

    def audio(self, pcm16: bytes) -> list[str | bytes]:
        """Exact 20 ms frames; a clause's last, shorter frame is padded with silence."""
        n = self.frame_bytes
        return [pcm16[i : i + n].ljust(n, b"\0") for i in range(0, len(pcm16), n)]

    def mark(self, name: str) -> None:
        """Vonage has no marks."""
        return None

    def clear(self) -> str:
        return json.dumps({"action": "clear"})


@router.websocket("/vonage/media")
async def vonage_media(ws: WebSocket) -> None:
    await SocketCall(ws, VonageWire(), VonageControl.from_settings).serve()
