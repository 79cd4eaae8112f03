"""Crash durability: turns committed as they end survive SIGKILL; the unfinished call is closed as interrupted once
its server has missed its heartbeats (here by the restarted server)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from bench.latency import OwnServer
from bench.wsclient import CallClient
from pipeline.store import Store


@pytest.mark.asyncio
async def test_finished_turns_survive_sigkill(tmp_path, monkeypatch):
    monkeypatch.setenv("TALKLINE_HEARTBEAT_S", "1")
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    with OwnServer(db=db) as first:
        async with CallClient(first.url, "freshcart") as client:
            await client.wait_for(lambda got: client.agent_finals(), timeout=90)
            for n, question in enumerate(["Is delivery free?", "When do the stores open on Sunday?"], start=2):
                await client.send_json({"type": "text", "text": question})
                await client.wait_for(lambda got, n=n: len(client.agent_finals()) >= n, timeout=120)
            call_id = client.got.of("ready")[0]["call_id"]
            os.kill(first.pid, signal.SIGKILL)
            first.proc.wait(timeout=10)
    rows = Store(db).turns(call_id)
    assert [r.caller_text for r in rows] == [None, "Is delivery free?", "When do the stores open on Sunday?"]
    assert all(r.agent_text for r in rows)
    assert Store(db).call(call_id).ended_at is None  # the crash left it open

    with OwnServer(db=db):
        for _ in range(100):
            if (call := Store(db).call(call_id)).ended_at is not None:
                break
            await asyncio.sleep(0.2)
        assert call.end_reason == "interrupted" and call.ended_at is not None
