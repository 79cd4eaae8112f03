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

from bench.fuzz import loopback_url
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
    samples: list[Sample] = field(default_factory=list)  # the first before any call, the last once all ended
    warm: Sample | None = None  # right after the first call ended: models and caches loaded


async def one_call(url: str, profile: str, audio, report: Report, token: str | None) -> None:
    """Greeting, one spoken turn, hang up; records the turn's server-side voice-to-voice."""
    try:
        async with CallClient(url, profile, token=token) as client:
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


async def sample(pid: int, http_url: str, t0: float) -> Sample:
    proc = psutil.Process(pid)
    async with httpx.AsyncClient(base_url=http_url, timeout=5) as http:
        health = (await http.get("/healthz")).json()
    return Sample(
        round(time.monotonic() - t0, 1), round(proc.memory_info().rss / 2**20, 1), proc.num_fds(), health["tasks"], health["active_calls"]
    )


async def idle_sample(pid: int, http_url: str, t0: float, timeout: float = 60.0) -> Sample:
    """A sample once the server has no active call (the last calls may still be closing)."""
    for _ in range(int(timeout * 2)):
        if (now := await sample(pid, http_url, t0)).active_calls == 0:
            return now
        await asyncio.sleep(0.5)
    return now


async def soak(url: str, pid: int, profile: str, audio, calls: int, concurrency: int, minutes: float, token: str | None) -> Report:
    """Up to `calls` calls, `concurrency` at a time, for at most `minutes`; a sample every 5 s, idle ones at both ends."""
    report, t0 = Report(), time.monotonic()
    http_url = url.replace("ws://", "http://")
    deadline = t0 + minutes * 60
    started = 0
    report.samples.append(await idle_sample(pid, http_url, t0))

    async def worker() -> None:
        nonlocal started
        while started < calls and time.monotonic() < deadline:
            started += 1
            await one_call(url, profile, audio, report, token)
            if report.warm is None:
                report.warm = await sample(pid, http_url, t0)

    async def watch() -> None:
        while True:
            await asyncio.sleep(5)
            report.samples.append(await sample(pid, http_url, t0))

    watcher = asyncio.create_task(watch())
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    watcher.cancel()
    report.samples.append(await idle_sample(pid, http_url, t0))
    return report


def summarize(report: Report) -> dict:
    """Drift between the idle server before the calls (tasks, fds), after the first call (RSS), a quarter of the way
    in (RSS once settled) and after the last."""
    s, end = report.samples, report.samples[-1]
    warm = report.warm or s[0]
    settled = next(x for x in s if x.t >= end.t / 4)  # allocator arenas and caches fill during the first calls
    lat = report.latencies_ms
    tenth = max(len(lat) // 10, 1)
    return {
        "calls": report.calls,
        "failed": report.failed,
        "rss_mb_warm": warm.rss_mb,
        "rss_mb_end": end.rss_mb,
        "rss_growth_pct": round((end.rss_mb - warm.rss_mb) / warm.rss_mb * 100, 1),
        "rss_mb_settled": settled.rss_mb,
        "rss_growth_pct_settled": round((end.rss_mb - settled.rss_mb) / settled.rss_mb * 100, 1),
        "rss_mb_max": max(x.rss_mb for x in s),
        "fds_idle_start": s[0].fds,
        "fds_idle_end": end.fds,
        "tasks_idle_start": s[0].tasks,
        "tasks_idle_end": end.tasks,
        "active_calls_end": end.active_calls,
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
    parser.add_argument("--token", help="an API key, if the server sets TALKLINE_API_KEYS")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    audio = read_wav(args.audio)
    plan = (args.profile, audio, args.calls, args.concurrency, args.minutes, args.token)
    if args.url:
        if args.pid is None:
            parser.error("--url needs --pid (the server's process id, for RSS and fds)")
        report = asyncio.run(soak(loopback_url(args.url), args.pid, *plan))
    else:
        with OwnServer() as own:
            report = asyncio.run(soak(own.url, own.pid, *plan))
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
