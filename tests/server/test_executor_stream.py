"""An executor's stream against the server's services, on every store: a write that fails ends the stream
(the executor reconnects and sends again) rather than being dropped, text a database refuses is stored, and
heartbeats are answered while the stream's result writes hang."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import pytest

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.handlers import HandlerContext, HandlerRegistry
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.executor.runtime import Executor
from jobmesh.server.app import Services, build_services
from jobmesh.server.config import ServerConfig
from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.support import SUITE_LOOP_LAG, silence_when_stopped


class FlakyStore:
    """The store, but `finish_attempts` waits while `writes` is clear and then fails as if the database had
    gone away, `failures` times; executor sessions are not renewed while `sessions_down`."""

    def __init__(self, store: SchedulerStore) -> None:
        self._store = store
        self.failures = 0
        self.sessions_down = False
        self.writes = threading.Event()
        self.writes.set()

    def renew_sessions(
        self, executor_ids: Sequence[str], server_id: str, now: datetime, *, stale_after: timedelta
    ) -> frozenset[str]:
        if self.sessions_down:
            raise StoreUnavailable("injected by the test")
        return self._store.renew_sessions(executor_ids, server_id, now, stale_after=stale_after)

    def finish_attempts(
        self, refs: Sequence[AttemptRef], decide: Callable[[Dispatchable], AttemptEnd | None]
    ) -> list[tuple[Dispatchable, AttemptEnd]]:
        assert self.writes.wait(30), "the test never let the writes through"
        if self.failures > 0:
            self.failures -= 1
            raise StoreUnavailable("injected by the test")
        return self._store.finish_attempts(refs, decide)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@dataclass
class Mesh:
    names: str
    flaky: FlakyStore


@pytest.fixture(scope="module")
def mesh(store: SchedulerStore) -> Mesh:
    return Mesh(f"memory://stream-{uuid.uuid4().hex[:8]}", FlakyStore(store))


@pytest.fixture(scope="module")
def grpc_servicer(mesh: Mesh) -> Iterator[Services]:
    queue, signals = open_queue(mesh.names), open_signals(mesh.names)
    store = cast(SchedulerStore, mesh.flaky)
    # Writes held by a test make the stream lag: creates must not be refused for it here (test_overload.py).
    config = ServerConfig(
        listen="127.0.0.1:0", max_stream_lag=timedelta(minutes=5), max_loop_lag=SUITE_LOOP_LAG
    )
    services = build_services(config, store, queue, signals)
    yield services
    services.close()
    signals.close()


def poison(context: HandlerContext) -> None:
    context.log("a NUL \x00 and a lone surrogate \udcff in a log line")
    context.report_progress(0.5, "progress \x00 \udcff")
    raise ValueError("an error \x00 with \udcff in it")


def succeed(context: HandlerContext) -> None:
    context.log("done")


@pytest.fixture(scope="module")
def executor(api: Api, mesh: Mesh, grpc_addr: str) -> Iterator[None]:
    """A real executor, in a thread of its own, taking runs from the services' queue."""
    config = ExecutorConfig(
        server=grpc_addr,
        queue_url=mesh.names,
        signals_url=mesh.names,
        executor_id=f"stream-test-{uuid.uuid4().hex[:6]}",
        reconnect_max=timedelta(milliseconds=200),
        drain_grace=timedelta(seconds=1),
        policy=ExecutionPolicy.unrestricted(),
    )
    handlers = HandlerRegistry({"poison": poison, "succeed": succeed})
    loop = asyncio.new_event_loop()
    worker = Executor(config, handlers)
    thread = threading.Thread(target=loop.run_until_complete, args=(worker.run(),), daemon=True)
    thread.start()
    yield
    loop.call_soon_threadsafe(worker.drain, timedelta(0))
    thread.join(timeout=20)
    loop.close()


def _run_handler(api: Api, name: str, **policy: Any) -> str:
    job = job_pb2.Job(
        schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()),
        target=job_pb2.Target(handler=job_pb2.Target.Handler(name=name)),
        retry_policy=job_pb2.RetryPolicy(**policy),
    )
    return str(api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job)).run.name)


def _settled(api: Api, name: str, done: Callable[[run_pb2.Run], bool], timeout: float = 30) -> run_pb2.Run:
    deadline = time.monotonic() + timeout
    while True:
        run: run_pb2.Run = api.search.GetRun(search_service_pb2.GetRunRequest(name=name)).run
        if done(run):
            return run
        assert time.monotonic() < deadline, f"{name} is still {run_pb2.RunState.Name(run.state)}"
        time.sleep(0.1)


