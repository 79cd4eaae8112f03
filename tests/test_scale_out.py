"""Scale-out on one machine, for real: two `talkline serve` processes on one PostgreSQL, behind nginx running
deploy/nginx.conf, both answering through one `talkline engine`. Calls spread over both servers; one is killed with
SIGKILL mid-call: only its calls end, the other's go on, new calls reach the survivor, every turn committed before the
kill is stored, and the dead server's calls are marked interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from servers import quick_profiles, serve_process, wait_healthy
from sqlalchemy import select
from sqlalchemy.orm import Session

from bench.wsclient import CallClient
from pipeline.store import CallRow, Store
from tests.conftest import ROOT, free_port
from tests.test_store import postgres_url  # noqa: F401 - the throwaway PostgreSQL cluster

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def nginx_conf(folder: Path, listen: int, upstreams: list[int]) -> Path:
    """deploy/nginx.conf with loopback upstreams instead of compose's DNS name, and its files in `folder`."""
    text = (ROOT / "deploy" / "nginx.conf").read_text()
    edits = {
        "    resolver 127.0.0.11 valid=10s;\n": "",
        "        server voice:8000 resolve;\n": "".join(f"        server 127.0.0.1:{port};\n" for port in upstreams),
        "listen 8000;": f"listen 127.0.0.1:{listen};",
        "events {}": f"pid {folder}/nginx.pid;\nerror_log {folder}/error.log;\n{'user root;' if os.geteuid() == 0 else ''}\nevents {{}}",
        "http {\n": f"http {{\n    access_log off;\n    client_body_temp_path {folder}/body;\n    proxy_temp_path {folder}/proxy;\n",
    }
    for old, new in edits.items():
        assert old in text, f"deploy/nginx.conf no longer has {old!r}"
        text = text.replace(old, new)
    path = folder / "nginx.conf"
    path.write_text(text)
    return path


def calls_by_server(store: Store) -> dict[str, str]:
    with Session(store.engine) as s:
        return {row.id: row.server_id for row in s.scalars(select(CallRow))}


async def talk(client: CallClient, question: str, replies: int) -> None:
    await client.send_json({"type": "text", "text": question})
    await client.wait_for(lambda got: len(client.agent_finals()) >= replies, timeout=90)


@pytest.mark.asyncio
async def test_two_servers_one_database_behind_nginx_survive_a_kill(engine_url, postgres_url, tmp_path):  # noqa: F811
    if not Path(NGINX).exists():
        pytest.skip("nginx is not installed (make test installs it with apt)")
    ports, front = [free_port(), free_port()], free_port()
    profiles = quick_profiles(tmp_path / "profiles")
    env = {"TALKLINE_DB": postgres_url, "TALKLINE_PROFILES": str(profiles), "TALKLINE_HEARTBEAT_S": "1"}
    servers = [serve_process(port, engine_url, **env) for port in ports]
    proxy = subprocess.Popen([NGINX, "-c", str(nginx_conf(tmp_path, front, ports)), "-p", str(tmp_path), "-g", "daemon off;"])
    url = f"ws://127.0.0.1:{front}"
    try:
        for port, proc in zip(ports, servers):
            wait_healthy(f"http://127.0.0.1:{port}", proc)
        wait_healthy(f"http://127.0.0.1:{front}", servers[1])
        store = Store(postgres_url)  # the servers made the schema
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(CallClient(url, "quick")) for _ in range(4)]
            await asyncio.gather(*(c.wait_for(lambda got, c=c: c.agent_finals(), timeout=60) for c in clients))
            await asyncio.gather(*(talk(c, "How much is a checked bag?", 2) for c in clients))
            ids = [c.got.of("ready")[0]["call_id"] for c in clients]
            owner = calls_by_server(store)
            doomed_pid = servers[0].pid
            on_doomed = [owner[i].split("-")[-2] == str(doomed_pid) for i in ids]
            assert sum(on_doomed) == 2, f"least_conn spreads four calls two and two: {owner}"

            os.kill(doomed_pid, signal.SIGKILL)
            servers[0].wait(timeout=10)
            lost = [c for c, doomed in zip(clients, on_doomed) if doomed]
            kept = [c for c, doomed in zip(clients, on_doomed) if not doomed]
            for client in lost:
                await client.wait_for(lambda got, c=client: c.closed.is_set(), timeout=15, feed_silence=False)
            await asyncio.gather(*(talk(c, "Can I change my flight?", 3) for c in kept))
            assert not any(c.closed.is_set() for c in kept), "the other server's calls go on"

            newcomer = await stack.enter_async_context(CallClient(url, "quick"))
            await newcomer.wait_for(lambda got: newcomer.agent_finals(), timeout=60)
            await talk(newcomer, "Is there free wifi?", 2)
            assert calls_by_server(store)[newcomer.got.of("ready")[0]["call_id"]] == owner[ids[on_doomed.index(False)]]

            for call_id, doomed in zip(ids, on_doomed):
                assert [t.index for t in store.turns(call_id)] == ([0, 1] if doomed else [0, 1, 2]), "committed turns are stored"
            for call_id in (i for i, doomed in zip(ids, on_doomed) if doomed):
                for _ in range(100):  # the survivor's heartbeat sweeps calls whose server stopped beating
                    if store.call(call_id).ended_at is not None:
                        break
                    await asyncio.sleep(0.2)
                assert store.call(call_id).end_reason == "interrupted", call_id
            assert all(store.call(i).ended_at is None for i, doomed in zip(ids, on_doomed) if not doomed)
    finally:
        for proc in [*servers, proxy]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*servers, proxy]:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
