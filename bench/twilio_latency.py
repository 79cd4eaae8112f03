"""Voice-to-voice latency over the Twilio path: one Media Streams call, a caller WAV per turn at real-time pace as
8 kHz mu-law, agent audio timed on arrival at the simulated phone. `python -m bench.twilio_latency [--url ws://HOST:PORT]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bench.carrierclient import TwilioClient
from bench.latency import SILENT_PEAK, OwnServer, end_of_speech, first_audible, percentile, read_wav, underruns

RATE = 8000
FRAME = RATE // 50  # 20 ms


@dataclass
class TwilioTurn:
    turn: int
    audio: str
    voice_to_voice_ms: float | None
    agent_audio_s: float
    underruns: list[float] = field(default_factory=list)


async def one_turn(phone: TwilioClient, turn: int, path: Path) -> TwilioTurn:
    """Stream one question, wait for the answer to play out, time its first audible sample from the end of speech."""
    samples = read_wav(path, RATE)
    start = time.monotonic()
    sent = await phone.stream(samples)
    speech_end = sent[min(end_of_speech(samples, RATE) // FRAME, len(sent) - 1)]
    voiced = lambda got: next((t for t, f in got.audio if t > start and np.abs(f).max(initial=0) > SILENT_PEAK), None)  # noqa: E731
    first = await phone.wait_for(voiced, timeout=180)
    await phone.wait_played(timeout=180, quiet_s=1.0)
    frames = [(t, len(f)) for t, f in phone.got.audio if t >= first]
    v2v = round((first_audible([(t, f) for t, f in phone.got.audio if t >= first], RATE) - speech_end) * 1000, 1)
    return TwilioTurn(turn, path.name, v2v, sum(n for _, n in frames) / RATE, underruns(frames, RATE))


async def run_call(url: str, profile: str, wavs: list[Path]) -> list[TwilioTurn]:
    async with TwilioClient(url, profile) as phone:
        await phone.wait_played(timeout=120)
        return [await one_turn(phone, i, path) for i, path in enumerate(wavs, start=1)]


def summarize(turns: list[TwilioTurn]) -> dict:
    v2v = [t.voice_to_voice_ms for t in turns if t.voice_to_voice_ms is not None]
    return {
        "turns": len(turns),
        "voice_to_voice_ms": {"p50": percentile(v2v, 50), "p95": percentile(v2v, 95), "max": max(v2v, default=None)},
        "underruns": sum(len(t.underruns) for t in turns),
    }


def print_table(turns: list[TwilioTurn], summary: dict) -> None:
    print(f"{'turn':>4} {'audio':<28} {'v2v ms':>8} {'answer s':>9} {'underruns':>9}")
    for t in turns:
        print(f"{t.turn:>4} {t.audio[:28]:<28} {t.voice_to_voice_ms or '-':>8} {t.agent_audio_s:>9.1f} {len(t.underruns):>9}")
    v = summary["voice_to_voice_ms"]
    print(f"\nTwilio voice-to-voice over {summary['turns']} turns: p50 {v['p50']} ms, p95 {v['p95']} ms, max {v['max']} ms;")
    print(f"underruns (playback gaps > 100 ms): {summary['underruns']}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audio", type=Path, nargs="+", default=sorted(Path("bench/audio").glob("*.wav"))[:10])
    parser.add_argument("--url", help="ws://HOST:PORT of a running server (default: start one)")
    parser.add_argument("--profile", default="skyways")
    parser.add_argument("--out", type=Path, default=Path("twilio_latency.json"))
    args = parser.parse_args(argv)
    if args.url is None:
        with OwnServer() as own:
            turns = asyncio.run(run_call(own.url, args.profile, args.audio))
    else:
        turns = asyncio.run(run_call(args.url, args.profile, args.audio))
    summary = summarize(turns)
    print_table(turns, summary)
    report = {"transport": "twilio", "profile": args.profile, "summary": summary, "turns": [asdict(t) for t in turns]}
    args.out.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
