"""Hypothesis fuzzing of every WebSocket endpoint: arbitrary and mutated frames never crash the server, never disturb a
concurrent well-behaved call, never leak a call, and never log an unhandled error."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servers import LoopThread, idle, quick_profiles, serving

from bench.fuzz import good_call
from bench.fuzzframes import ENDPOINTS, fuzz_session, run_session

EXAMPLES = 100  # per endpoint: about 15 s each on two shared cores
FIELDS = (
    "type",
    "event",
    "profile",
    "sample_rate",
    "text",
    "digit",
    "start",
    "media",
    "payload",
    "streamSid",
    "stream_id",
    "sequence_number",
    "mark",
    "name",
    "content-type",
    "customParameters",
    "media_format",
    "encoding",
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | st.sampled_from(FIELDS),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), inner, max_size=5),
    max_leaves=12,
)
ARBITRARY = st.one_of(st.binary(max_size=2048), st.text(max_size=300), JSON.map(json.dumps))
WATCHED_LOGGERS = ("server", "pipeline", "uvicorn.error", "asyncio")


@pytest.fixture(scope="module")
def fuzz_server(stages, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    with serving(stages, tmp, profiles_dir=quick_profiles(tmp / "profiles")) as running:
        yield running


class ErrorRecords(logging.Handler):
    """Collects ERROR records (an unhandled exception, a failed call) from the server's loggers."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def error_records() -> Iterator[ErrorRecords]:
    handler = ErrorRecords()
    loggers = [logging.getLogger(name) for name in WATCHED_LOGGERS]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


async def good_calls(url: str, stop: asyncio.Event) -> int:
    """Well-behaved calls (bench/fuzz.py's), one after another until `stop`; each must end normally."""
    done = 0
    while not stop.is_set() or not done:
        await good_call(url, "quick", token=None)
        done += 1
    return done


def fuzz(server, loop: LoopThread, endpoint: str) -> None:
    """EXAMPLES fuzz sessions, one connection each; every one must end in a documented way."""

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(rng=st.randoms(use_true_random=True), arbitrary=st.lists(ARBITRARY, max_size=4))
    def session(rng, arbitrary) -> None:
        sent = fuzz_session(endpoint, rng, "quick", arbitrary=arbitrary)
        outcome = loop.run(run_session(server.ws_url, sent))
        assert outcome.expected, (outcome, [(kind, len(f), repr(f)[:100]) for kind, f in zip(sent.kinds, sent.frames)])

    session()


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_fuzzed_endpoint_keeps_serving(fuzz_server, endpoint):
    with error_records() as errors, LoopThread() as loop:
        stop = asyncio.Event()
        good = loop.submit(good_calls(fuzz_server.ws_url, stop))
        fuzz(fuzz_server, loop, endpoint)
        loop.loop.call_soon_threadsafe(stop.set)
        assert good.result(timeout=240) >= 1
        health = loop.run(idle(fuzz_server))
    assert health["status"] == "ok"
    assert httpx.get(fuzz_server.url + "/healthz").status_code == 200
    assert not errors.records, [(r.name, r.getMessage()[:300], r.exc_text and r.exc_text[-600:]) for r in errors.records]
