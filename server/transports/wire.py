"""What a call socket's wire format is: the events it decodes frames into, what it encodes, the helpers formats share."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from server.limits import CLOSE_BUSY_CARRIER
from server.transports.jsonframe import load_json

CLOSE_POLICY = 1008  # the call cannot go on (a start we cannot serve)
MAX_FRAME_S = 1.0  # the longest caller audio frame accepted


# ---- what a wire format decodes a frame into ----------------------------------------------------
@dataclass(frozen=True)
class Started:
    rate: int  # caller audio rate
    profile: str | None = None  # from the start message; else the URL's ?profile=, else the default
    secret: str | None = None  # from the start message; else the URL's ?secret= (TALKLINE_CARRIER_SECRET)
    call_id: str | None = None  # the carrier's id of the call, for transfer and hang-up; else the URL's ?call_id=
    output_rate: int | None = None  # agent audio rate; None: the caller's rate


@dataclass(frozen=True)
class Audio:
    samples: np.ndarray  # float32 at the started rate


@dataclass(frozen=True)
class Text:
    text: str  # a typed caller turn


@dataclass(frozen=True)
class Digit:
    digit: str


@dataclass(frozen=True)
class Played:
    mark: str  # the name of a mark the carrier echoed once the audio before it played


@dataclass(frozen=True)
class Stopped:
    pass


Event = Started | Audio | Text | Digit | Played | Stopped


class WireError(Exception):
    """A frame the far end should not have sent: reported and ignored, or with `close` the socket closes."""

    def __init__(self, code: str, message: str, close: int | None = None) -> None:
        super().__init__(message)
        self.code, self.close = code, close


class Wire(Protocol):
    """One socket's wire format (a Pipecat serializer): frames in -> events; agent audio, controls, events -> frames."""

    transport: str  # the call's transport name in the database and metrics
    marks: bool  # the far end echoes our marks once the audio before them played
    client: bool  # an API client (API key, per-key quota); else a carrier (TALKLINE_CARRIER_SECRET)
    unknown_profile_close: int  # close code when the start names no profile we have
    busy_close: int  # close code when the server is at TALKLINE_MAX_CALLS or draining

    def decode(self, frame: str | bytes) -> list[Event | WireError]:
        """Raises WireError for a bad frame; returns one for a bad message among several a frame released."""

    def audio(self, pcm16: bytes) -> list[str | bytes]: ...

    def mark(self, name: str) -> str | None: ...

    def clear(self) -> str: ...

    def event(self, event: dict) -> str | None:
        """A protocol event (ready, transcript, error, end, ...) as a frame; None where the wire carries audio only."""


class CarrierWire:
    """What every phone carrier's wire shares: audio only, a secret authenticates it, the standard close codes."""

    transport = ""
    marks = False
    client = False
    unknown_profile_close = CLOSE_POLICY
    busy_close = CLOSE_BUSY_CARRIER

    def event(self, event: dict) -> None:
        """Carriers carry audio only; transcripts and replies are in the database."""
        return None


class WireMessage(BaseModel):
    """Base of carrier message models: carriers add fields over time, so unknown ones are ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


# ---- helpers the wire formats share -------------------------------------------------------------
def parse_message(frame: str | bytes, adapter: TypeAdapter, key: str = "event", fatal: tuple[str, ...] = ()):
    """A JSON text frame validated into one of a wire's message models; a bad `fatal` one closes the socket."""
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
            raise WireError("unknown_event" if key == "event" else f"unknown_{key}", f"unknown {key} '{data[key][:40]}'") from None
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
