"""An OTLP/gRPC trace receiver that counts the spans it is sent and keeps none: what the mesh's processes
export to under `benchmarks.pipeline --otel`, so that their cost of tracing is measured and a backend's is
not (it runs in the benchmark's own process, counted with the load generator)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class SpanCounter(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans = 0

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        count = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
        with self._lock:
            self.spans += count
        return trace_service_pb2.ExportTraceServiceResponse()


@contextmanager
def span_sink(port: int) -> Iterator[SpanCounter]:
    """The receiver on 127.0.0.1:`port` (plaintext) while the block runs."""
    counter = SpanCounter()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(counter, server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        yield counter
    finally:
        server.stop(grace=None).wait()


def otlp_environment(port: int) -> dict[str, str]:
    """The standard variables that point a jobmesh process's traces at the sink."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", "OTEL_EXPORTER_OTLP_INSECURE": "true"}
