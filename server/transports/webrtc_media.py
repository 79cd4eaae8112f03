"""Audio across a WebRTC peer connection: a paced outbound track (the agent's voice; a test caller's microphone), and
received frames as float samples."""

from __future__ import annotations

import asyncio
import time
from fractions import Fraction

import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection
from aiortc.jitterbuffer import JitterFrame
from aiortc.mediastreams import MediaStreamError
from aiortc.rtp import RtpPacket
from aiortc.utils import uint16_add
from av import AudioFrame

RATE = 48000  # Opus's clock: aiortc decodes to it and the agent track is sent at it
FRAME_MS = 20
JITTER_ATTRIBUTE = "_RTCRtpReceiver__jitter_buffer"  # aiortc 1.16's receiver; checked by tests/test_webrtc.py


class NextPacketBuffer:
    """An audio jitter buffer that hands each RTP packet on as its frame as soon as it is next in sequence.

    An Opus packet is one whole 20 ms frame, yet aiortc's audio buffer waits for the following packet to call a frame
    complete (20 ms) and keeps four frames before it hands one on (80 ms). Here a missing packet is given up once
    `skip_after` later ones wait, a packet behind one already handed on is dropped, and at most `max_lag` frames wait
    behind the one handed on (older ones are dropped), so a lost or reordered packet adds at most one frame of delay."""

    def __init__(self, skip_after: int = 2, max_lag: int = 1, capacity: int = 16) -> None:
        self.skip_after, self.max_lag, self.capacity = skip_after, max_lag, capacity
        self.next: int | None = None
        self.waiting: dict[int, RtpPacket] = {}

    def _ahead(self, seq: int) -> int:
        return uint16_add(seq, -self.next)

    def _skip_to_oldest(self) -> None:
        self.next = min(self.waiting, key=self._ahead)

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        """aiortc's JitterBuffer.add: (no picture-loss flag, the next frame or None)."""
        if self.next is None:
            self.next = packet.sequence_number
        ahead = self._ahead(packet.sequence_number)
        if ahead >= 0x8000:
            return False, None
        if ahead >= self.capacity:  # a jump (a restarted sender, a long outage): start again from here
            self.waiting.clear()
            self.next = packet.sequence_number
        self.waiting[packet.sequence_number] = packet
        if self.next not in self.waiting:
            if len(self.waiting) < self.skip_after:
                return False, None
            self._skip_to_oldest()
        ready = self.waiting.pop(self.next)
        self.next = uint16_add(self.next, 1)
        while len(self.waiting) > self.max_lag:
            self._skip_to_oldest()
            del self.waiting[self.next]
            self.next = uint16_add(self.next, 1)
        return False, JitterFrame(data=ready._data, timestamp=ready.timestamp)


def hand_on_at_once(pc: RTCPeerConnection) -> None:
    """Give the peer connection's receivers the NextPacketBuffer: caller audio goes to VAD, and a bench times arrival,
    without the playout delay of aiortc's own buffer."""
    for transceiver in pc.getTransceivers():
        if transceiver.kind == "audio" and hasattr(transceiver.receiver, JITTER_ATTRIBUTE):
            setattr(transceiver.receiver, JITTER_ATTRIBUTE, NextPacketBuffer())


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
