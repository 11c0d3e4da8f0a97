"""Run identity on a real `jobmesh dev`, and on the production mesh (server, watcher and executor processes on
PostgreSQL, Kafka and Redis): a command (in the executor's sandbox), a handler and a webhook each fail their
first attempt and succeed on the retry, and see the same identity, the run's name, both times: `JOBMESH_RUN`
with `JOBMESH_ATTEMPT` 1 then 2, `ctx.run` with `ctx.attempt`, the `Idempotency-Key` header."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from jobmesh.client import (
    Client,
    HandlerContext,
    HandlerRegistry,
    LogStream,
    Run,
    RunState,
    command,
    handler,
    immediately,
    retry_policy,
)
from jobmesh.client import http as http_target
from jobmesh.v1 import job_pb2
from tests.acceptance.mesh import Mesh, warm_up
from tests.acceptance.processes import REPO, free_port
from tests.acceptance.test_dev import dev

pytestmark = pytest.mark.processes

handlers = HandlerRegistry()  # loaded by the `jobmesh dev` and the executor below (`--handlers`)


@handlers.handler("identity.fail-first")
def fail_first(context: HandlerContext) -> None:
    context.log(f"{context.run} {context.attempt}")
    if context.attempt == 1:
        raise RuntimeError("the first attempt fails")


ONE_RETRY = retry_policy(2, initial_backoff=timedelta(milliseconds=100))
WAIT = timedelta(seconds=60)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    address = f"127.0.0.1:{free_port()}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(REPO))  # for `--handlers` to import this module
        with dev(tmp_path_factory.mktemp("dev"), address, "--handlers", f"{__name__}:handlers"):
            patch.undo()
            with Client(address) as connected:
                yield connected


def _retried_run(client: Client, target: job_pb2.Target, queue: str = "") -> Run:
    created = client.create_job(immediately(), target, retry_policy=ONE_RETRY, queue=queue)
    assert created.run is not None
    run = client.wait_for_run(created.run.name, WAIT)
    assert run.state == RunState.SUCCEEDED, run
    assert run.attempt == 2
    return run


def _stdout_by_attempt(client: Client, run: Run) -> list[tuple[int, str]]:
    return [
        (line.attempt, line.text)
        for line in client.tail_run_logs(run.name, timeout=WAIT)
        if line.stream == LogStream.STDOUT
    ]


def test_a_command_sees_the_same_run_and_its_attempt_on_the_retry(client: Client) -> None:
    script = 'echo "$JOBMESH_RUN $JOBMESH_ATTEMPT"; [ "$JOBMESH_ATTEMPT" -ge 2 ]'
    run = _retried_run(client, command(["sh", "-c", script]))
    assert _stdout_by_attempt(client, run) == [(1, f"{run.name} 1"), (2, f"{run.name} 2")]


def test_a_handler_sees_the_same_run_and_its_attempt_on_the_retry(client: Client) -> None:
    run = _retried_run(client, handler("identity.fail-first"))
    seen = [(attempt, text) for attempt, text in _stdout_by_attempt(client, run) if text.startswith("jobs/")]
    assert seen == [(1, f"{run.name} 1"), (2, f"{run.name} 2")]  # the rest: the first one's traceback


class _FailFirst(http.server.BaseHTTPRequestHandler):
    """Answers 503 to the first call and 204 after, keeping each call's Idempotency-Key."""

    keys: list[str | None] = []

    def do_POST(self) -> None:
        self.keys.append(self.headers.get("Idempotency-Key"))
        self.send_response(503 if len(self.keys) == 1 else 204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[str | None]]]:
    keys: list[str | None] = []
    recording = type("Recording", (_FailFirst,), {"keys": keys})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), recording)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook", keys
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_a_webhook_gets_the_same_idempotency_key_on_the_retry(
    client: Client, webhook: tuple[str, list[str | None]]
) -> None:
    url, keys = webhook
    run = _retried_run(client, http_target(url))
    assert keys == [run.name, run.name]


def test_the_identity_is_one_per_run(client: Client) -> None:
    """Two runs of one job: two identities."""
    created = client.create_job(immediately(), command(["sh", "-c", 'echo "$JOBMESH_RUN"']))
    assert created.run is not None
    first = client.wait_for_run(created.run.name, WAIT)
    second = client.wait_for_run(client.run_job_now(created.job.name).name, WAIT)
    seen = [_stdout_by_attempt(client, run) for run in (first, second)]
    assert seen == [[(1, first.name)], [(1, second.name)]]
    assert first.name != second.name


@pytest.mark.postgres
@pytest.mark.kafka
@pytest.mark.redis
def test_on_the_production_mesh_each_target_sees_the_same_identity_across_a_retry(
    mesh: Mesh, webhook: tuple[str, list[str | None]]
) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.env["PYTHONPATH"] = str(REPO)  # for `--handlers` to import this module
    mesh.executor(server, args=["--handlers", f"{__name__}:handlers", "--allowed-networks", "any"])
    warm_up(mesh, *mesh.stubs(server))
    url, keys = webhook
    script = 'echo "$JOBMESH_RUN $JOBMESH_ATTEMPT"; [ "$JOBMESH_ATTEMPT" -ge 2 ]'
    with Client(server.address) as client:
        ran = _retried_run(client, command(["sh", "-c", script]), mesh.queue)
        handled = _retried_run(client, handler("identity.fail-first"), mesh.queue)
        called = _retried_run(client, http_target(url), mesh.queue)
        assert _stdout_by_attempt(client, ran) == [(1, f"{ran.name} 1"), (2, f"{ran.name} 2")]
        seen = [line for line in _stdout_by_attempt(client, handled) if line[1].startswith("jobs/")]
        assert seen == [(1, f"{handled.name} 1"), (2, f"{handled.name} 2")]
    assert keys == [called.name, called.name]
