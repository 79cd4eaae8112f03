"""Limits over real sockets: concurrent calls, call duration, text length, frames per second, connections per minute.
Each is answered with an error event (browser) and a close code, never a crash."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import websockets
from phone_calls import call_ids, ended_call
from servers import probe, quick_profiles, serving

from bench.carrierclient import TwilioClient, VonageClient
from server.limits import FrameRate, Verdict

START = json.dumps({"type": "start", "profile": "quick", "sample_rate": 16000})
READY = lambda got: any(e.get("type") == "ready" for e in got.events)  # noqa: E731


def test_frame_rate_drops_warns_once_a_second_and_closes_persistent_abuse():
    rate = FrameRate(per_s=10, abuse_s=5.0)
    first = [rate.check(t / 100) for t in range(100)]  # 100 frames/s for one second
    assert first[:10] == [Verdict.PASS] * 10 and first[10] is Verdict.WARN and set(first[11:]) == {Verdict.DROP}
    verdicts = [rate.check(1 + t / 100) for t in range(500)]  # five more seconds of it
    assert verdicts.count(Verdict.WARN) == 4 and verdicts[-1] is Verdict.CLOSE

    calm = FrameRate(per_s=10, abuse_s=5.0)
    bursts = [calm.check(t + k / 100) for t in range(0, 12, 2) for k in range(20)]  # over the rate, but every other second
    assert Verdict.CLOSE not in bursts and bursts.count(Verdict.WARN) == 6
    assert [calm.check(20 + t / 10) for t in range(50)] == [Verdict.PASS] * 50


@pytest.fixture(scope="module")
def tight(stages, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tight")
    options = {"max_calls": 1, "max_call_s": 3.0, "max_text_chars": 40, "max_frames_per_s": 30}
    with serving(stages, tmp, profiles_dir=quick_profiles(tmp / "profiles"), **options) as running:
        yield running


@pytest.mark.asyncio
async def test_busy_duration_and_text_limits(tight):
    url = tight.ws_url + "/ws/call"
    before = await call_ids(tight)
    started = time.monotonic()
    holder = asyncio.create_task(probe(url, [START, json.dumps({"type": "text", "text": "x" * 41})], timeout=15))
    await asyncio.sleep(1.0)
    busy = await probe(url, [START])
    assert busy.codes() == ["busy"] and busy.close_code == 4503
    phone = await probe(tight.ws_url + "/twilio/media", TwilioClient("", "quick").opening())
    assert phone.close_code == 1013

    held = await holder  # its text was too long: an error, the call goes on until its time is up
    assert held.codes() == ["text_too_long", "max_duration"]
    assert held.events[-1] == {"type": "end", "reason": "max_duration"} and held.close_code == 1000
    assert 2.9 < time.monotonic() - started < 6
    row = await ended_call(tight, before, "browser", "quick")
    assert row.end_reason == "max_duration"
    assert len(await call_ids(tight) - before) == 1, "refused calls open no call"
    assert READY(await probe(url, [START], until=READY)), "a slot frees when a call ends"


async def flood(url: str, frames: list[str | bytes], frame: bytes, seconds: float = 8.0) -> tuple[int, int | None]:
    """Send `frame` ~150 times a second after the opening until the server closes; (rate_limited events, close code)."""
    warnings = 0
    async with websockets.connect(url, max_size=None) as ws:

        async def count() -> None:
            nonlocal warnings
            async for msg in ws:
                warnings += isinstance(msg, str) and '"rate_limited"' in msg

        reader = asyncio.create_task(count())
        for opening in frames:
            await ws.send(opening)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                await ws.send(frame)
                await asyncio.sleep(1 / 150)
        except websockets.ConnectionClosed:
            pass
        await asyncio.wait({reader}, timeout=2)
        return warnings, ws.close_code


@pytest.mark.asyncio
async def test_frame_floods_are_dropped_then_closed(stages, tmp_path):
    with serving(stages, tmp_path, profiles_dir=quick_profiles(tmp_path / "profiles"), max_frames_per_s=30) as server:
        before = await call_ids(server)
        browser, vonage = await asyncio.gather(
            flood(server.ws_url + "/ws/call", [START], b"\x00\x00" * 16),
            flood(server.ws_url + "/vonage/media", VonageClient("").opening(), b"\x00\x00" * 320),
        )
        assert 4 <= browser[0] <= 7 and browser[1] == 4429, browser  # one warning a second, closed after 5 s
        assert vonage[1] == 4429, vonage
        assert (await ended_call(server, before, "browser", "quick")).end_reason == "rate_limited"
        assert (await ended_call(server, before, "vonage", "quick")).end_reason == "rate_limited"
        metrics = httpx.get(server.url + "/metrics").text
        assert 'talkline_errors_total{code="rate_limited"}' in metrics


@pytest.mark.asyncio
async def test_connections_per_minute_per_address(stages, tmp_path):
    with serving(stages, tmp_path, profiles_dir=quick_profiles(tmp_path / "profiles"), connections_per_minute=3) as server:
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert [(await http.get("/profiles")).status_code for _ in range(3)] == [200] * 3
            over = await http.get("/profiles")
            assert over.status_code == 429 and over.headers["retry-after"] == "60" and "too many" in over.json()["detail"]
            browser = await probe(server.ws_url + "/ws/call", [START])
            assert browser.codes() == ["rate_limited"] and browser.close_code == 4429
            assert (await probe(server.ws_url + "/telnyx/media", [])).close_code == 4429
            assert (await http.get("/healthz")).status_code == 200, "health checks are not counted"
            other = await http.get("/profiles", headers={"X-Forwarded-For": "203.0.113.8"})
            assert other.status_code == 403, "another address has its own count (and, without keys, is refused as remote)"


SECRET = "carrier-secret-3e1c"
HEARD = lambda got: got.audio > 0 or any(e.get("event") == "media" for e in got.events)  # noqa: E731


def twilio_opening(secret: str) -> list[str]:
    connected, start = TwilioClient("", "quick").opening()
    signed = json.loads(start)
    signed["start"]["customParameters"]["secret"] = secret
    return [connected, json.dumps(signed)]


@pytest.mark.asyncio
async def test_authenticated_carrier_streams_are_not_counted_against_the_address(stages, tmp_path):
    """A carrier opens every call's stream from a few addresses: 100 valid streams in a minute all connect, while
    100 streams with a wrong secret from one address are cut at TALKLINE_CONNECTIONS_PER_MINUTE."""
    profiles = quick_profiles(tmp_path / "profiles", facts=[], policies=[])
    options = {"connections_per_minute": 30, "carrier_secret": SECRET, "max_calls": 100}
    with serving(stages, tmp_path, profiles_dir=profiles, **options) as server:
        url = server.ws_url + "/twilio/media"
        gate = asyncio.Semaphore(8)

        async def one(secret: str):
            async with gate:
                return await probe(url, twilio_opening(secret), until=HEARD, timeout=30)

        valid = await asyncio.gather(*(one(SECRET) for _ in range(100)))
        assert sum(HEARD(p) for p in valid) == 100, [p.close_code for p in valid if not HEARD(p)]
        wrong = [(await probe(url, twilio_opening("wrong"))).close_code for _ in range(100)]
        assert wrong == [4401] * 30 + [4429] * 70


@pytest.mark.asyncio
async def test_api_keys_skip_the_address_count_and_carry_call_quotas(stages, tmp_path):
    profiles = quick_profiles(tmp_path / "profiles")
    with serving(stages, tmp_path, profiles_dir=profiles, connections_per_minute=5, api_keys=["k-one:1", "k-free"]) as server:
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert [(await http.get("/profiles", params={"token": "k-free"})).status_code for _ in range(8)] == [200] * 8
            wrong = [(await http.get("/profiles", params={"token": "nope"})).status_code for _ in range(6)]
            assert wrong == [401] * 5 + [429]
        url = server.ws_url + "/ws/call?token="
        ready = lambda got: any(e.get("type") == "ready" for e in got.events)  # noqa: E731
        holder = asyncio.create_task(probe(url + "k-one", [START], timeout=4))
        await asyncio.sleep(1.0)
        over = await probe(url + "k-one", [START])
        assert over.codes() == ["quota_exceeded"] and over.close_code == 4429
        assert "limit of 1 concurrent calls" in over.events[0]["message"]
        assert ready(await probe(url + "k-free", [START], until=ready)), "other keys are not held by it"
        await holder
        for _ in range(50):  # the slot frees once the first call's socket is done
            if server.state.guard.quotas.active["k-one"] == 0:
                break
            await asyncio.sleep(0.1)
        assert ready(await probe(url + "k-one", [START], until=ready))
