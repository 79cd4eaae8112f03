"""OpenTelemetry spans: one per call, a `turn` span under it per reply, and under each turn one span per stage the turn
went through (vad_end, asr, retrieval, llm_first_token, tts_first_audio, first_audio_sent), built when the turn closes
from the times it recorded. With no tracer provider configured (`server/telemetry.py` sets one only when
OTEL_EXPORTER_OTLP_ENDPOINT is set) the API hands out non-recording spans and `record_turn` returns at once."""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.trace import Span

from pipeline.agent_turn import Turn

TRACER = trace.get_tracer("talkline.pipeline")
NO_SPAN = trace.INVALID_SPAN  # a call's span before it starts
STAGE_ORDER = ("vad_end", "asr", "retrieval", "llm_first_token", "tts_first_audio", "first_audio_sent")


def epoch_offset_ns() -> int:
    """What to add to time.monotonic() nanoseconds for nanoseconds since the epoch, as spans carry them."""
    return time.time_ns() - time.monotonic_ns()


def start_call_span(call_id: str, profile_id: str, transport: str) -> Span:
    attributes = {"talkline.call_id": call_id, "talkline.profile": profile_id, "talkline.transport": transport}
    return TRACER.start_span("call", attributes=attributes)


def record_turn(call_span: Span, call_id: str, profile_id: str, turn: Turn, ended: float) -> None:
    """The turn's span and its stage spans under the call's span; `ended` is the monotonic time the turn closed."""
    if not call_span.is_recording():
        return
    attributes = {"talkline.call_id": call_id, "talkline.profile": profile_id, "talkline.turn": turn.index or 0}
    offset = epoch_offset_ns()
    epoch_ns = lambda monotonic_s: int(monotonic_s * 1e9) + offset  # noqa: E731 - one offset: instants stay instants
    stages = sorted(turn.timeline.items(), key=lambda item: STAGE_ORDER.index(item[0]))
    start = min((s for _, (s, _) in stages), default=ended)
    span = TRACER.start_span(
        "turn",
        context=trace.set_span_in_context(call_span),
        start_time=epoch_ns(start),
        attributes={**attributes, "talkline.interrupted": turn.interrupted, "talkline.typed": turn.typed},
    )
    inside = trace.set_span_in_context(span)
    for name, (first, last) in stages:
        TRACER.start_span(name, context=inside, start_time=epoch_ns(first), attributes=attributes).end(end_time=epoch_ns(last))
    span.end(end_time=epoch_ns(ended))
