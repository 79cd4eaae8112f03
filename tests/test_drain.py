"""Graceful drain of a real `talkline serve` process: SIGTERM refuses new calls with the retryable codes, lets running
calls finish their turns, ends what is left after TALKLINE_DRAIN_S with the closing line, and exits 0."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from types import SimpleNamespace

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from servers import probe, quick_profiles, serve_process, wait_healthy
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from bench.carrierclient import TwilioClient
from bench.wsclient import CallClient
from pipeline.store import CallRow
from server.drain import DrainingServer
from server.limits import CallSlots
from tests.conftest import free_port

CLOSING = "We are closing this line now, goodbye."


async def _healthz(url: str) -> httpx.Response | None:
    with contextlib.suppress(httpx.TransportError):
        async with httpx.AsyncClient() as http:
            return await http.get(url + "/healthz", timeout=2)
    return None


@pytest.mark.asyncio
async def test_sigterm_drains_calls_then_exits_zero(engine_url, tmp_path):
    port, db = free_port(), tmp_path / "drain.db"
    profiles = quick_profiles(tmp_path / "profiles", closing_line=CLOSING)
    proc = serve_process(port, engine_url, TALKLINE_DB=f"sqlite:///{db}", TALKLINE_PROFILES=str(profiles), TALKLINE_DRAIN_S="25")
    http, ws = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"
    try:
        await asyncio.to_thread(wait_healthy, http, proc)
        async with CallClient(ws, "quick") as talker, CallClient(ws, "quick") as lingerer:
            for client in (talker, lingerer):
                await client.wait_for(lambda got, c=client: c.agent_finals(), timeout=30)
            proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 10
            while (health := await _healthz(http)) is None or health.status_code != 503:
                assert time.monotonic() < deadline, "/healthz did not turn 503 after SIGTERM"
                await asyncio.sleep(0.1)
            assert health.json()["status"] == "draining"

            refused = await probe(ws + "/ws/call", [json.dumps({"type": "start", "profile": "quick", "sample_rate": 16000})])
            assert refused.codes() == ["draining"] and refused.close_code == 4503
            phone = await probe(ws + "/twilio/media", TwilioClient("", "quick").opening())
            assert phone.close_code == 1013

            await talker.send_json({"type": "text", "text": "How much is a checked bag?"})
            await talker.wait_for(lambda got: len(talker.agent_finals()) >= 2, timeout=60)
            await talker.send_json({"type": "stop"})
            await talker.wait_for(lambda got: talker.closed.is_set(), timeout=10, feed_silence=False)
            assert proc.poll() is None, "the server stopped while a call was still running"

            await lingerer.wait_for(lambda got: lingerer.closed.is_set(), timeout=60, feed_silence=False)
            assert lingerer.agent_finals()[-1] == CLOSING
            assert lingerer.got.of("end")[-1]["reason"] == "server_shutdown"
        assert proc.wait(timeout=30) == 0
        with Session(create_engine(f"sqlite:///{db}")) as s:
            reasons = sorted(row.end_reason for row in s.scalars(select(CallRow)))
        assert reasons == ["caller_stop", "server_shutdown"], "refused calls open no call; both calls ended"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_second_sigterm_stops_at_once():
    app = FastAPI()
    app.state.talkline = SimpleNamespace(calls=CallSlots(4))
    assert app.state.talkline.calls.take()  # a call is running
    server = DrainingServer(uvicorn.Config(app), app, drain_s=300)
    server.loop = asyncio.new_event_loop()
    try:
        server.handle_exit(signal.SIGTERM, None)
        server.loop.run_until_complete(asyncio.sleep(0.05))
        assert app.state.talkline.calls.draining and not server.should_exit, "the first SIGTERM drains"
        server.handle_exit(signal.SIGTERM, None)
        assert server.should_exit and server.force_exit
    finally:
        for task in asyncio.all_tasks(server.loop):
            task.cancel()
        server.loop.run_until_complete(asyncio.sleep(0))
        server.loop.close()
