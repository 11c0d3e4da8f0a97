"""PostgreSQL stopped as a crash stops it (`pg_ctl -m immediate`) under a running mesh, and started again.

The module runs on a PostgreSQL, a Kafka and a Redis of its own (`private_services_with_database`), never
the suite's, which tests on other workers use meanwhile; the database is always started again, whatever
happens.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2
from jobmesh.v1.job_service_pb2_grpc import JobServiceStub
from jobmesh.v1.search_service_pb2_grpc import SearchServiceStub
from tests.acceptance.mesh import (
    STAMP,
    TERMINAL,
    Mesh,
    Process,
    at,
    command_job,
    create,
    get_run,
    read_times,
    runs_of,
    wait_for_run,
    warm_up,
)
from tests.acceptance.processes import REPO, free_port
from tests.support import eventually, fresh_postgres_database

pytestmark = [pytest.mark.postgres, pytest.mark.kafka, pytest.mark.redis, pytest.mark.processes]
# The bound: health says what is away within 5 s of the database's stop, and of its return.
HEALTH_WITHIN = 5.0
OUTAGE = 12.0  # seconds the database stays down in a test that counts what happens meanwhile
OUTAGE_RUNS = 10  # runs due during it, one a second
# A dependency logs one line when it goes and one when it returns, not one per retry: in an outage, whatever
# its length, each of a process's leases, loops, streams and readiness checks says so once. What it says it of
# is the message up to its verb; the error that follows may differ between processes and tries.
WARNING_SUBJECT = re.compile(r"\] (\S+): (.*?\b(?:failed|unreachable|refused|lost|cannot)\b)")
LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")
HEARTBEAT_TIMEOUT = 5  # seconds: an attempt's, shorter than the outages here


@pytest.fixture(scope="module")
def database(private_services_with_database: dict[str, str]) -> Iterator[str]:
    with fresh_postgres_database(private_services_with_database["JOBMESH_DATABASE_URL"]) as url:
        yield url


@pytest.fixture
def services(private_services_with_database: dict[str, str]) -> dict[str, str]:
    return private_services_with_database


def _postgres(action: str, services: dict[str, str]) -> None:
    script = str(REPO / "tools/services/services.sh")
    subprocess.run(
        ["bash", script, "postgres", action, services["JOBMESH_SERVICES_DIR"]], check=True, timeout=90
    )


@contextlib.contextmanager
def postgres_stopped(services: dict[str, str]) -> Iterator[None]:
    _postgres("stop", services)
    try:
        yield
    finally:
        _postgres("start", services)


def readyz(port: int) -> tuple[int, dict[str, Any]] | None:
    """The status and body of `/readyz` on `port`; None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())
    except OSError:
        return None


def grpc_health(process: Process) -> int | None:
    with grpc.insecure_channel(process.address) as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return None
        return int(answer.status)


def _health_ports(mesh: Mesh) -> tuple[Process, dict[str, int]]:
    """A server, a watcher and an executor, each serving HTTP health on a port of its own."""
    ports = {name: free_port() for name in ("server", "watcher", "executor")}
    server = mesh.server(args=["--health-listen", f"127.0.0.1:{ports['server']}"])
    mesh.env["JOBMESH_HEALTH_LISTEN"] = f"127.0.0.1:{ports['watcher']}"
    mesh.watcher()
    mesh.env["JOBMESH_HEALTH_LISTEN"] = f"127.0.0.1:{ports['executor']}"
    mesh.executor(server)
    del mesh.env["JOBMESH_HEALTH_LISTEN"]
    return server, ports


def _create_refusal(mesh: Mesh, server: Process) -> grpc.RpcError:
    """The error a create gets from `server` (a create made while the database is away is refused: the
    caller keeps it, and knows it was not taken)."""
    jobs, _ = mesh.stubs(server)
    try:
        create(jobs, command_job(mesh.queue, "true"))
    except grpc.RpcError as error:
        return error
    raise AssertionError("a create succeeded with the database away")


def _retry_delay(error: grpc.RpcError) -> timedelta | None:
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            delay: timedelta = info.retry_delay.ToTimedelta()
            return delay
    return None


def _all_say(ports: dict[str, int], status: int) -> bool:
    return all((answer := readyz(port)) is not None and answer[0] == status for port in ports.values())


