"""Protocol-level phone-carrier clients (tests and benchmarks): Twilio, Telnyx and Vonage media sockets as the carriers
behave: caller audio at real-time pace, agent audio "played" on a simulated phone, marks echoed once played."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlencode

import numpy as np
import websockets

from bench.wsclient import RealtimeCaller
from pipeline.audio import alaw_decode, alaw_encode, float_to_pcm16, mulaw_decode, mulaw_encode


@dataclass
class Phone:
    """What came back over the socket, and what the simulated phone did with it."""

    events: list[tuple[float, dict]] = field(default_factory=list)  # JSON text frames
    audio: list[tuple[float, np.ndarray]] = field(default_factory=list)  # agent frames as int16
    frame_bytes: list[int] = field(default_factory=list)  # size of each agent audio frame on the wire
    echoed: list[tuple[float, str]] = field(default_factory=list)  # marks echoed once their audio played
    returned: list[tuple[float, str]] = field(default_factory=list)  # marks returned unplayed by a clear
    clears: list[float] = field(default_factory=list)

    def samples_after(self, t: float) -> int:
        """Agent audio samples received after time t."""
        return sum(len(f) for at, f in self.audio if at > t)


class CarrierClient(RealtimeCaller):
    """Base: the socket, the real-time caller stream, the simulated phone's playback clock and mark echoes."""

    path = ""
    rate = 8000

    def __init__(self, base_url: str, url_profile: str | None = None) -> None:
        self.url = base_url + self.path + (f"?{urlencode({'profile': url_profile})}" if url_profile else "")
        self.got = Phone()
        self.ws = None
        self.closed = asyncio.Event()
        self.close_code: int | None = None
        self._clock = 0.0  # when the phone finishes playing what it received
        self._marks: deque[tuple[float, str]] = deque()  # (due, name)
        self._tasks: list[asyncio.Task] = []

    async def __aenter__(self) -> CarrierClient:
        self.ws = await websockets.connect(self.url, max_size=None)
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._echo_marks())]
        for frame in self.opening():
            await self.ws.send(frame)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.ws.close()
        for task in self._tasks:
            task.cancel()

    # ---- the carrier's wire format (subclasses) -------------------------------------------------
    def opening(self) -> list[str | bytes]:
        """The frames a carrier sends first (connected, start)."""
        return []

    def dtmf(self, digit: str) -> str:
        raise NotImplementedError

    def mark_echo(self, name: str) -> str:
        raise NotImplementedError

    def parse(self, msg: str | bytes) -> tuple[str, object]:
        """-> ("audio", int16 array) | ("mark", name) | ("clear", None) | ("other", None)."""
        raise NotImplementedError

    # ---- receiving ------------------------------------------------------------------------------
    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                now = time.monotonic()
                if isinstance(msg, str):
                    self.got.events.append((now, json.loads(msg)))
                kind, value = self.parse(msg)
                if kind == "audio":
                    self.got.audio.append((now, value))
                    self._clock = max(self._clock, now) + len(value) / self.rate
                elif kind == "mark":
                    self._marks.append((self._clock, value))
                elif kind == "clear":
                    self.got.clears.append(now)
                    self._clock = now
                    while self._marks:  # as Twilio does: every pending mark comes back at once
                        name = self._marks.popleft()[1]
                        self.got.returned.append((now, name))
                        await self.ws.send(self.mark_echo(name))
        except websockets.ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code
            self.closed.set()

    async def _echo_marks(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            while True:
                while self._marks and self._marks[0][0] <= time.monotonic():
                    name = self._marks.popleft()[1]
                    self.got.echoed.append((time.monotonic(), name))
                    await self.ws.send(self.mark_echo(name))
                await asyncio.sleep(0.005)

    # ---- sending --------------------------------------------------------------------------------
    async def send(self, frame: str | bytes | dict) -> None:
        await self.ws.send(json.dumps(frame) if isinstance(frame, dict) else frame)

    async def wait_played(self, timeout: float = 60.0, quiet_s: float = 0.3) -> None:
        """Wait until the phone played everything it received, echoed every mark, and then heard nothing for quiet_s."""
        await self.wait_for(lambda got: got.audio and not self._marks and time.monotonic() > self._clock + quiet_s, timeout)


class TwilioClient(CarrierClient):
    """Twilio Media Streams: camelCase JSON, base64 mu-law 8 kHz, one streamSid."""

    path = "/twilio/media"
    encode, decode = staticmethod(mulaw_encode), staticmethod(mulaw_decode)

    def __init__(self, base_url: str, profile: str | None = "skyways", url_profile: str | None = None) -> None:
        super().__init__(base_url, url_profile)
        self.stream_sid = "MZ" + uuid.uuid4().hex
        self.call_sid = "CA" + uuid.uuid4().hex
        self.profile = profile
        self.seq = 0
        self.chunk = 0

    def _next(self) -> str:
        self.seq += 1
        return str(self.seq)

    def opening(self) -> list[str | bytes]:
        start = {
            "event": "start",
            "sequenceNumber": self._next(),
            "start": {
                "accountSid": "AC" + "0" * 32,
                "streamSid": self.stream_sid,
                "callSid": self.call_sid,
                "tracks": ["inbound"],
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
                "customParameters": {"profile": self.profile} if self.profile else {},
            },
            "streamSid": self.stream_sid,
        }
        return [json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}), json.dumps(start)]

    def media(self, samples: np.ndarray) -> list[str | bytes]:
        self.chunk += 1
        payload = base64.b64encode(self.encode(samples)).decode()
        media = {"track": "inbound", "chunk": str(self.chunk), "timestamp": str(self.chunk * 20), "payload": payload}
        return [json.dumps({"event": "media", "sequenceNumber": self._next(), "media": media, "streamSid": self.stream_sid})]

    def dtmf(self, digit: str) -> str:
        dtmf = {"track": "inbound_track", "digit": digit}
        return json.dumps({"event": "dtmf", "streamSid": self.stream_sid, "sequenceNumber": self._next(), "dtmf": dtmf})

    def stop(self) -> str:
        stop = {"accountSid": "AC" + "0" * 32, "callSid": self.call_sid}
        return json.dumps({"event": "stop", "sequenceNumber": self._next(), "stop": stop, "streamSid": self.stream_sid})

    def mark_echo(self, name: str) -> str:
        return json.dumps({"event": "mark", "sequenceNumber": self._next(), "streamSid": self.stream_sid, "mark": {"name": name}})

    def parse(self, msg: str | bytes) -> tuple[str, object]:
        if isinstance(msg, bytes):
            return "other", None
        event = json.loads(msg)
        if event.get("event") == "media":
            data = base64.b64decode(event["media"]["payload"])
            self.got.frame_bytes.append(len(data))
            return "audio", (self.decode(data) * 32768).astype(np.int16)
        if event.get("event") == "mark":
            return "mark", event["mark"]["name"]
        return ("clear", None) if event.get("event") == "clear" else ("other", None)


