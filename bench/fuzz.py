"""Fuzz a Talkline server on this machine: mutated and arbitrary frames on every WebSocket endpoint, then check it
still answers /healthz, still serves a well-behaved call, and has no call left open.

    python -m bench.fuzz --frames 10000                                   # starts its own server
    python -m bench.fuzz --url ws://127.0.0.1:8000 --frames 10000 [--token KEY] [--secret CARRIER_SECRET]

A running server counts new connections per address (TALKLINE_CONNECTIONS_PER_MINUTE): start it with 0 for a fast run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
from collections import Counter
from urllib.parse import urlencode, urlsplit

import httpx

from bench.fuzzframes import ENDPOINTS, Outcome, Session, fuzz_session, run_session
from bench.latency import OwnServer
from bench.wsclient import CallClient
from server.security import is_loopback


def loopback_url(url: str) -> str:
    """ws://HOST:PORT with a loopback HOST; anything else is refused: the fuzzer and the soak never load another machine."""
    parts = urlsplit(url)
    if parts.scheme != "ws" or not (parts.hostname == "localhost" or is_loopback(parts.hostname)):
        raise SystemExit(f"refusing {url!r}: benchmarks only target ws:// on this machine (127.0.0.0/8, ::1, localhost)")
    return f"ws://{parts.netloc}"


class Tally:
    """What was sent and how the server answered."""

    def __init__(self) -> None:
        self.sessions: Counter[str] = Counter()
        self.frames: Counter[str] = Counter()  # by kind: valid, out_of_order or a mutation's name
        self.closes: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()  # `error` event codes (browser)
        self.failures: list[str] = []

    @property
    def total(self) -> int:
        return sum(self.sessions.values())

    def add(self, session: Session, outcome: Outcome) -> None:
        self.sessions[session.endpoint] += 1
        self.frames.update(session.kinds[: outcome.sent])
        self.closes[f"{session.endpoint} {outcome.close_code or 'open (we hung up)'}"] += 1
        self.errors.update(outcome.errors)
        if not outcome.expected:
            sent = [(kind, len(frame), repr(frame)[:80]) for kind, frame in zip(session.kinds, session.frames)]
            self.failures.append(f"{session.endpoint}: closed with {outcome.close_code} after {sent}")

    def print(self) -> None:
        print(f"\nsessions: {dict(self.sessions)}; frames sent: {sum(self.frames.values())}")
        for title, counts in (("frames by kind", self.frames), ("how sockets ended", self.closes), ("error events", self.errors)):
            print(f"{title}:")
            for key, n in counts.most_common():
                print(f"  {key:<32} {n}")


async def health(url: str) -> dict:
    async with httpx.AsyncClient(base_url=url.replace("ws://", "http://", 1), timeout=10) as http:
        return (await http.get("/healthz")).json()


async def fuzz(url: str, frames: int, rng: random.Random, profile: str, queries: dict[str, str], tally: Tally) -> None:
    """Sessions round-robin over the endpoints until `frames` frames went out."""
    sent = 0
    while sent < frames:
        session = fuzz_session(ENDPOINTS[tally.total % len(ENDPOINTS)], rng, profile, max_frames=30)
        outcome = await run_session(url, session, queries[session.endpoint], linger_s=0.2, pace_s=0.008)
        tally.add(session, outcome)
        sent += outcome.sent
        if outcome.close_code == 4429:
            await asyncio.sleep(5)  # over a limit (connections per address): let the window move
        if tally.total % 100 == 0:
            try:
                calls = (await health(url))["active_calls"]
            except httpx.HTTPError as e:
                tally.failures.append(f"/healthz stopped answering after {tally.total} sessions: {e!r}")
                return
            print(f"  {sent} frames, {tally.total} sessions, {len(tally.failures)} failures, {calls} calls active")


async def good_call(url: str, profile: str, token: str | None) -> None:
    """Greeting, a typed question answered, hang up."""
    async with CallClient(url, profile, token=token) as client:
        await client.wait_for(lambda got: client.agent_finals(), timeout=120)
        await client.send_json({"type": "text", "text": "Hello, what can you help me with?"})
        await client.wait_for(lambda got: len(client.agent_finals()) >= 2 and got.of("metrics"), timeout=180)
        await client.send_json({"type": "stop"})
        await client.wait_for(lambda got: got.of("end"), timeout=30, feed_silence=False)
        if client.got.of("end")[0]["reason"] != "caller_stop" or client.got.of("error") or not client.agent_finals()[1]:
            raise AssertionError(f"the well-behaved call went wrong: {client.got.events[-6:]}")


async def settle(url: str, timeout: float = 60.0) -> dict:
    """/healthz once no call is active."""
    for _ in range(int(timeout * 2)):
        if (now := await health(url))["active_calls"] == 0:
            return now
        await asyncio.sleep(0.5)
    raise AssertionError(f"calls left open after the fuzzing: {now}")


async def run(url: str, frames: int, seed: int, profile: str, token: str | None, secret: str | None) -> Tally:
    queries = {endpoint: "" for endpoint in ENDPOINTS}
    if token:
        queries["browser"] = "?" + urlencode({"token": token})
    if secret:
        queries.update({endpoint: "?" + urlencode({"secret": secret}) for endpoint in ENDPOINTS if endpoint != "browser"})
    before, tally = await health(url), Tally()
    print(f"fuzzing {url} with {frames} frames (seed {seed}); server: {before}")
    await fuzz(url, frames, random.Random(seed), profile, queries, tally)
    tally.print()
    for check, step in (("a well-behaved call", good_call(url, profile, token)), ("no call left open", settle(url))):
        try:
            result = await step
            print(f"ok: {check}" + (f" ({result})" if result else ""))
        except Exception as e:  # noqa: BLE001 - reported as a failure
            tally.failures.append(f"{check}: {e!r}"[:500])
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="ws://127.0.0.1:PORT of a running server (loopback only); default: start one")
    parser.add_argument("--frames", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", default="skyways")
    parser.add_argument("--token", help="an API key, if the server sets TALKLINE_API_KEYS")
    parser.add_argument("--secret", help="TALKLINE_CARRIER_SECRET, if the server sets one")
    args = parser.parse_args()
    if args.url:
        tally = asyncio.run(run(loopback_url(args.url), args.frames, args.seed, args.profile, args.token, args.secret))
    else:
        os.environ["TALKLINE_CONNECTIONS_PER_MINUTE"] = "0"  # for the server started here
        with OwnServer() as own:
            tally = asyncio.run(run(own.url, args.frames, args.seed, args.profile, None, None))
    for failure in tally.failures:
        print(f"FAILURE {failure}")
    print("fuzzing found no failure" if not tally.failures else f"{len(tally.failures)} failure(s)")
    sys.exit(1 if tally.failures else 0)


if __name__ == "__main__":
    main()
