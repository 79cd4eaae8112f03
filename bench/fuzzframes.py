"""Fuzz sessions for every WebSocket endpoint (tests/test_fuzz.py and bench/fuzz.py): a valid or mangled opening, then
valid, mutated, out-of-order and arbitrary frames; and the client that sends one session and says how it ended."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import websockets

from bench.carrierclient import TelnyxClient, TwilioClient, VonageClient
from pipeline.audio import float_to_pcm16

Frame = str | bytes
PATHS = {"browser": "/ws/call", "twilio": "/twilio/media", "telnyx": "/telnyx/media", "vonage": "/vonage/media"}
ENDPOINTS = tuple(PATHS)
# How a fuzzed socket may end: normally, by us, or with one of the server's documented close codes.
EXPECTED_CLOSES = {1000, 1008, 1009, 1013, 4400, 4401, 4403, 4404, 4429, 4503}
WS_MAX_BYTES = 1 << 20  # the server's WebSocket message limit (uvicorn's ws_max_size in `talkline serve`)
WRONG_VALUES = (None, 0, -1, 1.5, 1e308, True, "", "x", [], {}, [1, "a"], {"a": {"b": None}}, "ñ\u0000\u202e")


def _noise(rng: random.Random, n: int) -> np.ndarray:
    """n samples of silence, a tone or noise, from one draw of rng (big content never costs many draws)."""
    kind, local = rng.randrange(3), random.Random(rng.getrandbits(32))
    if kind == 0:
        return np.zeros(n, np.float32)
    if kind == 1:
        return (0.3 * np.sin(np.arange(n) * local.uniform(0.01, 0.5))).astype(np.float32)
    return np.frombuffer(local.randbytes(2 * n), "<i2").astype(np.float32) / 32768


class Talker:
    """Valid frames of one endpoint's wire format, from the protocol clients in bench/ (no copy of the formats here)."""

    def __init__(self, endpoint: str, profile: str) -> None:
        self.endpoint, self.profile = endpoint, profile
        carriers = {"twilio": lambda: TwilioClient("", profile), "telnyx": lambda: TelnyxClient(""), "vonage": lambda: VonageClient("")}
        self.client = carriers[endpoint]() if endpoint in carriers else None  # None: the browser protocol

    def opening(self) -> list[Frame]:
        if self.client is None:
            return [json.dumps({"type": "start", "profile": self.profile, "sample_rate": 16000})]
        return self.client.opening()

    def media(self, rng: random.Random) -> list[Frame]:
        samples = _noise(rng, rng.choice((1, 160, 320, 800)))
        return [float_to_pcm16(samples)] if self.client is None else self.client.media(samples)

    def control(self, rng: random.Random) -> Frame:
        """A valid control frame: text or a keypress (browser); a keypress, a mark echo or a stop (carriers)."""
        digit = rng.choice("0123456789*#")
        if self.client is None:
            return json.dumps(rng.choice(({"type": "text", "text": "Hello?"}, {"type": "dtmf", "digit": digit}, {"type": "stop"})))
        options: list[Callable[[], Frame]] = [lambda: self.client.dtmf(digit)]
        if self.endpoint != "vonage":
            options += [lambda: self.client.mark_echo(f"t{rng.randrange(5)}-{rng.randrange(9)}"), self.client.stop]
        return rng.choice(options)()

    def any_valid(self, rng: random.Random) -> Frame:
        pick = rng.randrange(4)
        return self.opening()[-1] if pick == 0 else self.control(rng) if pick == 1 else self.media(rng)[0]


# ---- mutations: each takes a valid frame and returns what the fuzzer sends instead ---------------------------
def _json_paths(value, prefix=()) -> list[tuple]:
    if isinstance(value, dict):
        return [prefix] * bool(prefix) + [p for k, v in value.items() for p in _json_paths(v, (*prefix, k))]
    if isinstance(value, list):
        return [prefix] * bool(prefix) + [p for i, v in enumerate(value) for p in _json_paths(v, (*prefix, i))]
    return [prefix]


def _edit_json(frame: Frame, rng: random.Random, edit: Callable[[object, object, random.Random], None]) -> Frame:
    """Apply `edit(parent, key, rng)` at a random place of a JSON frame (other frames pass through)."""
    try:
        doc = json.loads(frame)
    except (ValueError, TypeError):
        return frame
    paths = [p for p in _json_paths(doc) if p]
    if not paths:
        return frame
    path = rng.choice(paths)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    edit(parent, path[-1], rng)
    return json.dumps(doc)


def _wrong_type(parent, key, rng: random.Random) -> None:
    parent[key] = rng.choice(WRONG_VALUES)


def _drop_key(parent, key, rng: random.Random) -> None:
    del parent[key]


def _huge_value(parent, key, rng: random.Random) -> None:
    """A huge string (base64 of random bytes, up to 1.2 MB: past the server's 1 MiB frame limit) where a value was."""
    size = rng.choice((3000, 60000, 230000, 900000))
    parent[key] = base64.b64encode(random.Random(rng.getrandbits(32)).randbytes(size)).decode()


def _huge_int(frame: Frame, rng: random.Random) -> Frame:
    """A number too long to be an integer (Python refuses to parse over 4300 digits) where a value was."""
    marker = "\u2063number\u2063"
    edited = _edit_json(frame, rng, lambda parent, key, rng: parent.__setitem__(key, marker))
    return edited.replace(json.dumps(marker), "9" * rng.choice((30, 5000))) if isinstance(edited, str) else edited


def _truncate(frame: Frame, rng: random.Random) -> Frame:
    return frame[: rng.randrange(len(frame) + 1)]


