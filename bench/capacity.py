"""How many calls one server carries. Simulated callers (the bench WAVs at real-time pace over /ws/call, a new call as
each ends) run at 1, 2, 4, 6, 8, ... calls at once for a fixed time per level; per level: voice-to-voice p50/p95/max at
the client, playback underruns (gaps over 100 ms), the machine's CPU use and the server's stage timings. The capacity is
the largest level with a p95 of at most 1000 ms and no underrun. `talkline bench capacity [--max-calls N] [--out DIR]`.

Callers arrive as independent calls do: each starts at a random moment of the level's first `STAGGER_S` and takes a
random 0.3-1.5 s to speak after each answer, so their turns drift apart. With `--lockstep` every caller starts at once
and speaks 0.3 s after each answer, so their turns keep ending at the same moment (and speaking at the same time)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import psutil

from bench.latency import OwnServer, TurnResult, run_call, summarize

P95_LIMIT_MS = 1000.0
TURNS_PER_CALL = 3
STAGGER_S = 6.0  # about one question and its answer
THINK_S = (0.3, 1.5)  # a caller's pause after an answer, drawn per turn
DEFAULT_WAVS = sorted((Path(__file__).resolve().parent / "audio").glob("q*_piper_*.wav"))


@dataclass
class Level:
    calls: int
    seconds: float
    summary: dict  # bench.latency.summarize over the level's turns
    cpu_percent: float  # of all cores, over the level
    ok: bool  # p95 within P95_LIMIT_MS and no underrun


def levels_up_to(max_calls: int) -> list[int]:
    """1, 2, 4, 6, 8, ... up to max_calls."""
    return [n for n in [1, 2, *range(4, max_calls + 1, 2)] if n <= max_calls]


def passes(summary: dict) -> bool:
    p95 = summary["voice_to_voice_ms"]["p95"]
    return p95 is not None and p95 <= P95_LIMIT_MS and summary["underruns"] == 0


def caller_pace(number: int, seconds: float, lockstep: bool = False) -> tuple[float, Callable[[], float] | None]:
    """Caller `number`'s delay before its first call and its pause after each answer (None: the client's fixed 0.3 s),
    drawn from a generator seeded by `number`, so a level's arrivals are the same in every run."""
    if lockstep:
        return 0.0, None
    rng = random.Random(f"caller-{number}")
    return rng.uniform(0, min(STAGGER_S, seconds / 2)), lambda: rng.uniform(*THINK_S)


async def caller(url: str, profile: str, wavs: list[Path], number: int, seconds: float, lockstep: bool = False) -> list[TurnResult]:
    """One simulated caller: calls of TURNS_PER_CALL questions (each caller starts at another question), the first at
    its `caller_pace` delay, the next ones while the level's `seconds` last."""
    until = time.monotonic() + seconds
    delay, think = caller_pace(number, seconds, lockstep)
    await asyncio.sleep(delay)
    results, start = [], number
    while True:
        turns = [wavs[(start + k) % len(wavs)] for k in range(TURNS_PER_CALL)]
        results += await run_call(url, profile, turns, number, think_s=think)
        start += TURNS_PER_CALL
        if time.monotonic() >= until:
            return results


async def wait_idle(url: str, timeout: float = 120.0) -> None:
    """Until the server reports no active call (the last level's calls are stored and over)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            if (await http.get(url.replace("ws://", "http://") + "/healthz")).json()["active_calls"] == 0:
                return
            await asyncio.sleep(0.5)


async def run_level(url: str, profile: str, wavs: list[Path], calls: int, seconds: float, lockstep: bool = False) -> Level:
    await wait_idle(url)
    psutil.cpu_percent()  # starts the measurement window
    started = time.monotonic()
    per_caller = await asyncio.gather(*(caller(url, profile, wavs, n, seconds, lockstep) for n in range(calls)))
    summary = summarize([r for results in per_caller for r in results])
    return Level(calls, round(time.monotonic() - started, 1), summary, psutil.cpu_percent(), passes(summary))


def capacity(levels: list[Level]) -> int:
    """The largest level that passed with every level below it passing too (0 if even one call fails)."""
    best = 0
    for level in levels:
        if not level.ok:
            break
        best = level.calls
    return best


def print_table(levels: list[Level]) -> None:
    print(f"{'calls':>5} {'turns':>5} {'v2v p50':>8} {'p95':>7} {'max':>7} {'underruns':>9} {'cpu %':>6} {'llm ttft p95':>12} {'ok':>3}")
    for lv in levels:
        v, s = lv.summary["voice_to_voice_ms"], lv.summary["server_stages_ms"]
        print(
            f"{lv.calls:>5} {lv.summary['turns']:>5} {v['p50'] or '-':>8} {v['p95'] or '-':>7} {v['max'] or '-':>7} "
            f"{lv.summary['underruns']:>9} {lv.cpu_percent:>6.0f} {s['llm_ttft_ms']['p95'] or '-':>12} {'yes' if lv.ok else 'no':>3}"
        )
    print(f"\ncapacity: {capacity(levels)} calls (p95 voice-to-voice <= {P95_LIMIT_MS:g} ms, no underrun)")


def plot(levels: list[Level], path: Path) -> None:
    """Voice-to-voice p50/p95 and underruns against concurrent calls."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    calls = [lv.calls for lv in levels]
    fig, left = plt.subplots(figsize=(7, 4))
    for key, style in (("p50", "o-"), ("p95", "s-")):
        left.plot(calls, [lv.summary["voice_to_voice_ms"][key] for lv in levels], style, label=f"voice-to-voice {key}")
    left.axhline(P95_LIMIT_MS, color="grey", linestyle=":", label=f"{P95_LIMIT_MS:g} ms")
    left.set_xlabel("concurrent calls")
    left.set_ylabel("ms")
    right = left.twinx()
    right.bar(calls, [lv.summary["underruns"] for lv in levels], alpha=0.25, color="tab:red", label="underruns")
    right.set_ylabel("underruns (gaps > 100 ms)")
    right.set_ylim(0, max(1, *(lv.summary["underruns"] for lv in levels)) * 1.1)
    left.legend(loc="upper left")
    left.set_title(f"Talkline capacity: {capacity(levels)} call(s) at p95 <= {P95_LIMIT_MS:g} ms")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(
    url: str | None, profile: str, max_calls: int, seconds: float, out: Path | None, wavs: list[Path] | None = None, lockstep: bool = False
) -> dict:
    wavs = wavs or DEFAULT_WAVS
    levels: list[Level] = []

    def run(target: str) -> None:
        for calls in levels_up_to(max_calls):
            levels.append(asyncio.run(run_level(target, profile, wavs, calls, seconds, lockstep)))

    if url is None:  # a call that ended holds its slot until it is stored, while its caller's next call starts
        with OwnServer(env={"TALKLINE_MAX_CALLS": str(2 * max_calls)}) as own:
            run(own.url)
    else:
        run(url.removesuffix("/ws/call"))
    print_table(levels)
    report = {
        "profile": profile,
        "seconds_per_level": seconds,
        "arrivals": "lockstep" if lockstep else "staggered",
        "capacity": capacity(levels),
        "levels": [asdict(lv) for lv in levels],
    }
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "capacity.json").write_text(json.dumps(report, indent=2))
        plot(levels, out / "capacity.png")
    return report
