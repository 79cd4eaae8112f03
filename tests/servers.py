"""Test helpers for servers with their own settings: a quick profile, a server on a loopback port, waiting for it to idle."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import websockets
import yaml
from conftest import ROOT, ServerThread, free_port

from server.app import create_app
from server.settings import Settings

QUICK_FALLBACK = "Sorry, say that again?"


def quick_profiles(folder: Path, **changes) -> Path:
    """A profiles folder holding one profile, `quick`: Skyways' facts with a one-word greeting and short replies."""
    profile = yaml.safe_load((ROOT / "profiles" / "skyways.yaml").read_text())
    quick = {"id": "quick", "greeting": "Hi.", "fallback_line": QUICK_FALLBACK, "llm": {"max_tokens": 24}}
    profile.update({**quick, **changes})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "quick.yaml").write_text(yaml.safe_dump(profile))
    return folder


@contextlib.contextmanager
def serving(stages, tmp_path: Path, **settings) -> Iterator[ServerThread]:
    """A server on the shared models with these settings (connection rate unlimited unless given)."""
    options = {"db_url": f"sqlite:///{tmp_path / 'talkline.db'}", "warmup": False, "connections_per_minute": 0, **settings}
    with ServerThread(create_app(Settings(**options), stages=stages), free_port()) as running:
        yield running


def serve_process(port: int, engine_url: str, **env: str) -> subprocess.Popen:
    """`talkline serve` in a subprocess answering through `talkline engine` at `engine_url`; `env` adds TALKLINE_*
    variables (connection rate unlimited unless given)."""
    env = {"TALKLINE_CONNECTIONS_PER_MINUTE": "0", **env}
    cmd = ["serve", "--port", str(port), "--llm", "sglang", "--llm-url", engine_url, "--log-level", "warning"]
    return subprocess.Popen([sys.executable, "-m", "server.cli", *cmd], cwd=ROOT, env={**os.environ, **env})


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    """Until GET {url}/healthz answers 200; fails if `proc` exits first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"{url}: the process exited with {proc.returncode}"
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        assert time.monotonic() < deadline, f"{url} did not become healthy"
        time.sleep(0.5)


async def idle(server: ServerThread, timeout: float = 20.0) -> dict:
    """/healthz once no call is active (fails if one stays open)."""
    async with httpx.AsyncClient(base_url=server.url) as http:
        for _ in range(int(timeout * 10)):
            health = (await http.get("/healthz")).json()
            if health["active_calls"] == 0 and server.state.calls.used == 0:
                return health
            await asyncio.sleep(0.1)
    raise AssertionError(f"calls still active: {health}")


class LoopThread:
    """An event loop in its own thread, for synchronous test bodies (Hypothesis) that drive async clients."""

    def __enter__(self) -> LoopThread:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        return self

    def submit(self, coro: Coroutine) -> asyncio.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine, timeout: float = 60.0):
        return self.submit(coro).result(timeout)

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(Exception):
            self.run(_cancel_all(), timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


async def _cancel_all() -> None:
    """Cancel every other task on this loop (a test that failed leaves its clients running) and let them finish."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class Probe:
    events: list[dict]  # JSON text frames from the server
    audio: int  # binary frames from the server
    close_code: int | None  # None: still open when the probe hung up

    def codes(self) -> list[str]:
        return [e["code"] for e in self.events if e.get("type") == "error"]


async def probe(url: str, frames: list[str | bytes], headers: dict | None = None, until=None, timeout: float = 10.0) -> Probe:
    """Connect, send `frames`, read until the server closes, `until(probe)` holds or `timeout`; then hang up."""
    got = Probe([], 0, None)
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        with contextlib.suppress(websockets.ConnectionClosed):  # a refused socket may close before we are done
            for frame in frames:
                await ws.send(frame)
        with contextlib.suppress(websockets.ConnectionClosed, TimeoutError):
            async with asyncio.timeout(timeout):
                async for msg in ws:
                    if isinstance(msg, bytes):
                        got.audio += 1
                    else:
                        got.events.append(json.loads(msg))
                    if until is not None and until(got):
                        break
        got.close_code = ws.close_code
    return got
