"""WS /telnyx/media: Telnyx media streaming (snake_case JSON, base64 PCMU/PCMA RTP payloads) <-> a carrier call."""

from __future__ import annotations

import json
import logging
from typing import Annotated, Literal

from fastapi import APIRouter, WebSocket
from pydantic import Field, TypeAdapter

from pipeline.audio import alaw_decode, alaw_encode, mulaw_decode, mulaw_encode
from server.transports.carrier_control import TelnyxControl
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

log = logging.getLogger(__name__)
router = APIRouter()

RATE = 8000
CODECS = {"PCMU": (mulaw_decode, mulaw_encode), "PCMA": (alaw_decode, alaw_encode)}


class Connected(WireMessage):
    event: Literal["connected"]


class MediaFormat(WireMessage):
    encoding: str = "PCMU"
    sample_rate: int = RATE
    channels: int = 1


class StartInfo(WireMessage):
    call_control_id: str = Field("", max_length=256)
    media_format: MediaFormat = Field(default_factory=MediaFormat)
    custom_parameters: dict[str, str] = Field(default_factory=dict)


class _Sequenced(WireMessage):
    sequence_number: int | None = None
    stream_id: str = Field(..., min_length=1, max_length=128)


class Start(_Sequenced):
    event: Literal["start"]
    start: StartInfo = Field(default_factory=StartInfo)


class MediaBody(WireMessage):
    payload: str
    track: str = "inbound"


class Media(_Sequenced):
    event: Literal["media"]
    media: MediaBody


class DtmfBody(WireMessage):
    digit: str = Field(..., pattern=r"^[0-9*#A-D]$")


class Dtmf(_Sequenced):
    event: Literal["dtmf"]
    dtmf: DtmfBody


class MarkBody(WireMessage):
    name: str


class Mark(_Sequenced):
    event: Literal["mark"]
    mark: MarkBody


class Stop(_Sequenced):
    event: Literal["stop"]


class Error(WireMessage):
    event: Literal["error"]
    payload: dict = Field(default_factory=dict)


Message = TypeAdapter(Annotated[Connected | Start | Media | Dtmf | Mark | Stop | Error, Field(discriminator="event")])


class Reorder:
    """Releases messages in sequence_number order: holds up to `depth` early ones, drops duplicates and late ones."""

    def __init__(self, depth: int = 5, first: int = 1) -> None:
        self.depth, self.next = depth, first
        self.held: dict[int, _Sequenced] = {}

    def push(self, msg: _Sequenced) -> list[_Sequenced]:
        seq = msg.sequence_number
        if seq < self.next or seq in self.held:
            log.debug("telnyx: dropped %s %d (late or duplicate)", msg.event, seq)
            return []
        self.held[seq] = msg
        if len(self.held) > self.depth:
            self.next = min(self.held)  # the missing one is lost: stop waiting for it
        out = []
        while self.next in self.held:
            out.append(self.held.pop(self.next))
            self.next += 1
        return out

    def flush(self) -> list[_Sequenced]:
        """Everything held, in order (the stream is stopping)."""
        out = [self.held[seq] for seq in sorted(self.held)]
        self.held.clear()
        return out


class TelnyxWire(CarrierWire):
    """One Telnyx stream: reorders by sequence_number, decodes events, encodes media/mark/clear."""

    transport = "telnyx"
    marks = True

    def __init__(self) -> None:
        self.stream_id: str | None = None
        self.codec = CODECS["PCMU"]
        self.order = Reorder()

    def decode(self, frame: str | bytes) -> list[Event | WireError]:
        msg = parse_message(frame, Message, fatal=("start",))
        if isinstance(msg, Connected):
            return []
        if isinstance(msg, Error):
            log.warning("telnyx reports an error: %s", json.dumps(msg.payload)[:500])
            return []
        if msg.sequence_number is None:
            ordered = [msg]
        elif isinstance(msg, Stop):
            ordered = [*self.order.flush(), msg]
        else:
            ordered = self.order.push(msg)
        out: list[Event | WireError] = []
        for m in ordered:
            try:
                out += self._event(m)
            except WireError as e:
                out.append(e)
        return out

    def _event(self, msg: _Sequenced) -> list[Event]:
        if isinstance(msg, Start):
            return [self._start(msg)]
        if self.stream_id is None:
            raise WireError("not_started", f"'{msg.event}' before 'start'")
        if msg.stream_id != self.stream_id:
            raise WireError("wrong_stream", f"'{msg.event}' for stream '{msg.stream_id[:64]}', not this one")
        if isinstance(msg, Media):
            if msg.media.track not in ("inbound", "inbound_track"):
                return []
            return [Audio(decode_payload(msg.media.payload, self.codec[0], int(RATE * MAX_FRAME_S)))]
        if isinstance(msg, Dtmf):
            return [Digit(msg.dtmf.digit)]
        if isinstance(msg, Mark):
            return [Played(msg.mark.name)]
        return [Stopped()]

    def _start(self, msg: Start) -> Started:
        if self.stream_id is not None:
            raise WireError("already_started", "this stream has already started")
        fmt = msg.start.media_format
        if fmt.encoding.upper() not in CODECS or (fmt.sample_rate, fmt.channels) != (RATE, 1):
            found = f"{fmt.encoding}/{fmt.sample_rate}/{fmt.channels}"
            raise WireError("unsupported_format", f"media format {found}; use PCMU or PCMA at 8000 Hz", CLOSE_POLICY)
        self.stream_id, self.codec = msg.stream_id, CODECS[fmt.encoding.upper()]
        params = msg.start.custom_parameters
        return Started(RATE, params.get("profile"), params.get("secret"), msg.start.call_control_id or None)

    def audio(self, pcm16: bytes) -> list[str | bytes]:
        return [json.dumps({"event": "media", "media": {"payload": encode_payload(pcm16, self.codec[1])}})]

    def mark(self, name: str) -> str:
        return json.dumps({"event": "mark", "mark": {"name": name}})

    def clear(self) -> str:
        return json.dumps({"event": "clear"})


@router.websocket("/telnyx/media")
async def telnyx_media(ws: WebSocket) -> None:
    await SocketCall(ws, TelnyxWire(), TelnyxControl.from_settings).serve()
