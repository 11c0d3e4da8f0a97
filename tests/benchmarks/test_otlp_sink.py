"""The receiver `benchmarks.pipeline --otel` exports the mesh's spans to: it counts what the SDK's OTLP
exporter sends it, by the same variables the processes are given."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from benchmarks.otlp_sink import otlp_environment, span_sink
from benchmarks.pipeline import free_port, parse


def test_the_sink_counts_the_spans_exported_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    for name, value in otlp_environment(port).items():
        monkeypatch.setenv(name, value)
    with span_sink(port) as sink:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
        for index in range(3):
            provider.get_tracer("test").start_span(f"span {index}").end()
        provider.shutdown()

        assert sink.spans == 3


def test_otel_is_an_option_of_the_pipeline() -> None:
    assert parse(["--otel"]).otel is True
    assert parse([]).otel is False