@pytest.mark.usefixtures("executor")
def test_a_result_whose_write_fails_ends_the_stream_and_is_sent_again(api: Api, mesh: Mesh) -> None:
    mesh.flaky.failures = 2
    name = _run_handler(api, "succeed")
    run = _settled(api, name, lambda r: r.state == run_pb2.RUN_STATE_SUCCEEDED)
    assert mesh.flaky.failures == 0  # both failed writes happened, and the third was acknowledged
    assert run.attempt == 1


@pytest.mark.usefixtures("executor")
def test_text_a_database_refuses_is_stored_replaced(api: Api) -> None:
    name = _run_handler(api, "poison")
    run = _settled(api, name, lambda r: r.state == run_pb2.RUN_STATE_FAILED)
    assert run.error.type == "ValueError"
    assert run.error.message == "an error \ufffd with \ufffd in it"
    lines = api.search.TailRunLogs(search_service_pb2.TailRunLogsRequest(name=name))
    texts = [line.text for response in lines for line in response.lines]
    assert "a NUL \ufffd and a lone surrogate \ufffd in a log line" in texts


def _run_command(api: Api, script: str, heartbeat_timeout: int) -> str:
    job = job_pb2.Job(target=job_pb2.Target(command=job_pb2.Target.Command(argv=["sh", "-c", script])))
    job.schedule.immediate.SetInParent()
    job.heartbeat_timeout.FromSeconds(heartbeat_timeout)
    return str(api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job)).run.name)


@pytest.mark.timing
@pytest.mark.usefixtures("executor")
def test_renewed_sessions_keep_an_attempt_past_its_heartbeat_timeout_and_without_them_it_is_stopped(
    api: Api, mesh: Mesh
) -> None:
    """Heartbeats write nothing per attempt: their answers wait for the session's renewal. Renewed, a 3.5 s
    command outlives its 3 s heartbeat timeout; not renewed (the database refuses), its executor hears no
    answer and stops it before the sweeper could take it for lost."""
    kept = _run_command(api, "sleep 3.5", heartbeat_timeout=3)
    assert _settled(api, kept, lambda r: r.state in TERMINAL).state == run_pb2.RUN_STATE_SUCCEEDED
    mesh.flaky.sessions_down = True
    try:
        began = time.monotonic()
        cut = _run_command(api, "sleep 60", heartbeat_timeout=3)
        run = _settled(api, cut, lambda r: r.state in TERMINAL, timeout=10)
        assert (run.state, run.error.type) == (run_pb2.RUN_STATE_FAILED, "ContactLost")
        assert time.monotonic() - began < 5
        assert silence_when_stopped(run.error.message) < 3.0  # by the executor's clock, its decision
    finally:
        mesh.flaky.sessions_down = False


@pytest.mark.usefixtures("executor")
def test_heartbeats_are_answered_while_the_streams_result_writes_hang(api: Api, mesh: Mesh) -> None:
    """Results wait behind a write that hangs, one message after another, as under a slow database; the
    heartbeats of a 4 s command with a 3 s timeout pass them, so it is neither stopped nor swept."""
    mesh.flaky.writes.clear()
    try:
        quick = []
        for _ in range(6):  # results in several messages: more than a stream handles at once
            quick.append(_run_command(api, "echo quick", heartbeat_timeout=15))
            time.sleep(0.3)
        slow = _run_command(api, "sleep 4", heartbeat_timeout=3)
        _settled(api, slow, lambda r: r.state == run_pb2.RUN_STATE_RUNNING)
        time.sleep(4.5)  # its result is written no sooner than the writes are let through
    finally:
        mesh.flaky.writes.set()
    run = _settled(api, slow, lambda r: r.state in TERMINAL)
    assert (run.state, run.attempt, run.error.type) == (run_pb2.RUN_STATE_SUCCEEDED, 1, "")
    for name in quick:
        assert _settled(api, name, lambda r: r.state in TERMINAL).state == run_pb2.RUN_STATE_SUCCEEDED


TERMINAL = (run_pb2.RUN_STATE_SUCCEEDED, run_pb2.RUN_STATE_FAILED, run_pb2.RUN_STATE_CANCELLED)
