"""CallIO: what a transport gives the call loop, and what it puts in the call's inbox."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pipeline.playout import Segment


class CallIO(Protocol):
    """The transport side of a call. Sends never raise for a caller who hung up; they are dropped."""

    output_rate: int
    confirms_playback: bool  # the transport calls Playout.confirm for each segment the far end played (carrier marks)

    async def send_event(self, event: dict) -> None:
        """A protocol event (transcript, agent_text, metrics, error, ...)."""

    async def send_audio(self, pcm16: bytes) -> None:
        """Agent audio: mono PCM s16le at `output_rate`, about one frame at a time."""

    async def clear_audio(self) -> None:
        """Barge-in: the client must drop agent audio it has buffered."""

    async def segment_sent(self, segment: Segment) -> None:
        """A clause's audio was fully handed over (carriers turn this into a mark)."""

    async def transfer(self, target: str) -> None:
        """Hand the caller to `target` (phone number or SIP URI) once the agent's last words played.
        Raises CallControlError when the carrier refuses; the call loop then tells the caller."""

    async def hang_up(self) -> None:
        """End the call from the agent's side (end_call), once the goodbye played."""


class CallControlError(RuntimeError):
    """The transport could not transfer or hang up (carrier API error, missing credentials); says what to fix."""


@dataclass(frozen=True)
class AudioIn:
    samples: np.ndarray  # float32 at the call's input rate
    arrived: float  # time.monotonic() when the frame arrived


@dataclass(frozen=True)
class TextIn:
    text: str
    arrived: float


@dataclass(frozen=True)
class DtmfIn:
    digit: str
    arrived: float


@dataclass(frozen=True)
class HangUp:
    reason: str


@dataclass(frozen=True)
class Closing:
    """The server ends the call (a drain ran out of time): the agent says the profile's closing line, then hangs up."""

    reason: str


Inbound = AudioIn | TextIn | DtmfIn | HangUp | Closing