@pytest.mark.timing
def test_health_goes_not_ready_when_the_database_stops_and_ready_when_it_returns(
    mesh: Mesh, services: dict[str, str]
) -> None:
    server, ports = _health_ports(mesh)
    eventually(lambda: _all_say(ports, 200), 60, "the server, the watcher and the executor ready")
    assert grpc_health(server) == health_pb2.HealthCheckResponse.SERVING

    with postgres_stopped(services):
        stopped = time.monotonic()
        eventually(lambda: _all_say(ports, 503), HEALTH_WITHIN + 1, "every process not ready")
        not_ready_after = time.monotonic() - stopped
        assert grpc_health(server) == health_pb2.HealthCheckResponse.NOT_SERVING
        answer = readyz(ports["server"])
        assert answer is not None
        store = next(d for d in answer[1]["dependencies"] if d["name"] == "store")
        assert store["up"] is False, answer
        assert store["detail"], answer
        time.sleep(2)  # the processes keep saying so, whatever their retries do
        assert _all_say(ports, 503)
        refused = _create_refusal(mesh, server)
        assert refused.code() == grpc.StatusCode.UNAVAILABLE, refused
        assert _retry_delay(refused) == timedelta(seconds=1)

    returned = time.monotonic()
    eventually(lambda: _all_say(ports, 200), HEALTH_WITHIN + 1, "every process ready again")
    ready_after = time.monotonic() - returned
    assert grpc_health(server) == health_pb2.HealthCheckResponse.SERVING
    assert not_ready_after <= HEALTH_WITHIN, not_ready_after
    assert ready_after <= HEALTH_WITHIN, ready_after


def _welcomes(log: Path) -> int:
    return len(re.findall(r"connected to \S+ \(server", log.read_text()))


def _hellos(log: Path) -> int:
    """Streams the executor opened: each is welcomed, refused or not answered, and its log says which
    (`executor/stream.py`)."""
    unwelcomed = r"(cannot connect to|refused this executor|did not welcome this executor)"
    return _welcomes(log) + len(re.findall(unwelcomed, log.read_text()))


def _warning_subject(line: str) -> tuple[str, str]:
    """The process (its pid) and what a warning line speaks of: its logger and its message up to the verb."""
    pid = line.split("[", 1)[1].split(maxsplit=1)[0]
    match = WARNING_SUBJECT.search(line)
    return pid, (match.group(1) + ": " + match.group(2)) if match else line.split("] ", 1)[1]


def _due_during(mesh: Mesh, jobs: JobServiceStub, starts: Path, first: float, count: int) -> list[str]:
    """`count` runs at `first` s from now and one a second after, each stamping its start in `starts`."""
    names = []
    for index in range(count):
        job = command_job(mesh.queue, STAMP.format(file=starts))
        job.schedule.run_at.FromDatetime(at(first + index))
        names.append(create(jobs, job).run.name)
    return names


@pytest.mark.timing
def test_an_executor_reconnects_at_most_once_a_second_and_each_process_says_so_once(
    mesh: Mesh, services: dict[str, str], tmp_path: Path
) -> None:
    mesh.env["JOBMESH_WATCHER_SCAN_INTERVAL"] = "1"
    server = mesh.server()
    mesh.watcher()
    executor = mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    # Runs the watcher holds come due while the database is down: the executor takes them from the queue
    # and claims them, which the server cannot write.
    _due_during(mesh, jobs, tmp_path / "starts", first=5, count=OUTAGE_RUNS)
    time.sleep(3)  # held by the watcher
    sizes = {process.name: process.log.stat().st_size for process in mesh.processes}
    with postgres_stopped(services):
        time.sleep(2)  # the first reconnections, while the backoff grows
        before = _hellos(executor.log)
        time.sleep(OUTAGE)
        during = _hellos(executor.log) - before
    assert during <= OUTAGE, f"{during} streams in {OUTAGE:.0f} s:\n{mesh.logs()}"
    for process in mesh.processes:
        written = process.log.read_bytes()[sizes[process.name] :].decode(errors="replace")
        records = [line for line in written.splitlines() if LOG_RECORD.match(line)]
        assert all(f" {process.name}[" in line for line in records), "a line without its process"
        warnings = [line for line in records if " WARNING " in line or " ERROR " in line]
        said = collections.Counter(_warning_subject(line) for line in warnings)
        assert max(said.values(), default=0) <= 1, "\n".join(warnings)
        assert "Traceback" not in written


