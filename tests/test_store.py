"""Persistence: calls and turns, committed per turn, against SQLite and a real PostgreSQL server."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from pipeline.store import Store, TurnRecord, utcnow
from tests.conftest import free_port


def postgres_bin() -> Path | None:
    root = Path("/usr/lib/postgresql")
    versions = sorted(root.iterdir(), key=lambda p: int(p.name)) if root.is_dir() else []
    return next((v / "bin" for v in reversed(versions) if (v / "bin" / "initdb").exists()), None)


@pytest.fixture(scope="module")
def postgres_url():
    """A throwaway PostgreSQL cluster on a loopback port, run as the postgres user."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (make test installs it with apt)")
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    data = Path(tempfile.mkdtemp(prefix="talkline-pg-"))
    if as_postgres:
        shutil.chown(data, "postgres", "postgres")
    port = free_port()
    run = lambda *cmd: subprocess.run([*as_postgres, *cmd], check=True, capture_output=True)  # noqa: E731
    run(str(bin_dir / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "talkline")
    run(
        str(bin_dir / "pg_ctl"),
        "-D",
        str(data / "db"),
        "-l",
        str(data / "log"),
        "-w",
        "-o",
        f"-p {port} -k {data} -c listen_addresses=127.0.0.1",
        "start",
    )
    yield f"postgresql+psycopg://talkline@127.0.0.1:{port}/postgres"
    run(str(bin_dir / "pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "stop")
    shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> Store:
    url = f"sqlite:///{tmp_path / 'calls.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    return Store(url)


def turn(call_id: str, index: int, **kw) -> TurnRecord:
    now = utcnow()
    return TurnRecord(
        call_id=call_id,
        index=index,
        caller_text=kw.get("caller", "hi"),
        agent_text=kw.get("agent", "hello"),
        interrupted=kw.get("interrupted", False),
        started_at=now - timedelta(seconds=2),
        ended_at=now,
        asr_ms=300.0,
        llm_ttft_ms=80.0,
        tts_ttfb_ms=100.0,
        voice_to_voice_ms=1200.0,
    )


def test_turns_are_visible_as_soon_as_they_are_saved(store, tmp_path):
    call_id = f"call-{tmp_path.name}"
    store.start_call(call_id, "skyways", "browser")
    store.save_turn(turn(call_id, 0, caller=None, agent="Welcome"))
    store.save_turn(turn(call_id, 1, agent="It costs thirty dollars.", interrupted=True))
    reader = Store(str(store.engine.url.render_as_string(hide_password=False)))  # a second connection sees them
    rows = reader.turns(call_id)
    assert [(r.index, r.caller_text, r.agent_text, r.interrupted) for r in rows] == [
        (0, None, "Welcome", False),
        (1, "hi", "It costs thirty dollars.", True),
    ]
    assert rows[1].voice_to_voice_ms == 1200.0 and rows[1].ended_at > rows[1].started_at
    assert reader.call(call_id).ended_at is None
    store.end_call(call_id, "caller_stop")
    assert reader.call(call_id).end_reason == "caller_stop"


def test_only_the_calls_of_a_stopped_server_are_closed_as_interrupted(store, tmp_path):
    """Replicas share the database: a call is closed as interrupted once its server stops beating, never before."""
    url = str(store.engine.url.render_as_string(hide_password=False))
    first, second = Store(url, server_id=f"a-{tmp_path.name}"), Store(url, server_id=f"b-{tmp_path.name}")
    first.beat()
    second.beat()
    mine, theirs, legacy = (f"{who}-{tmp_path.name}" for who in ("mine", "theirs", "legacy"))
    first.start_call(mine, "northbank", "twilio")
    second.start_call(theirs, "northbank", "browser")
    Store(url).start_call(legacy, "northbank", "browser")  # from a version that did not record its server
    first.close_orphans(stale_s=60)
    assert first.call(mine).ended_at is None and first.call(theirs).ended_at is None, "live servers keep their calls"
    assert first.call(legacy).end_reason == "interrupted"
    second.leave()
    assert first.close_orphans(stale_s=60) >= 1
    assert first.call(theirs).end_reason == "interrupted" and first.call(mine).ended_at is None
    time.sleep(0.05)
    second.close_orphans(stale_s=0.01)  # the first server missed its heartbeats
    row = first.call(mine)
    assert row.end_reason == "interrupted" and row.ended_at is not None
    assert first.close_orphans(stale_s=60) == 0


def test_a_database_from_before_tool_calls_gets_the_column(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with Store(url).engine.begin() as conn:
        conn.execute(text("ALTER TABLE turns DROP COLUMN tool_calls"))
    store = Store(url)
    store.start_call("old", "skyways", "browser")
    store.save_turn(dataclasses.replace(turn("old", 1), tool_calls='[{"name": "end_call", "arguments": {}}]'))
    assert store.turns("old")[0].tool_calls == '[{"name": "end_call", "arguments": {}}]'
