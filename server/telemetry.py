"""Trace export: with OTEL_EXPORTER_OTLP_ENDPOINT set (the standard variable; OTEL_SERVICE_NAME and the other OTEL_*
variables apply too), the pipeline's call and turn spans go out over OTLP/HTTP in batches; unset, nothing is set up
and the spans cost nothing."""

from __future__ import annotations

import logging
import os

from opentelemetry import trace

log = logging.getLogger(__name__)


def configure_tracing() -> bool:
    """Install an OTLP exporting tracer provider when OTEL_EXPORTER_OTLP_ENDPOINT is set; True if it did."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if not endpoint:
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "talkline")}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    log.info("traces go to %s over OTLP/HTTP", endpoint)
    return True