class TelnyxClient(TwilioClient):
    """Telnyx media streaming: snake_case JSON with sequence numbers; optionally sends media out of order."""

    path = "/telnyx/media"

    def __init__(self, base_url: str, profile: str | None = None, jumble: bool = False, encoding: str = "PCMU") -> None:
        super().__init__(base_url, profile=None, url_profile=profile)
        self.stream_id, self.jumble, self.encoding = str(uuid.uuid4()), jumble, encoding
        if encoding == "PCMA":
            self.encode, self.decode = alaw_encode, alaw_decode
        self._held: str | None = None  # jumble: a frame held back to go after the next one

    def opening(self) -> list[str | bytes]:
        start = {
            "event": "start",
            "sequence_number": self._next(),
            "start": {
                "user_id": str(uuid.uuid4()),
                "call_control_id": "v3:" + uuid.uuid4().hex,
                "media_format": {"encoding": self.encoding, "sample_rate": 8000, "channels": 1},
            },
            "stream_id": self.stream_id,
        }
        return [json.dumps({"event": "connected", "version": "1.0.0"}), json.dumps(start)]

    def _message(self, event: str, **body) -> str:
        return json.dumps({"event": event, "sequence_number": self._next(), "stream_id": self.stream_id, **body})

    def media(self, samples: np.ndarray) -> list[str | bytes]:
        """One frame; when jumbling, every other pair goes out swapped and every tenth frame twice."""
        self.chunk += 1
        media = {"track": "inbound", "chunk": str(self.chunk), "timestamp": str(self.chunk * 20)}
        frame = self._message("media", media={**media, "payload": base64.b64encode(self.encode(samples)).decode()})
        if not self.jumble:
            return [frame]
        if self._held is None and self.chunk % 4 == 1:
            self._held = frame
            return []
        out = [frame, self._held] if self._held else [frame]
        self._held = None
        return out + [frame] * (self.chunk % 10 == 0)

    def dtmf(self, digit: str) -> str:
        return self._message("dtmf", dtmf={"digit": digit})

    def stop(self) -> str:
        return self._message("stop", stop={"call_control_id": "v3:x"})

    def mark_echo(self, name: str) -> str:
        return self._message("mark", mark={"name": name})


class VonageClient(CarrierClient):
    """Vonage Voice WebSockets: a JSON 'websocket:connected' frame, then binary PCM s16le both ways."""

    path = "/vonage/media"

    def __init__(self, base_url: str, profile: str | None = None, rate: int = 16000) -> None:
        super().__init__(base_url, profile)
        self.rate = rate

    def opening(self) -> list[str | bytes]:
        return [json.dumps({"event": "websocket:connected", "content-type": f"audio/l16;rate={self.rate}"})]

    def media(self, samples: np.ndarray) -> list[str | bytes]:
        return [float_to_pcm16(samples)]

    def dtmf(self, digit: str) -> str:
        return json.dumps({"event": "websocket:dtmf", "digit": digit, "duration": 260})

    def parse(self, msg: str | bytes) -> tuple[str, object]:
        if isinstance(msg, bytes):
            self.got.frame_bytes.append(len(msg))
            return "audio", np.frombuffer(msg, "<i2")
        return ("clear", None) if json.loads(msg).get("action") == "clear" else ("other", None)
