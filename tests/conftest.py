"""Shared fixtures: the real models loaded once, a real server on a loopback port, synthesized caller speech."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import uvicorn

from bench.latency import free_port
from pipeline.audio import resample
from pipeline.profile import TurnSettings, VoiceSettings
from server.app import build_stages, create_app
from server.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
DETERMINISTIC_VOICE = VoiceSettings(noise_scale=0.0, noise_w_scale=0.0)  # the same take every session


@pytest.fixture(scope="session")
def stages():
    loaded = build_stages(Settings(spec=None))  # plain greedy: the reference speculative tests compare against
    loaded.turn_models.load([TurnSettings().endpoint_rule()])  # what a server loads for profiles with the default rule
    return loaded


@pytest.fixture(scope="session")
def speech(stages):
    """Caller speech: the bundled Piper voice saying `text`, as 16 kHz float32."""
    cache: dict[str, np.ndarray] = {}

    def make(text: str, rate: int = 16000) -> np.ndarray:
        if text not in cache:
            audio = np.concatenate(stages.tts.synthesize(text, DETERMINISTIC_VOICE))
            cache[text] = resample(audio, stages.tts.sample_rate, 16000)
        return resample(cache[text], 16000, rate)

    return make


class ServerThread:
    def __init__(self, app, port: int) -> None:
        self.app, self.port = app, port
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws_max_size=1 << 20))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def state(self):
        return self.app.state.talkline

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="session")
def server(stages, tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "talkline.db"
    settings = Settings(db_url=f"sqlite:///{db}", warmup=False, connections_per_minute=0)  # the whole suite connects from 127.0.0.1
    with ServerThread(create_app(settings, stages=stages), free_port()) as running:
        yield running


@pytest.fixture(scope="session")
def engine_proc():
    """The `talkline engine` subprocess, started before the in-process models load so both load at once."""
    port = free_port()
    cmd = [sys.executable, "-m", "server.cli", "engine", "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=ROOT)  # one torch thread by default, as the in-process engine: the same greedy output
    yield proc, f"http://127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def engine_url(engine_proc, stages) -> str:
    proc, url = engine_proc
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"talkline engine exited with {proc.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return url
        if time.monotonic() > deadline:
            raise RuntimeError("talkline engine did not answer /health within 120 s")
        time.sleep(0.2)
