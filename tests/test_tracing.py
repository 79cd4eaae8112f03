"""Traces of a real call, read with the OpenTelemetry SDK's in-memory exporter: a call span, a turn span per reply under
it, and the stages of each turn under the turn."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from bench.wsclient import CallClient
from server.telemetry import configure_tracing

SPOKEN = {"vad_end", "asr", "retrieval", "llm_first_token", "tts_first_audio", "first_audio_sent"}


@pytest.fixture(scope="module")
def exported():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # the only provider this process sets: `talkline serve` sets one from OTEL_*
    yield exporter


def test_no_exporter_without_the_otlp_endpoint(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert configure_tracing() is False


@pytest.mark.asyncio
async def test_a_two_turn_call_has_call_turn_and_stage_spans(server, speech, exported):
    async with CallClient(server.ws_url, "skyways") as client:
        await client.wait_for(lambda got: client.agent_finals(), timeout=60)
        await client.stream(speech("What is the fee for a checked bag?"))
        await client.wait_for(lambda got: len(client.agent_finals()) >= 2, timeout=90)
        await client.send_json({"type": "text", "text": "And can I change my flight?"})
        await client.wait_for(lambda got: len(client.agent_finals()) >= 3, timeout=90)
        call_id = client.got.of("ready")[0]["call_id"]

    def ours() -> list:
        return [s for s in exported.get_finished_spans() if s.attributes.get("talkline.call_id") == call_id]

    for _ in range(100):
        if any(s.name == "call" for s in ours()):
            break
        await asyncio.sleep(0.1)
    spans = ours()
    (call,) = [s for s in spans if s.name == "call"]
    by_id = {s.context.span_id: s for s in exported.get_finished_spans()}
    root = call
    while root.parent is not None:
        root = by_id[root.parent.span_id]
    assert root.kind is SpanKind.SERVER and root is not call, "a call is traced under its connection's span (FastAPI's)"
    assert call.attributes["talkline.profile"] == "skyways"
    assert call.attributes["talkline.transport"] == "browser" and call.attributes["talkline.end_reason"]
    turns = sorted((s for s in spans if s.name == "turn"), key=lambda s: s.attributes["talkline.turn"])
    assert [t.attributes["talkline.turn"] for t in turns] == [0, 1, 2]
    assert all(t.parent.span_id == call.context.span_id and t.context.trace_id == call.context.trace_id for t in turns)
    stages = {
        t.attributes["talkline.turn"]: {s.name: s for s in spans if s.parent and s.parent.span_id == t.context.span_id} for t in turns
    }
    assert set(stages[0]) == {"tts_first_audio", "first_audio_sent"}, "the greeting is spoken, not answered"
    assert set(stages[1]) == SPOKEN
    assert set(stages[2]) == SPOKEN - {"vad_end", "asr"}, "a typed turn has no speech to detect or transcribe"
    for turn in turns:
        for stage in stages[turn.attributes["talkline.turn"]].values():
            assert turn.start_time <= stage.start_time <= stage.end_time <= turn.end_time, stage.name
    spoken = stages[1]
    assert spoken["vad_end"].end_time <= spoken["asr"].start_time + 1_000_000
    assert spoken["llm_first_token"].end_time <= spoken["first_audio_sent"].start_time


@pytest.mark.asyncio
async def test_requests_with_a_key_in_the_url_are_not_traced(server, exported):
    async with httpx.AsyncClient(base_url=server.url) as http:
        await http.get("/profiles", params={"token": "not-a-real-key"})
        await http.get("/profiles", params={"view": "plain"})
    queries = [s.attributes.get("url.query", "") for s in exported.get_finished_spans()]
    assert "view=plain" in queries and not any("not-a-real-key" in q for q in queries)
