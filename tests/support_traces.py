"""A trace backend for tests: an OTLP/gRPC receiver that keeps every span the mesh's processes export, and
answers questions about them (a trace's spans, a span's parent). It speaks the protocol a collector or Jaeger
speaks (`opentelemetry.proto`), so the processes export to it exactly as they would in production."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

KINDS = {
    trace_pb2.Span.SPAN_KIND_SERVER: "server",
    trace_pb2.Span.SPAN_KIND_PRODUCER: "producer",
    trace_pb2.Span.SPAN_KIND_CONSUMER: "consumer",
    trace_pb2.Span.SPAN_KIND_INTERNAL: "internal",
    trace_pb2.Span.SPAN_KIND_CLIENT: "client",
}


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    links: tuple[tuple[str, str], ...]  # (trace id, span id)
    attributes: dict[str, object]
    start_ns: int
    end_ns: int
    error: bool


def _value(value: common_pb2.AnyValue) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None


def _spans_of(request: trace_service_pb2.ExportTraceServiceRequest) -> Iterator[ReceivedSpan]:
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield ReceivedSpan(
                    service=str(resource.get("service.name", "")),
                    name=span.name,
                    kind=KINDS.get(span.kind, "unspecified"),
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(),
                    links=tuple((link.trace_id.hex(), link.span_id.hex()) for link in span.links),
                    attributes={a.key: _value(a.value) for a in span.attributes},
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    error=span.status.code == trace_pb2.Status.STATUS_CODE_ERROR,
                )


class TraceBackend(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[ReceivedSpan] = []

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        received = list(_spans_of(request))
        with self._lock:
            self._spans += received
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [span for span in self.spans() if span.trace_id == trace_id]


@contextmanager
def trace_backend(port: int) -> Iterator[TraceBackend]:
    """An OTLP/gRPC receiver on 127.0.0.1:`port` (plaintext) while the block runs."""
    backend = TraceBackend()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(backend, server)  # type: ignore[no-untyped-call]
    if server.add_insecure_port(f"127.0.0.1:{port}") != port:
        raise RuntimeError(f"the trace backend could not listen on 127.0.0.1:{port}")
    server.start()
    try:
        yield backend
    finally:
        server.stop(grace=None).wait()


def otlp_environment(port: int) -> dict[str, str]:
    """What points a jobmesh process at the receiver: the standard OTLP variables, a short batch delay."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