def _flip(frame: Frame, rng: random.Random) -> Frame:
    data = bytearray(frame.encode() if isinstance(frame, str) else frame)
    for _ in range(rng.randint(1, 4)):
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return data.decode("utf-8", "replace") if isinstance(frame, str) else bytes(data)


def _swap_kind(frame: Frame, rng: random.Random) -> Frame:
    """Binary where text is expected, and text where binary is."""
    return frame.encode() if isinstance(frame, str) else frame.decode("latin-1")


def _random_bytes(frame: Frame, rng: random.Random) -> Frame:
    size = rng.choice((0, 1, 3, 160, 641, 4096, 70000))
    return random.Random(rng.getrandbits(32)).randbytes(size)


def _random_text(frame: Frame, rng: random.Random) -> Frame:
    alphabet = '{}[]":,0123456789aeEtnrufls \\\u00e9\u4e2d\U0001f600\u0000'
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(40)))


def _deep_nesting(frame: Frame, rng: random.Random) -> Frame:
    depth = rng.choice((100, 5000, 100000))
    return "[" * depth + "]" * depth * rng.randrange(2)


def _rename(frame: Frame, rng: random.Random) -> Frame:
    """Another message's type or event name (or an unknown one) on this message's fields."""
    names = ("start", "stop", "media", "mark", "dtmf", "connected", "text", "websocket:connected", "websocket:dtmf", "error", "x")
    try:
        doc = json.loads(frame)
    except (ValueError, TypeError):
        return frame
    if not isinstance(doc, dict):
        return frame
    for tag in ("type", "event"):
        if tag in doc:
            doc[tag] = rng.choice(names)
    return json.dumps(doc)


MUTATIONS: dict[str, Callable[[Frame, random.Random], Frame]] = {
    "wrong_type": lambda f, rng: _edit_json(f, rng, _wrong_type),
    "drop_key": lambda f, rng: _edit_json(f, rng, _drop_key),
    "huge_value": lambda f, rng: _edit_json(f, rng, _huge_value),
    "huge_int": _huge_int,
    "rename": _rename,
    "truncate": _truncate,
    "flip": _flip,
    "swap_kind": _swap_kind,
    "random_bytes": _random_bytes,
    "random_text": _random_text,
    "deep_nesting": _deep_nesting,
}


@dataclass
class Session:
    endpoint: str
    frames: list[Frame]
    kinds: list[str]  # what each frame is: valid, out_of_order or a mutation's name


def fuzz_session(endpoint: str, rng: random.Random, profile: str, max_frames: int = 12, arbitrary: list[Frame] = ()) -> Session:
    """One connection's frames: an opening (valid, mangled or none), up to max_frames more, `arbitrary` ones anywhere."""
    talk = Talker(endpoint, profile)
    frames, kinds = [], []

    def add(frame: Frame, kind: str) -> None:
        frames.append(frame)
        kinds.append(kind)

    opening = talk.opening()
    roll = rng.random()
    if roll < 0.6:
        for frame in opening:
            add(frame, "valid")
    elif roll < 0.9:
        mangled = rng.randrange(len(opening))
        for i, frame in enumerate(opening):
            name = rng.choice(list(MUTATIONS)) if i == mangled else "valid"
            add(MUTATIONS[name](frame, rng) if i == mangled else frame, name)
    for _ in range(rng.randrange(max_frames + 1)):
        roll = rng.random()
        if roll < 0.35:
            add(talk.any_valid(rng), "valid" if len(frames) else "out_of_order")
        elif roll < 0.45:
            add(rng.choice(opening + [talk.control(rng)]), "out_of_order")
        else:
            name = rng.choice(list(MUTATIONS))
            add(MUTATIONS[name](talk.any_valid(rng), rng), name)
    for frame in arbitrary:
        at = rng.randint(0, len(frames))
        frames.insert(at, frame)
        kinds.insert(at, "arbitrary")
    return Session(endpoint, frames, kinds)


# ---- sending a session ------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    sent: int = 0
    close_code: int | None = None  # None: still open when we left (we then close with 1000)
    errors: list[str] = field(default_factory=list)  # `error` event codes (browser)
    oversized: bool = False  # we sent a message over WS_MAX_BYTES

    @property
    def expected(self) -> bool:
        """A documented close; or 1006 after an oversized message (the server's 1009 can lose the race with its reset)."""
        return self.close_code is None or self.close_code in EXPECTED_CLOSES or (self.oversized and self.close_code == 1006)


async def run_session(base_url: str, session: Session, query: str = "", linger_s: float = 0.1, pace_s: float = 0.0) -> Outcome:
    """Send one session's frames (stopping if the server closes), read for `linger_s`, then hang up."""
    outcome = Outcome()
    async with websockets.connect(base_url + PATHS[session.endpoint] + query, max_size=None, open_timeout=30) as ws:

        async def read() -> None:
            with contextlib.suppress(websockets.ConnectionClosed):
                async for msg in ws:
                    event = json.loads(msg) if isinstance(msg, str) else None
                    if isinstance(event, dict) and event.get("type") == "error":
                        outcome.errors.append(event["code"])

        reader = asyncio.create_task(read())
        try:
            for frame in session.frames:
                outcome.oversized |= len(frame) > WS_MAX_BYTES
                await ws.send(frame)
                outcome.sent += 1
                if pace_s:
                    await asyncio.sleep(pace_s)
        except websockets.ConnectionClosed:
            pass
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), linger_s)
        if reader.done():
            outcome.close_code = ws.close_code
        reader.cancel()
    return outcome
