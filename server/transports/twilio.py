"""WS /twilio/media: Twilio Media Streams (JSON events, base64 mu-law 8 kHz) <-> a carrier call. Wire format only."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, WebSocket
from pydantic import Field, TypeAdapter

from pipeline.audio import mulaw_decode, mulaw_encode
from server.transports.carrier_control import TwilioControl
from server.transports.socket_call import SocketCall
from server.transports.wire import (
    CLOSE_POLICY,
    MAX_FRAME_S,
    Audio,
    CarrierWire,
    Digit,
    Event,
    Played,
    Started,
    Stopped,
    WireError,
    WireMessage,
    decode_payload,
    encode_payload,
    parse_message,
)

router = APIRouter()

RATE = 8000
ENCODING = "audio/x-mulaw"


class MediaFormat(WireMessage):
    encoding: str = ENCODING
    sample_rate: int = Field(RATE, alias="sampleRate")
    channels: int = 1


class StartInfo(WireMessage):
    stream_sid: str = Field(..., alias="streamSid", min_length=1, max_length=128)
    call_sid: str = Field("", alias="callSid", max_length=128)
    media_format: MediaFormat = Field(default_factory=MediaFormat, alias="mediaFormat")
    custom_parameters: dict[str, str] = Field(default_factory=dict, alias="customParameters")


class Connected(WireMessage):
    event: Literal["connected"]


class Start(WireMessage):
    event: Literal["start"]
    start: StartInfo


class _OnStream(WireMessage):
    stream_sid: str = Field(..., alias="streamSid")


class MediaBody(WireMessage):
    payload: str
    track: str = "inbound"


class Media(_OnStream):
    event: Literal["media"]
    media: MediaBody


class DtmfBody(WireMessage):
    digit: str = Field(..., pattern=r"^[0-9*#A-D]$")


class Dtmf(_OnStream):
    event: Literal["dtmf"]
    dtmf: DtmfBody


class MarkBody(WireMessage):
    name: str


class Mark(_OnStream):
    event: Literal["mark"]
    mark: MarkBody


class Stop(_OnStream):
    event: Literal["stop"]


Message = TypeAdapter(Annotated[Connected | Start | Media | Dtmf | Mark | Stop, Field(discriminator="event")])


class TwilioWire(CarrierWire):
    """One Twilio stream: decodes Twilio's events, encodes media/mark/clear for its streamSid."""

    transport = "twilio"
    marks = True

    def __init__(self) -> None:
        self.stream_sid: str | None = None

    def decode(self, frame: str | bytes) -> list[Event | WireError]:
        msg = parse_message(frame, Message, fatal=("start",))
        if isinstance(msg, Connected):
            return []
        if isinstance(msg, Start):
            return [self._start(msg.start)]
        if self.stream_sid is None:
            raise WireError("not_started", f"'{msg.event}' before 'start'")
        if msg.stream_sid != self.stream_sid:
            raise WireError("wrong_stream", f"'{msg.event}' for stream '{msg.stream_sid[:64]}', not this one")
        if isinstance(msg, Media):
            if msg.media.track not in ("inbound", "inbound_track"):
                return []  # a both-tracks stream also echoes our own audio
            return [Audio(decode_payload(msg.media.payload, mulaw_decode, int(RATE * MAX_FRAME_S)))]
        if isinstance(msg, Dtmf):
            return [Digit(msg.dtmf.digit)]
        if isinstance(msg, Mark):
            return [Played(msg.mark.name)]
        return [Stopped()]

    def _start(self, start: StartInfo) -> Started:
        if self.stream_sid is not None:
            raise WireError("already_started", "this stream has already started")
        fmt = start.media_format
        if (fmt.encoding, fmt.sample_rate, fmt.channels) != (ENCODING, RATE, 1):
            raise WireError("unsupported_format", f"media format {fmt.encoding}/{fmt.sample_rate}/{fmt.channels}", CLOSE_POLICY)
        self.stream_sid = start.stream_sid
        params = start.custom_parameters
        return Started(RATE, params.get("profile"), params.get("secret"), start.call_sid or None)

    def audio(self, pcm16: bytes) -> list[str | bytes]:
        payload = encode_payload(pcm16, mulaw_encode)
        return [json.dumps({"event": "media", "streamSid": self.stream_sid, "media": {"payload": payload}})]

    def mark(self, name: str) -> str:
        return json.dumps({"event": "mark", "streamSid": self.stream_sid, "mark": {"name": name}})

    def clear(self) -> str:
        return json.dumps({"event": "clear", "streamSid": self.stream_sid})


@router.websocket("/twilio/media")
async def twilio_media(ws: WebSocket) -> None:
    await SocketCall(ws, TwilioWire(), TwilioControl.from_settings).serve()
