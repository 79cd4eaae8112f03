"""Prometheus metrics for calls and per-stage latency, in a registry owned by one app."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

STAGE_BUCKETS = (0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.active_calls = Gauge("talkline_active_calls", "Calls in progress", registry=self.registry)
        self.calls = Counter("talkline_calls", "Calls started", ["transport"], registry=self.registry)
        self.turns = Counter("talkline_turns", "Turns completed", ["interrupted"], registry=self.registry)
        self.stage_latency = Histogram(
            "talkline_stage_latency_seconds",
            "Per-turn latency of each stage (asr, llm_ttft, tts_ttfb, voice_to_voice)",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self.preemptive = Counter(
            "talkline_preemptive_replies", "Replies started at a pause, by outcome (used, discarded)", ["outcome"], registry=self.registry
        )
        self.errors = Counter("talkline_errors", "Errors sent to clients", ["code"], registry=self.registry)
        self.fact_readouts = Counter(
            "talkline_fact_readouts", "Replies the model declined whose closest fact was said instead", registry=self.registry
        )
        self.tool_calls = Counter(
            "talkline_tool_calls",
            "Tool calls by tool and outcome (ok, error, timeout, malformed, over_limit)",
            ["tool", "outcome"],
            registry=self.registry,
        )

    def observe_turn(self, latencies_ms: dict[str, float | None], interrupted: bool) -> None:
        self.turns.labels(interrupted=str(interrupted).lower()).inc()
        for stage, ms in latencies_ms.items():
            if ms is not None:
                self.stage_latency.labels(stage=stage).observe(ms / 1000)

    def active(self) -> int:
        return int(self.registry.get_sample_value("talkline_active_calls") or 0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
