"""The http runner against a local `http.server`: 2xx succeeds, other statuses and network errors fail."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jobmesh.core.error_types import ErrorType
from jobmesh.executor.handlers import HandlerRegistry
from jobmesh.executor.outcomes import Stop, TargetOutcome
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.executor.redaction import MASK
from jobmesh.executor.runners import RunnerSettings, run_target
from jobmesh.executor.secrets import SecretSource, open_secret_source
from jobmesh.v1 import job_pb2, run_pb2
from tests.executor.support import RecordingIO, dispatched


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Site:
    url: str
    received: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)  # lets `/slow` answer
    answered_slowly: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def site() -> Iterator[Site]:
    """`/status/N` answers N with a small body; `/slow` answers once the test releases it."""
    received: list[Received] = []
    release, answered_slowly = threading.Event(), threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            received.append(Received(self.command, self.path, dict(self.headers), body))
            if self.path == "/slow":
                release.wait(30)
                answered_slowly.set()
            status = int(self.path.rsplit("/", 1)[1]) if self.path.startswith("/status/") else 200
            payload = f"answered {status}\nsecond line\n".encode()
            if self.path == "/echo":  # a server that repeats the credential it was sent
                payload = f"you sent {self.headers.get('Authorization')}\n".encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def do_PUT(self) -> None:
            self._answer()

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the requests are checked, not printed."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)  # shut down at once
    thread.start()
    try:
        yield Site(f"http://127.0.0.1:{server.server_address[1]}", received, release, answered_slowly)
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def call(
    http: job_pb2.Target.Http,
    timeout: float | None = None,
    *,
    secrets: SecretSource | None = None,
    namespace: str = "",
) -> tuple[TargetOutcome, RecordingIO]:
    async def scenario() -> tuple[TargetOutcome, RecordingIO]:
        io = RecordingIO()
        settings = RunnerSettings(HandlerRegistry(), http_timeout=5.0, policy=ExecutionPolicy.unrestricted())
        if secrets is not None:
            settings = dataclasses.replace(settings, secrets=secrets)
        run = dispatched(job_pb2.Target(http=http), timeout=timeout)
        run.namespace = namespace
        return await run_target(run, io, Stop(), settings), io

    return asyncio.run(scenario())


def test_2xx_succeeds_with_method_headers_and_body(site: Site) -> None:
    http = job_pb2.Target.Http(url=f"{site.url}/status/201", headers={"X-Token": "t1"}, body=b'{"a": 1}')
    outcome, io = call(http)
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    [request] = site.received
    assert (request.method, request.path, request.body) == ("POST", "/status/201", b'{"a": 1}')
    assert request.headers["X-Token"] == "t1"
    assert io.texts(run_pb2.LOG_STREAM_SYSTEM) == [f"POST {site.url}/status/201 -> 201 Created"]
    assert io.texts(run_pb2.LOG_STREAM_STDOUT) == ["answered 201", "second line"]


def test_the_call_carries_the_runs_name_as_its_idempotency_key_over_the_jobs_own(site: Site) -> None:
    http = job_pb2.Target.Http(url=f"{site.url}/status/200", headers={"idempotency-key": "the job's own"})
    outcome, _ = call(http)
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    [request] = site.received
    keys = {name: value for name, value in request.headers.items() if name.lower() == "idempotency-key"}
    assert list(keys) == ["Idempotency-Key"]
    assert re.fullmatch(r"jobs/j\d+/runs/r\d+", keys["Idempotency-Key"])


def test_other_methods(site: Site) -> None:
    outcome, _ = call(job_pb2.Target.Http(method="get", url=f"{site.url}/status/200"))
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert [(r.method, r.body) for r in site.received] == [("GET", b"")]


def test_non_2xx_fails_with_the_status(site: Site) -> None:
    outcome, io = call(job_pb2.Target.Http(url=f"{site.url}/status/500"))
    assert outcome.state == run_pb2.RUN_STATE_FAILED
    assert outcome.error_type == "HttpStatus"
    assert "500" in outcome.error_message
    assert io.texts(run_pb2.LOG_STREAM_STDOUT) == ["answered 500", "second line"]


def test_redirects_are_not_followed(site: Site) -> None:
    outcome, _ = call(job_pb2.Target.Http(url=f"{site.url}/status/302"))
    assert (outcome.state, outcome.error_type) == (run_pb2.RUN_STATE_FAILED, "HttpStatus")


def test_network_errors_and_bad_urls_are_http_errors(site: Site) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        port = closed.server_address[1]  # bound, then closed: nothing listens there
    for url in (f"http://127.0.0.1:{port}/", "file:///etc/passwd", "http://"):
        outcome, _ = call(job_pb2.Target.Http(url=url))
        assert (outcome.state, outcome.error_type) == (run_pb2.RUN_STATE_FAILED, "HttpError"), url


def test_execution_timeout_abandons_the_call(site: Site) -> None:
    outcome, _ = call(job_pb2.Target.Http(url=f"{site.url}/slow"), timeout=0.2)
    assert (outcome.state, outcome.error_type) == (run_pb2.RUN_STATE_TIMED_OUT, "Timeout")
    assert not site.answered_slowly.is_set()  # it did not wait for the answer


TEAM_TOKEN = "team-a-token-7d1e"


def test_references_in_headers_and_body_send_the_namespaces_value_and_log_none(site: Site) -> None:
    secrets = open_secret_source("env:SECRET_", {"SECRET_TOKEN": "the-default-namespace-token"})
    http = job_pb2.Target.Http(
        url=f"{site.url}/echo",
        headers={"Authorization": "Bearer secret://TOKEN"},
        body=b'{"token": "secret://TOKEN", "plain": "secret"}',
    )
    outcome, io = call(http, secrets=secrets)
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED, outcome
    [request] = site.received
    assert request.headers["Authorization"] == "Bearer the-default-namespace-token"
    assert request.body == b'{"token": "the-default-namespace-token", "plain": "secret"}'
    assert io.texts(run_pb2.LOG_STREAM_STDOUT) == [f"you sent Bearer {MASK}"]  # the echo, redacted


def test_a_webhook_resolves_only_its_own_namespaces_secrets(site: Site, tmp_path: Path) -> None:
    path = tmp_path / "secrets"
    path.write_text(f"TOKEN=default-token\nteam-a/TOKEN={TEAM_TOKEN}\nteam-b/ONLY_B=b-token\n")
    path.chmod(0o600)
    secrets = open_secret_source(f"file:{path}", {})
    own = job_pb2.Target.Http(url=f"{site.url}/echo", headers={"Authorization": "Bearer secret://TOKEN"})
    outcome, _ = call(own, secrets=secrets, namespace="team-a")
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert site.received[-1].headers["Authorization"] == f"Bearer {TEAM_TOKEN}"
    for header in ("secret://ONLY_B", "secret://team-b/ONLY_B"):  # B's, plain or qualified
        theirs = job_pb2.Target.Http(url=f"{site.url}/echo", headers={"Authorization": header})
        outcome, _ = call(theirs, secrets=secrets, namespace="team-a")
        assert (outcome.state, outcome.error_type) == (
            run_pb2.RUN_STATE_FAILED,
            ErrorType.SECRET_NOT_FOUND,
        ), header
        assert "b-token" not in outcome.error_message
    assert len(site.received) == 1  # nothing was sent for B's
