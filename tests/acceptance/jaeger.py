"""Jaeger all-in-one as the trace backend of acceptance tests (pinned and built by tools/install_jaeger.sh):
spans kept in memory, OTLP/gRPC in and the query API on loopback ports, stopped after the test. What the
tests know of a trace is what Jaeger's query API answers (`/api/traces/{id}`, `/api/traces?service=...`)."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.acceptance.processes import REPO, free_port
from tests.support import eventually, missing

JAEGER = REPO / ".jobmesh" / "tools" / "bin" / "jaeger-all-in-one"
INSTALLER = REPO / "tools" / "install_jaeger.sh"
# Every listener of the all-in-one, each moved to a free loopback port (its defaults are fixed ports on all
# interfaces, which two tests, or two checkouts, would share).
_LISTENERS = (
    "collector.otlp.grpc.host-port",
    "collector.otlp.http.host-port",
    "collector.grpc-server.host-port",
    "collector.http-server.host-port",
    "query.http-server.host-port",
    "query.grpc-server.host-port",
    "admin.http.host-port",
)


@dataclass(frozen=True)
class FoundSpan:
    """A span as the backend stores it."""

    service: str
    name: str
    kind: str  # server, producer, consumer, client or internal
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    links: tuple[tuple[str, str], ...]  # (trace id, span id)
    attributes: dict[str, object]
    start_us: int
    end_us: int
    error: bool


def _hex_id(value: str, digits: int) -> str:
    """Jaeger drops the high half of a 128-bit trace id when it is zero: ids are compared at full width."""
    return f"{int(value, 16):0{digits}x}"


def _spans_of(trace: dict[str, Any]) -> Iterator[FoundSpan]:
    processes = trace["processes"]
    for span in trace["spans"]:
        tags = {tag["key"]: tag["value"] for tag in span.get("tags") or []}
        references = span.get("references") or []
        parents = [r for r in references if r["refType"] == "CHILD_OF" and r["traceID"] == span["traceID"]]
        links = [r for r in references if r not in parents[:1]]
        yield FoundSpan(
            service=processes[span["processID"]]["serviceName"],
            name=span["operationName"],
            kind=str(tags.pop("span.kind", "internal")),
            trace_id=_hex_id(span["traceID"], 32),
            span_id=_hex_id(span["spanID"], 16),
            parent_id=_hex_id(parents[0]["spanID"], 16) if parents else "",
            links=tuple((_hex_id(r["traceID"], 32), _hex_id(r["spanID"], 16)) for r in links),
            attributes=tags,
            start_us=span["startTime"],
            end_us=span["startTime"] + span["duration"],
            error=tags.get("error") is True,
        )


@dataclass(frozen=True)
class Jaeger:
    otlp_port: int
    query_url: str

    def environment(self) -> dict[str, str]:
        """What points a jobmesh process at it: the standard OTLP variables, and a short batch delay."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{self.otlp_port}",
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }

    def _get(self, path: str, **query: str) -> list[dict[str, Any]]:
        url = f"{self.query_url}{path}?{urllib.parse.urlencode(query)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return []
            raise
        data: list[dict[str, Any]] = body["data"] or []
        return data

    def trace(self, trace_id: str) -> list[FoundSpan]:
        """The spans of one trace (none while the backend has none), as exported: without the query's
        adjustments (`raw`)."""
        found = self._get(f"/api/traces/{trace_id}", raw="true")
        return [span for trace in found for span in _spans_of(trace)]

    def search(
        self, service: str, operation: str = "", tags: dict[str, str] | None = None, limit: int = 1000
    ) -> list[FoundSpan]:
        """Every span of the traces that hold a span of `service` named `operation` (any name when "") with
        the `tags` (attributes) given, among the last two days'."""
        query = {"service": service, "limit": str(limit), "raw": "true"}
        if operation:
            query["operation"] = operation
        if tags:
            query["tags"] = json.dumps(tags)
        return [span for trace in self._get("/api/traces", **query) for span in _spans_of(trace)]

    def services(self) -> list[str]:
        return [str(name) for name in self._get("/api/services")]


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def built_jaeger() -> Path:
    """The binary: a failure under CI when it is not built, a skip elsewhere."""
    if not JAEGER.exists():
        missing(f"{JAEGER} is missing: `make install` builds it ({INSTALLER.relative_to(REPO)})")
    return JAEGER


@contextlib.contextmanager
def jaeger(folder: Path) -> Iterator[Jaeger]:
    """Jaeger all-in-one while the block runs, its log in `folder` (see `built_jaeger`)."""
    binary = built_jaeger()
    ports = {listener: free_port() for listener in _LISTENERS}
    log_path = folder / "jaeger.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(binary), *(f"--{listener}=127.0.0.1:{port}" for listener, port in ports.items())],
            env={
                "SPAN_STORAGE_TYPE": "memory",
                # It traces itself over OTLP (to localhost:4317 by default): no span, and only to itself.
                "OTEL_TRACES_SAMPLER": "always_off",
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{ports['collector.otlp.grpc.host-port']}",
                "PATH": "/usr/bin:/bin",
            },
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    backend = Jaeger(
        otlp_port=ports["collector.otlp.grpc.host-port"],
        query_url=f"http://127.0.0.1:{ports['query.http-server.host-port']}",
    )
    try:

        def ready() -> bool:
            assert process.poll() is None, f"jaeger exited: {log_path.read_text()[-3000:]}"
            if not _listening(backend.otlp_port):
                return False
            try:
                backend.services()
            except OSError:
                return False
            return True

        eventually(ready, 60, "jaeger to answer")
        yield backend
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
