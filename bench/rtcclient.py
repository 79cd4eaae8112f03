"""A WebRTC caller (tests and benchmarks): an aiortc peer connection to POST /webrtc/offer with a paced microphone track
and the `talkline` data channel; records events and the agent's audio as CallClient does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import httpx
import numpy as np
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from bench.wsclient import RealtimeCaller, Received
from pipeline.audio import StreamResampler, float_to_pcm16
from server.transports.webrtc_media import RATE, PacedTrack, frame_samples, hand_on_at_once


class OfferRefused(Exception):
    """The server answered the offer with an error status."""

    def __init__(self, status: int, body: dict) -> None:
        super().__init__(f"{status}: {body}")
        self.status, self.body = status, body


class RtcClient(RealtimeCaller):
    """One call over WebRTC. Caller audio is given at `rate` (16 kHz, like CallClient) and sent as Opus at 48 kHz; the
    agent's audio is recorded at `rate` as int16 frames."""

    def __init__(self, url: str, profile: str = "skyways", rate: int = 16000, token: str | None = None) -> None:
        self.url, self.profile, self.rate, self.token = url.rstrip("/"), profile, rate, token
        self.got = Received()
        self.closed = asyncio.Event()
        self.pc: RTCPeerConnection | None = None
        self.mic = PacedTrack(RATE)
        self.up, self.down = StreamResampler(rate, RATE), StreamResampler(RATE, rate)
        self.channel = None
        self._reader: asyncio.Task | None = None

    async def __aenter__(self) -> RtcClient:
        self.pc = pc = RTCPeerConnection()
        pc.addTrack(self.mic)
        hand_on_at_once(pc)  # agent audio is timed on arrival, as CallClient times it
        self.channel = pc.createDataChannel("talkline")
        self.channel.on("message", self._on_message)
        pc.on("track", self._on_track)
        pc.on("connectionstatechange", self._on_state)
        await pc.setLocalDescription(await pc.createOffer())
        body = {"type": "offer", "sdp": pc.localDescription.sdp, "profile": self.profile}
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(self.url + "/webrtc/offer", json=body, headers=headers)
        if response.status_code != 200:
            await pc.close()
            raise OfferRefused(response.status_code, response.json())
        await pc.setRemoteDescription(RTCSessionDescription(**response.json()))
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        await self.pc.close()
        self.closed.set()

    def _on_message(self, message: str | bytes) -> None:
        self.got.events.append((time.monotonic(), json.loads(message)))

    def _on_state(self) -> None:
        if self.pc.connectionState in ("failed", "closed"):
            self.closed.set()

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio" and self._reader is None:
            self._reader = asyncio.create_task(self._read(track))

    async def _read(self, track: MediaStreamTrack) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await track.recv()
                samples = self.down(frame_samples(frame))  # aiortc decodes Opus at 48 kHz
                self.got.audio.append((time.monotonic(), np.frombuffer(float_to_pcm16(samples), "<i2")))

    async def stream(self, samples: np.ndarray, frame_ms: int = 20) -> list[float]:
        """Queue the samples on the microphone track, which sends them at real-time pace behind what it already holds;
        returns when each frame goes out, after the last one has."""
        if self.closed.is_set():
            return []
        start = time.monotonic() + self.mic.queued_s()
        self.mic.push(float_to_pcm16(self.up(samples)))
        step = self.rate * frame_ms // 1000
        sent = [start + (i + 1) * frame_ms / 1000 for i in range(-(-len(samples) // step))]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.closed.wait(), max(sent[-1] - time.monotonic(), 0) if sent else 0)
        return [t for t in sent if not self.closed.is_set() or t <= time.monotonic()]

    async def send_json(self, obj: dict) -> None:
        self.channel.send(json.dumps(obj))

    async def send_raw(self, message: str | bytes) -> None:
        self.channel.send(message)
