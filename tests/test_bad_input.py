"""Bad input over /ws/call: error events and 4xxx closes, never a crash, never a disturbed call beside it."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from bench.wsclient import CallClient


async def first_frame_rejected(url: str, frame: str | bytes) -> tuple[dict, int]:
    async with websockets.connect(url + "/ws/call") as ws:
        await ws.send(frame)
        error = json.loads(await asyncio.wait_for(ws.recv(), 10))
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
        return error, ws.close_code


START_CASES = [
    ("not json", "bad_json", 4400),
    (json.dumps([1, 2]), "bad_message", 4400),
    (json.dumps({"type": "text", "text": "hi"}), "not_started", 4400),
    (json.dumps({"type": "start", "profile": "nope"}), "unknown_profile", 4404),
    (json.dumps({"type": "start", "profile": "skyways", "sample_rate": 12345}), "bad_message", 4400),
    (json.dumps({"type": "start", "profile": "skyways", "extra": 1}), "bad_message", 4400),
    (json.dumps({"type": "hello"}), "unknown_type", 4400),
    (b"\x00\x01" * 160, "not_started", 4400),
]


async def good_call(server) -> str:
    async with CallClient(server.ws_url, "northbank") as client:
        await client.wait_for(lambda got: client.agent_finals(), timeout=60)
        await client.send_json({"type": "text", "text": "When are your branches open on Saturday?"})
        await client.wait_for(lambda got: len(client.agent_finals()) >= 2 and got.of("metrics"), timeout=90)
        assert client.got.of("error") == []
        return client.agent_finals()[1]


async def bad_client(server) -> None:
    for frame, code, close in START_CASES:
        error, closed_with = await first_frame_rejected(server.ws_url, frame)
        assert error["type"] == "error" and error["code"] == code, (frame, error)
        assert closed_with == close, (frame, closed_with)

    async with CallClient(server.ws_url, "skyways") as client:
        await client.wait_for(lambda got: got.of("ready"))
        mid_call = [
            ("{oops", "bad_json"),
            (json.dumps({"type": "dance"}), "unknown_type"),
            (json.dumps({"type": "start", "profile": "skyways"}), "already_started"),
            (json.dumps({"type": "dtmf", "digit": "55"}), "bad_message"),
            (json.dumps({"type": "text", "text": ""}), "bad_message"),
            (json.dumps({"type": "text", "text": 7}), "bad_message"),
            (b"\x00" * (64 * 1024 + 2), "frame_too_large"),
            (b"\x00" * 3, "bad_audio"),
        ]
        for frame, code in mid_call:
            await client.ws.send(frame)
            await client.wait_for(lambda got, c=code: any(e["code"] == c for e in got.of("error")), feed_silence=False)
        await client.send_json({"type": "text", "text": "Hello?"})
        await client.wait_for(lambda got: got.of("metrics"), timeout=90, feed_silence=False)
        assert client.close_code is None


@pytest.mark.asyncio
async def test_bad_input_never_disturbs_a_concurrent_call(server):
    answer, _ = await asyncio.gather(good_call(server), bad_client(server))
    assert answer
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get("/healthz")).json()["status"] == "ok"
        for _ in range(100):
            metrics = (await http.get("/metrics")).text
            if "talkline_active_calls 0.0" in metrics:
                break
            await asyncio.sleep(0.1)
        assert "talkline_active_calls 0.0" in metrics
        assert 'talkline_errors_total{code="frame_too_large"}' in metrics


@pytest.mark.asyncio
async def test_vanishing_client_closes_the_call(server, speech):
    client = CallClient(server.ws_url, "freshcart")
    await client.__aenter__()
    await client.wait_for(lambda got: got.of("ready"))
    await client.stream(speech("Where is my order?")[:8000])
    call_id = client.got.of("ready")[0]["call_id"]
    client.ws.transport.abort()
    for _ in range(100):
        row = await server.state.store.run(server.state.store.call, call_id)
        if row.ended_at is not None:
            break
        await asyncio.sleep(0.1)
    assert row.end_reason == "caller_disconnected"


@pytest.mark.asyncio
async def test_profiles_health_and_metrics_endpoints(server):
    async with httpx.AsyncClient(base_url=server.url) as http:
        profiles = (await http.get("/profiles")).json()
        assert {"skyways", "northbank", "freshcart"} <= {p["id"] for p in profiles}
        one = (await http.get("/profiles/skyways")).json()
        assert one["brand"] == "Skyways Air" and one["llm"]["max_tokens"] > 0
        assert (await http.get("/profiles/../../etc/passwd")).status_code == 404
        assert (await http.get("/profiles/unknown")).status_code == 404
        metrics = (await http.get("/metrics")).text
        assert "talkline_stage_latency_seconds" in metrics and "talkline_active_calls" in metrics
