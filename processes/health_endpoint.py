"""HTTP `/livez` and `/readyz` of a process, on a port of its own (`--health-listen`), for a supervisor or a
load balancer that speaks HTTP rather than gRPC health; and `/metrics`, its Prometheus metrics
(`processes.metrics_exposition`), for a scraper.

`/livez` answers 200 while the process's event loop beats, 503 when it is stuck. `/readyz` answers 200 when
every dependency the process expects is reachable, else 503, with a JSON body naming each dependency, up or
down, and why. The server runs in a thread of its own (the standard library's threading HTTP server), so it
answers even while the event loop is busy, and says so rather than timing out.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jobmesh.core.readiness import Probes, Readiness
from jobmesh.processes.metrics_exposition import CONTENT_TYPE, metrics_text

LIVEZ = "/livez"
READYZ = "/readyz"
METRICS = "/metrics"


class HealthEndpoint:
    """Serves `readiness` on `listen` (HOST:PORT; port 0 picks one) until closed. `share_port`: bind with
    SO_REUSEPORT, so that the workers of `jobmesh server --workers N` each serve the same port."""

    def __init__(self, readiness: Readiness, listen: str, *, share_port: bool = False) -> None:
        host, port = listen.rsplit(":", 1)
        handler = _handler_for(readiness)
        self._server = _Server((host.strip("[]"), int(port)), handler, share_port=share_port)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="health-http", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, share_port: bool
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._share_port = share_port
        super().__init__(address, handler)

    def server_bind(self) -> None:
        if self._share_port:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()


def _handler_for(readiness: Readiness) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == LIVEZ:
                self._answer(readiness.live(), {"live": readiness.live()})
            elif path == READYZ:
                ready = readiness.ready()
                self._answer(ready, {"ready": ready, "dependencies": _dependencies(readiness)})
            elif path == METRICS:
                self._metrics()
            else:
                self.send_error(404, f"only {LIVEZ}, {READYZ} and {METRICS} are served here")

        def _metrics(self) -> None:
            data = metrics_text()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def _answer(self, ok: bool, body: dict[str, object]) -> None:
            data = json.dumps({"process": readiness.process, **body}).encode()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            """Probes come every few seconds: not logged."""

    return Handler


def _dependencies(readiness: Readiness) -> list[dict[str, object]]:
    return [
        {"name": state.name, "up": state.up, "detail": state.detail, "since": state.since}
        for state in readiness.states()
    ]


@contextlib.asynccontextmanager
async def health_served(
    readiness: Readiness,
    checks: dict[str, Callable[[], None]],
    listen: str | None,
    *,
    share_port: bool = False,
) -> AsyncIterator[Probes]:
    """Probes `checks` and beats the loop while inside, and serves `/livez` and `/readyz` on `listen` (None:
    not served), printing where."""
    probes = Probes(readiness, checks)
    probes.start()
    endpoint = None
    try:
        if listen is not None:
            endpoint = HealthEndpoint(readiness, listen, share_port=share_port)
            host = listen.rsplit(":", 1)[0]
            print(
                f"  health: http://{host}:{endpoint.port}{READYZ} and {LIVEZ}, metrics {METRICS}", flush=True
            )
        await probes.first_answers()
        yield probes
    finally:
        if endpoint is not None:
            endpoint.close()
        await probes.stop()
