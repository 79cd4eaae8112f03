"""Audio across a WebRTC peer connection: a paced outbound track (the agent's voice; a test caller's microphone), and
received frames as float samples."""

from __future__ import annotations

import asyncio
import time
from fractions import Fraction

import numpy as np
from aiortc import MediaStreamTrack, RTCRtpReceiver
from aiortc.jitterbuffer import JitterBuffer
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame

RATE = 48000  # Opus's clock: aiortc decodes to it and the agent track is sent at it
FRAME_MS = 20
JITTER_ATTRIBUTE = "_RTCRtpReceiver__jitter_buffer"  # aiortc 1.16's receiver; checked by tests/test_webrtc.py


def hand_on_at_once(receiver: RTCRtpReceiver) -> None:
    """Caller audio goes to VAD, not to a speaker: hand each frame on as soon as it is whole. aiortc's audio receiver
    holds four frames (80 ms) for smooth playout, which here would only delay the end of every turn."""
    if hasattr(receiver, JITTER_ATTRIBUTE):
        setattr(receiver, JITTER_ATTRIBUTE, JitterBuffer(capacity=16, prefetch=1))


class PacedTrack(MediaStreamTrack):
    """Queued PCM sent as 20 ms frames at real-time pace, silence while nothing is queued; `flush` empties it at once.

    For the agent's voice the call's playout keeps the queue a short lead ahead of the clock, as it keeps a page's player
    buffer, and a barge-in flushes it."""

    kind = "audio"

    def __init__(self, rate: int = RATE) -> None:
        super().__init__()
        self.rate = rate
        self.samples = rate * FRAME_MS // 1000
        self.queued = bytearray()  # PCM s16le mono
        self._t0: float | None = None
        self._pts = 0

    def push(self, pcm16: bytes) -> None:
        self.queued += pcm16

    def flush(self) -> None:
        self.queued.clear()

    def queued_s(self) -> float:
        return len(self.queued) / 2 / self.rate

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._t0 is None:
            self._t0 = time.monotonic()
        else:
            self._pts += self.samples
            if (wait := self._t0 + self._pts / self.rate - time.monotonic()) > 0:
                await asyncio.sleep(wait)
        size = 2 * self.samples
        chunk = bytes(self.queued[:size])
        del self.queued[:size]
        frame = AudioFrame(format="s16", layout="mono", samples=self.samples)
        frame.planes[0].update(chunk.ljust(size, b"\0"))
        frame.sample_rate, frame.pts, frame.time_base = self.rate, self._pts, Fraction(1, self.rate)
        return frame


def frame_samples(frame: AudioFrame) -> np.ndarray:
    """A decoded audio frame (packed or planar, integer or float, any channel count) as mono float32 at its rate."""
    data = frame.to_ndarray()
    channels = len(frame.layout.channels)
    mono = data.mean(axis=0) if frame.format.is_planar else data.reshape(-1, channels).mean(axis=1)
    scale = float(np.iinfo(data.dtype).max + 1) if np.issubdtype(data.dtype, np.integer) else 1.0
    return (mono / scale).astype(np.float32)