@pytest.mark.timing
def test_an_attempt_that_finishes_while_the_database_is_down_succeeds_once(
    mesh: Mesh, services: dict[str, str], tmp_path: Path
) -> None:
    """Its result waits in the executor for the database, and reaches the server a little after it returns
    (under load results queue; here the executor is frozen across the return). The sweeper, back with the
    database, does not take the attempt for lost because its heartbeats and renewals could not be written
    meanwhile: the attempt succeeds, once."""
    server = mesh.server()
    mesh.watcher()
    executor = mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    starts = tmp_path / "starts"
    job = command_job(mesh.queue, f"{STAMP.format(file=starts)}; sleep 2")
    job.heartbeat_timeout.FromSeconds(HEARTBEAT_TIMEOUT)
    job.retry_policy.max_attempts = 3
    name = create(jobs, job).run.name
    eventually(lambda: len(read_times(starts)) == 1, 30, "the attempt started")
    _postgres("stop", services)
    try:
        time.sleep(3)  # the attempt finishes; its result cannot be written
        os.killpg(executor.popen.pid, signal.SIGSTOP)
        time.sleep(HEARTBEAT_TIMEOUT + 3)  # nothing keeps it alive now: renewals and heartbeats grow old
    finally:
        _postgres("start", services)
    time.sleep(2)
    os.killpg(executor.popen.pid, signal.SIGCONT)
    run = wait_for_run(search, name, lambda run: run.state in TERMINAL, 60, "the run to end")
    time.sleep(HEARTBEAT_TIMEOUT)  # a sweep that would retry it has had its chance
    run = get_run(search, name)
    assert run.state == run_pb2.RUN_STATE_SUCCEEDED, run
    assert run.attempt == 1, run
    assert len(read_times(starts)) == 1


@pytest.mark.timing
def test_runs_held_in_the_window_start_on_time_while_the_database_is_down_and_are_recorded_after(
    mesh: Mesh, services: dict[str, str], tmp_path: Path
) -> None:
    """A cron job's occurrences, made into runs and held by the watcher before the outage, come due during
    it: each claim is fenced on Redis and journaled by the server, each result journaled too, and both are
    applied when PostgreSQL returns. Every occurrence due meanwhile started on time, once, and reads
    SUCCEEDED with the start it really had. A command that runs through the whole outage, longer than its
    heartbeat timeout, is kept alive and succeeds."""
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    starts = tmp_path / "starts"
    every_second = job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="* * * * * *"))
    cron = create(jobs, command_job(mesh.queue, STAMP.format(file=starts), schedule=every_second)).job
    eventually(lambda: len(read_times(starts)) >= 2, 30, "the cron job under way")
    long_starts = tmp_path / "long"
    long = command_job(mesh.queue, f"{STAMP.format(file=long_starts)}; sleep {OUTAGE + 2}")
    long.heartbeat_timeout.FromSeconds(HEARTBEAT_TIMEOUT)
    long_run = create(jobs, long).run.name
    eventually(lambda: read_times(long_starts), 30, "the long command started")
    with postgres_stopped(services):
        stopped = datetime.now(UTC)
        time.sleep(OUTAGE)
        ended = datetime.now(UTC)
    jobs.PauseJob(job_service_pb2.PauseJobRequest(name=cron.name))
    runs = eventually(lambda: _all_ended(search, cron.name, before=ended), 60, "the occurrences recorded")
    during = [
        run for run in runs if stopped + timedelta(seconds=1) <= _due(run) < ended - timedelta(seconds=1)
    ]
    assert len(during) >= OUTAGE - 3, [_due(run) for run in runs]
    for run in during:
        assert run.state == run_pb2.RUN_STATE_SUCCEEDED, run
        assert run.attempt == 1, run
        lateness = run.start_time.ToDatetime(tzinfo=UTC) - _due(run)
        assert timedelta(0) <= lateness <= timedelta(seconds=2), (run.name, lateness)
    kept = wait_for_run(search, long_run, lambda run: run.state in TERMINAL, 60, "the long command's end")
    assert (kept.state, kept.attempt) == (run_pb2.RUN_STATE_SUCCEEDED, 1), kept
    stamped = read_times(starts)
    for run in during:  # the start recorded is the start it had
        assert any(
            abs(moment - run.start_time.ToDatetime(tzinfo=UTC)) < timedelta(seconds=1) for moment in stamped
        )


def _due(run: run_pb2.Run) -> datetime:
    return run.schedule_time.ToDatetime(tzinfo=UTC)


def _all_ended(search: SearchServiceStub, job: str, *, before: datetime) -> list[run_pb2.Run] | None:
    """The job's runs due before `before`, once every one of them has ended."""
    runs = [run for run in runs_of(search, job) if _due(run) < before]
    return runs if runs and all(run.state in TERMINAL for run in runs) else None
