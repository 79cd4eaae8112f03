"""Voice-to-voice latency measured at the client: caller WAVs in at real-time pace, the agent's first audible sample timed
on arrival, over the WebSocket (/ws/call) or WebRTC (an aiortc peer), side by side in one run when both are asked for."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import wave
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import numpy as np

from bench.rtcclient import RtcClient
from bench.wsclient import CallClient
from pipeline.audio import resample

RATE = 16000
SILENT_PEAK = 300  # int16 peak below which an agent frame counts as silence
UNDERRUN_S = 0.1
TRANSPORTS = ("websocket", "webrtc")


def read_wav(path: Path, rate: int = RATE) -> np.ndarray:
    """A mono PCM16 WAV as float32 at `rate`."""
    with wave.open(str(path), "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM WAV files are supported")
        audio = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
        if w.getnchannels() > 1:
            audio = audio.reshape(-1, w.getnchannels()).mean(axis=1)
        return resample(audio, w.getframerate(), rate)


def end_of_speech(samples: np.ndarray, rate: int = RATE, frame_ms: int = 10, floor_db: float = -40.0) -> int:
    """Index just past the last frame whose energy is within 35 dB of the loudest frame (and above floor_db)."""
    n = rate * frame_ms // 1000
    frames = samples[: len(samples) // n * n].reshape(-1, n)
    if not len(frames):
        return 0
    db = 20 * np.log10(np.sqrt(np.mean(frames**2, axis=1)) + 1e-9)
    voiced = np.nonzero(db > max(db.max() - 35.0, floor_db))[0]
    return int((voiced[-1] + 1) * n) if len(voiced) else 0


def underruns(frames: list[tuple[float, int]], rate: int, gap_s: float = UNDERRUN_S) -> list[float]:
    """Gaps (s) longer than gap_s in playback of (arrival time, samples) frames played at real-time pace."""
    if not frames:
        return []
    gaps, clock = [], frames[0][0]
    for arrived, n in frames:
        if arrived - clock > gap_s:
            gaps.append(round(arrived - clock, 3))
        clock = max(clock, arrived) + n / rate
    return gaps


def first_audible(frames: list[tuple[float, np.ndarray]], rate: int, peak: int = SILENT_PEAK) -> float | None:
    """The arrival time of the first sample above `peak` in (arrival time, int16 frame): its frame's arrival plus its
    place in the frame."""
    for arrived, frame in frames:
        if (loud := np.flatnonzero(np.abs(frame.astype(np.int32)) > peak)).size:
            return arrived + loud[0] / rate
    return None


@dataclass
class TurnResult:
    call: int
    turn: int
    audio: str
    voice_to_voice_ms: float | None
    underruns: list[float] = field(default_factory=list)
    server: dict = field(default_factory=dict)
    transport: str = "websocket"


def percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


async def run_turn(client: CallClient | RtcClient, path: Path, call_no: int, turn_no: int) -> TurnResult:
    """Stream one WAV at real-time pace, then wait for the agent's answer to it."""
    samples = read_wav(path)
    finals_before = len(client.agent_finals())
    metrics_before = len(client.got.of("metrics"))
    start = time.monotonic()
    sent = await client.stream(samples)
    if not sent:  # the call had already ended
        return TurnResult(call_no, turn_no, path.name, None)
    speech_end = sent[min(end_of_speech(samples) // (RATE // 50), len(sent) - 1)]
    await client.wait_for(lambda got: len(client.agent_finals()) > finals_before or client.closed.is_set(), timeout=180)
    turn_audio = [(t, f) for t, f in client.got.audio if t > start]
    first = next((k for k, (_, f) in enumerate(turn_audio) if np.abs(f).max(initial=0) > SILENT_PEAK), None)
    frames = [(t, len(f)) for t, f in turn_audio[first:]] if first is not None else []
    metrics = client.got.of("metrics")[metrics_before:]
    heard = first_audible(turn_audio[first:], RATE) if first is not None else None
    v2v = round((heard - speech_end) * 1000, 1) if heard is not None else None
    return TurnResult(call_no, turn_no, path.name, v2v, underruns(frames, RATE), metrics[0] if metrics else {})


def open_call(url: str, profile: str, transport: str) -> CallClient | RtcClient:
    """A caller over `transport` to the server at ws://HOST:PORT."""
    if transport == "webrtc":
        return RtcClient(url.replace("ws://", "http://", 1).replace("wss://", "https://", 1), profile)
    return CallClient(url, profile)


async def run_call(
    url: str, profile: str, wavs: list[Path], call_no: int, transport: str = "websocket", think_s: Callable[[], float] | None = None
) -> list[TurnResult]:
    """Every WAV as one turn; when the agent ends the call (a transfer, a goodbye), the next turns go to a new call.
    After each answer the caller waits 0.3 s, or `think_s()` seconds where given, before the next turn."""
    results, pending = [], list(enumerate(wavs, start=1))
    while pending:
        async with open_call(url, profile, transport) as client:
            await client.wait_for(lambda got: client.agent_finals(), timeout=120)
            while pending and not client.got.of("end") and not client.closed.is_set():
                turn_no, path = pending.pop(0)
                results.append(await run_turn(client, path, call_no, turn_no))
                results[-1].transport = transport
                await asyncio.sleep(think_s() if think_s else 0.3)  # at least 0.3 s: an `end` right after the answer's last audio
    return results


def summarize(results: list[TurnResult]) -> dict:
    v2v = [r.voice_to_voice_ms for r in results if r.voice_to_voice_ms is not None]
    stages = {}
    for key in ("asr_ms", "llm_ttft_ms", "tts_ttfb_ms", "voice_to_voice_ms"):
        values = [r.server[key] for r in results if r.server.get(key) is not None]
        stages[key] = {"p50": percentile(values, 50), "p95": percentile(values, 95)}
    return {
        "turns": len(results),
        "voice_to_voice_ms": {"p50": percentile(v2v, 50), "p95": percentile(v2v, 95), "max": max(v2v, default=None)},
        "underruns": sum(len(r.underruns) for r in results),
        "server_stages_ms": stages,
    }


def print_table(results: list[TurnResult], summary: dict) -> None:
    print(f"{'call':>4} {'turn':>4} {'audio':<28} {'v2v ms':>8} {'asr':>7} {'llm ttft':>9} {'tts ttfb':>9} {'underruns':>9}")
    for r in results:
        s = r.server
        print(
            f"{r.call:>4} {r.turn:>4} {r.audio[:28]:<28} {r.voice_to_voice_ms or '-':>8} {s.get('asr_ms', '-'):>7} "
            f"{s.get('llm_ttft_ms', '-'):>9} {s.get('tts_ttfb_ms', '-'):>9} {len(r.underruns):>9}"
        )
    v = summary["voice_to_voice_ms"]
    print(
        f"\nvoice-to-voice over {summary['turns']} turns: p50 {v['p50']} ms, p95 {v['p95']} ms, max {v['max']} ms; "
        f"underruns {summary['underruns']}"
    )
    for stage, p in summary["server_stages_ms"].items():
        print(f"  server {stage:<18} p50 {p['p50']} ms  p95 {p['p95']} ms")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OwnServer:
    """`talkline serve` in a subprocess on a free loopback port."""

    def __init__(self, port: int = 0, db: str | None = None, env: dict[str, str] | None = None) -> None:
        self.port = port or free_port()
        self.db = db or f"sqlite:////tmp/talkline-bench-{os.getpid()}.db"
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def __enter__(self) -> OwnServer:
        cmd = [sys.executable, "-m", "server.cli", "serve", "--port", str(self.port), "--db", self.db, "--log-level", "warning"]
        self.proc = subprocess.Popen(cmd, env=self.env)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and self.proc.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200:
                    return self
            time.sleep(0.5)
        self.proc.kill()
        raise RuntimeError(f"`talkline serve` did not become healthy (exit code {self.proc.poll()})")

    def __exit__(self, *exc) -> None:
        self.proc.terminate()  # a drain: it exits as soon as no call is open
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def bench(url: str, profile: str, wavs: list[Path], calls: int, transports: tuple[str, ...] = ("websocket",)) -> list[TurnResult]:
    """`calls` simultaneous calls over each transport in turn, on the same server."""
    results = []
    for transport in transports:
        per_call = await asyncio.gather(*(run_call(url, profile, wavs, n, transport) for n in range(1, calls + 1)))
        results += [r for call in per_call for r in call]
    return results


def main(
    wavs: list[Path], url: str | None, profile: str, calls: int, out: Path | None, transports: tuple[str, ...] = ("websocket",)
) -> dict:
    if unknown := set(transports) - set(TRANSPORTS):
        raise ValueError(f"unknown transports {sorted(unknown)}; choose from {', '.join(TRANSPORTS)}")
    if url is None:
        with OwnServer() as own:
            results = asyncio.run(bench(own.url, profile, wavs, calls, transports))
    else:
        results = asyncio.run(bench(url.removesuffix("/ws/call"), profile, wavs, calls, transports))
    by_transport = {t: [r for r in results if r.transport == t] for t in transports}
    for transport, turns in by_transport.items():
        print(f"\n== {transport} ==")
        print_table(turns, summarize(turns))
    summary = summarize(by_transport[transports[0]])
    report = {
        "profile": profile,
        "calls": calls,
        "transports": list(transports),
        "summary": summary,
        "by_transport": {t: summarize(turns) for t, turns in by_transport.items()},
        "turns": [asdict(r) for r in results],
    }
    if out:
        out.write_text(json.dumps(report, indent=2))
    return report
