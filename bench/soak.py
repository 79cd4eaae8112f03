"""Soak: many calls against one server (loopback only), watching memory, file descriptors, tasks and latency drift."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import psutil

from bench.latency import OwnServer, read_wav
from bench.wsclient import CallClient

ROOT = Path(__file__).resolve().parent


@dataclass
class Sample:
    t: float
    rss_mb: float
    fds: int
    tasks: int
    active_calls: int


@dataclass
class Report:
    calls: int = 0
    failed: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)


async def one_call(url: str, profile: str, audio, report: Report) -> None:
    """Greeting, one spoken turn, hang up; records the turn's server-side voice-to-voice."""
    try:
        async with CallClient(url, profile) as client:
            await client.wait_for(lambda got: client.agent_finals(), timeout=120)
            await client.stream(audio)
            await client.wait_for(lambda got: len(client.agent_finals()) >= 2 and got.of("metrics"), timeout=180)
            await client.send_json({"type": "stop"})
            await client.wait_for(lambda got: got.of("end"), timeout=30, feed_silence=False)
            v2v = client.got.of("metrics")[0].get("voice_to_voice_ms")
            if v2v is not None:
                report.latencies_ms.append(v2v)
        report.calls += 1
    except Exception as e:  # noqa: BLE001 - a soak counts failures instead of stopping
        report.failed += 1
        print(f"call failed: {e!r}"[:300])


async def sample(pid: int, http_url: str, report: Report, t0: float) -> None:
    proc = psutil.Process(pid)
    async with httpx.AsyncClient(base_url=http_url, timeout=5) as http:
        health = (await http.get("/healthz")).json()
    report.samples.append(Sample(round(time.monotonic() - t0, 1), round(proc.memory_info().rss / 2**20, 1),
                                 proc.num_fds(), health["tasks"], health["active_calls"]))


async def soak(url: str, pid: int, profile: str, audio, calls: int, concurrency: int, minutes: float) -> Report:
    report, t0 = Report(), time.monotonic()
    http_url = url.replace("ws://", "http://")
    deadline = t0 + minutes * 60
    started = 0

    async def worker() -> None:
        nonlocal started
        while started < calls and time.monotonic() < deadline:
            started += 1
            await one_call(url, profile, audio, report)

    async def watch() -> None:
        while True:
            await sample(pid, http_url, report, t0)
            await asyncio.sleep(5)

    watcher = asyncio.create_task(watch())
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    watcher.cancel()
    await asyncio.sleep(2)  # let the server close the last calls
    await sample(pid, http_url, report, t0)
    return report


def summarize(report: Report) -> dict:
    s = report.samples
    warm = s[min(1, len(s) - 1)]  # after the first call loaded everything lazily
    lat = report.latencies_ms
    tenth = max(len(lat) // 10, 1)
    return {
        "calls": report.calls,
        "failed": report.failed,
        "rss_mb_start": warm.rss_mb,
        "rss_mb_end": s[-1].rss_mb,
        "rss_growth_pct": round((s[-1].rss_mb - warm.rss_mb) / warm.rss_mb * 100, 1),
        "rss_mb_max": max(x.rss_mb for x in s),
        "fds_start": warm.fds,
        "fds_end": s[-1].fds,
        "tasks_start": warm.tasks,
        "tasks_end": s[-1].tasks,
        "active_calls_end": s[-1].active_calls,
        "v2v_ms_first_tenth": round(statistics.mean(lat[:tenth]), 1) if lat else None,
        "v2v_ms_last_tenth": round(statistics.mean(lat[-tenth:]), 1) if lat else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", help="ws://127.0.0.1:PORT of a running server (loopback only); default: start one")
    parser.add_argument("--pid", type=int, help="that server's process id (for RSS and fds)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--profile", default="skyways")
    parser.add_argument("--audio", type=Path, default=ROOT / "audio" / "q00_piper_joe_x1.0.wav")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    audio = read_wav(args.audio)
    if args.url:
        if not args.url.startswith(("ws://127.", "ws://localhost", "ws://[::1]")) or args.pid is None:
            parser.error("--url must be a loopback address and needs --pid")
        report = asyncio.run(soak(args.url, args.pid, args.profile, audio, args.calls, args.concurrency, args.minutes))
    else:
        with OwnServer() as own:
            report = asyncio.run(soak(own.url, own.pid, args.profile, audio, args.calls, args.concurrency, args.minutes))
    summary = summarize(report)
    print(f"{'t s':>7} {'rss MB':>8} {'fds':>5} {'tasks':>6} {'calls':>6}")
    for x in report.samples:
        print(f"{x.t:>7} {x.rss_mb:>8} {x.fds:>5} {x.tasks:>6} {x.active_calls:>6}")
    for key, value in summary.items():
        print(f"  {key:<20} {value}")
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, **asdict(report)}, indent=2))


if __name__ == "__main__":
    main()
