"""A protocol-level /ws/call client (tests and benchmarks): streams audio at real-time pace and records what comes back."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

import numpy as np
import websockets

from pipeline.audio import float_to_pcm16


@dataclass
class Received:
    events: list[tuple[float, dict]] = field(default_factory=list)
    audio: list[tuple[float, np.ndarray]] = field(default_factory=list)  # int16 frames

    def of(self, kind: str) -> list[dict]:
        return [e for _, e in self.events if e["type"] == kind]


class RealtimeCaller:
    """A caller's microphone: `media` frames sent at real-time pace; needs ws, rate, got (with events), closed."""

    rate: int

    def media(self, samples: np.ndarray) -> list[str | bytes]:
        """One 20 ms frame of caller audio in the wire format (subclasses)."""
        raise NotImplementedError

    async def stream(self, samples: np.ndarray, frame_ms: int = 20) -> list[float]:
        """Send float samples at `rate` as frames at real-time pace; returns each frame's send time."""
        step = self.rate * frame_ms // 1000
        t0, sent = time.monotonic(), []
        for i, start in enumerate(range(0, len(samples), step)):
            try:
                for frame in self.media(samples[start : start + step]):
                    await self.ws.send(frame)
            except websockets.ConnectionClosed:  # the server ended the call (a transfer, a hang-up)
                break
            sent.append(time.monotonic())
            if (delay := t0 + (i + 1) * frame_ms / 1000 - time.monotonic()) > 0:
                await asyncio.sleep(delay)
        return sent

    def agent_finals(self) -> list[str]:
        """The agent's replies as heard, one per finished turn."""
        return [e["text"] for e in self.got.of("agent_text") if e["final"]]

    async def silence(self, seconds: float) -> None:
        await self.stream(np.zeros(int(self.rate * seconds), np.float32))

    async def wait_for(self, predicate, timeout: float = 60.0, feed_silence: bool = True):
        """Wait (sending silence, as a live line does) until predicate(self.got) is truthy."""
        deadline = time.monotonic() + timeout
        while not (result := predicate(self.got)):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; last events: {[e for _, e in self.got.events][-12:]}")
            if feed_silence and not self.closed.is_set():
                await self.silence(0.1)
            else:
                await asyncio.sleep(0.05)
        return result


class CallClient(RealtimeCaller):
    def __init__(self, url: str, profile: str = "skyways", rate: int = 16000, start: dict | None = None, token: str | None = None) -> None:
        self.url, self.rate = url, rate
        self.query = f"?{urlencode({'token': token})}" if token else ""  # an API key (TALKLINE_API_KEYS)
        self.start = start if start is not None else {"type": "start", "profile": profile, "sample_rate": rate}
        self.got = Received()
        self.ws = None
        self._reader: asyncio.Task | None = None
        self.closed = asyncio.Event()
        self.close_code: int | None = None

    async def __aenter__(self) -> CallClient:
        self.ws = await websockets.connect(self.url + "/ws/call" + self.query, max_size=None)
        if self.start:
            await self.ws.send(json.dumps(self.start))
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc) -> None:
        await self.ws.close()
        self._reader.cancel()

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                now = time.monotonic()
                if isinstance(msg, bytes):
                    self.got.audio.append((now, np.frombuffer(msg, "<i2")))
                else:
                    self.got.events.append((now, json.loads(msg)))
        except websockets.ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code
            self.closed.set()

    async def send_json(self, obj: dict) -> None:
        await self.ws.send(json.dumps(obj))

    def media(self, samples: np.ndarray) -> list[bytes]:
        return [float_to_pcm16(samples)]
