"""`jobmesh server --workers 2` on PostgreSQL, Kafka and Redis: both workers serve the one address and run
jobs; a worker that dies is started again while the other serves, and the executors whose streams it held
connect to the other at once; a SIGKILLed parent takes its workers along; SIGTERM stops them all cleanly."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Iterator

import pytest
import sqlalchemy

from jobmesh.v1 import run_pb2
from tests.acceptance.mesh import Mesh, Process, command_job, create, get_run, pid_gone
from tests.acceptance.proc import sockets_of, tcp_ports, workers_of
from tests.acceptance.processes import wait_serving
from tests.support import eventually, require_service_url

pytestmark = [pytest.mark.postgres, pytest.mark.kafka, pytest.mark.redis, pytest.mark.processes]


def two_workers(server: Process) -> list[int] | None:
    """Both workers, once both serve: the parent says so then. A worker killed before it served stops the
    server instead of being started again, and the port answers as soon as the first one serves."""
    if "2 workers serving gRPC" not in server.log.read_text():
        return None
    pids = workers_of(server)
    return pids if len(pids) == 2 else None


def replaced(server: Process, dead: int) -> list[int] | None:
    pids = two_workers(server)
    return pids if pids is not None and dead not in pids else None


def runs_a_job(mesh: Mesh, server: Process) -> None:
    jobs, search = mesh.stubs(server)
    name = create(jobs, command_job(mesh.queue, "true")).run.name
    eventually(lambda: get_run(search, name).state == run_pb2.RUN_STATE_SUCCEEDED, 30, "the job to run")


# The executor's log line of each welcome.
WELCOMED = re.compile(r"connected to \S+ \(server (server-[0-9a-f]+)\)")
NOT_RELEASED = "executor names of dead server worker"
STARTED = re.compile(r"server worker \d+ started as")


def welcomes(executor: Process) -> list[str]:
    """The server ids that welcomed the executor, in order."""
    return WELCOMED.findall(executor.log.read_text())


def stream_holder(server: Process, executor: Process) -> int | None:
    """The worker at the other end of the executor's connection to the server (from /proc: the parent
    cannot be asked, and each worker logs under no name of its own)."""
    port = int(server.address.rsplit(":", 1)[1])
    ports = tcp_ports()
    ends = {ports[i][0] for i in sockets_of(executor.popen.pid) if ports.get(i, (0, 0))[1] == port}
    holders = [
        pid
        for pid in workers_of(server)
        if any(ports.get(i, (0, 0)) in {(port, end) for end in ends} for i in sockets_of(pid))
    ]
    return holders[0] if len(holders) == 1 else None


def kill_the_executors_worker(server: Process, executor: Process) -> tuple[str, int]:
    """SIGKILLs the worker that holds the executor's stream; the server id that welcomed the executor there,
    and how many welcomes the executor had had."""
    holder = eventually(lambda: stream_holder(server, executor), 30, "the worker holding the stream")
    server_ids = welcomes(executor)
    os.kill(holder, signal.SIGKILL)
    return server_ids[-1], len(server_ids)


@contextlib.contextmanager
def connections_refused(database_url: str) -> Iterator[None]:
    """The database refuses new connections (open ones go on): the store is away for a process that
    connects now, as the parent does when a worker dies."""
    name = sqlalchemy.engine.make_url(database_url).database
    admin = sqlalchemy.create_engine(
        require_service_url("JOBMESH_DATABASE_URL"),
        isolation_level="AUTOCOMMIT",
        poolclass=sqlalchemy.pool.NullPool,
    )

    def allow(allowed: bool) -> None:
        with admin.connect() as connection:
            connection.execute(sqlalchemy.text(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS {allowed}'))

    try:
        allow(False)
        yield
    finally:
        allow(True)
        admin.dispose()


def test_workers_serve_one_address_and_a_dead_one_is_started_again(mesh: Mesh) -> None:
    mesh.env["JOBMESH_SERVER_WORKERS"] = "2"
    server = mesh.server()
    mesh.executor(server)
    first = eventually(lambda: two_workers(server), 30, "two workers")
    runs_a_job(mesh, server)
    os.kill(first[0], signal.SIGKILL)
    # Connections the dead worker held or had queued are reset (UNAVAILABLE: a client retries); new ones
    # go to the worker left.
    wait_serving(server.address)
    runs_a_job(mesh, server)
    again = eventually(lambda: replaced(server, first[0]), 60, "a new worker in place of the dead one")
    assert first[1] in again
    runs_a_job(mesh, server)
    server.popen.send_signal(signal.SIGTERM)
    assert server.popen.wait(timeout=40) == 0
    assert all(pid_gone(pid) for pid in again)


def test_a_signal_during_a_restart_starts_no_worker(mesh: Mesh) -> None:
    """SIGTERM to the whole group within the second before a dead worker is started again: no worker is
    started, neither the dead one nor the one the signal stopped."""
    mesh.env["JOBMESH_SERVER_WORKERS"] = "2"
    server = mesh.server()
    first = eventually(lambda: two_workers(server), 30, "two workers")
    os.kill(first[0], signal.SIGKILL)
    eventually(lambda: "starting it again" in server.log.read_text(), 10, "the restart", interval=0.02)
    os.killpg(server.popen.pid, signal.SIGTERM)
    assert server.popen.wait(timeout=10) == 0
    assert server.log.read_text().count("starting it again") == 1
    assert len(STARTED.findall(server.log.read_text())) == 2


def test_a_killed_parent_takes_its_workers_along(mesh: Mesh) -> None:
    mesh.env["JOBMESH_SERVER_WORKERS"] = "2"
    server = mesh.server()
    pids = eventually(lambda: two_workers(server), 30, "two workers")
    server.popen.send_signal(signal.SIGKILL)  # the parent alone, not its process group
    server.popen.wait(timeout=10)
    eventually(lambda: all(pid_gone(pid) for pid in pids), 10, "the workers to die with their parent")


def test_a_killed_workers_executor_is_connected_again_within_2_s(mesh: Mesh) -> None:
    """No lockout: the parent releases the dead worker's executor names at once, so the executor is not
    refused as connected elsewhere until they lapse (a quiet limit: ~9 s)."""
    mesh.env["JOBMESH_SERVER_WORKERS"] = "2"
    server = mesh.server()
    executor = mesh.executor(server)
    runs_a_job(mesh, server)
    holder, before = kill_the_executors_worker(server, executor)
    killed = time.monotonic()
    again = eventually(lambda: welcomes(executor)[before:], 30, "a welcome after the kill", interval=0.02)
    took = time.monotonic() - killed
    assert took <= 2.0, f"connected again {took:.1f} s after the kill"
    assert again[0] != holder
    runs_a_job(mesh, server)


def test_a_dead_workers_names_lapse_when_the_store_is_away(mesh: Mesh) -> None:
    """The parent cannot release them: one line says so, it lives on, and the executor is connected again
    once they lapse."""
    mesh.env["JOBMESH_SERVER_WORKERS"] = "2"
    server = mesh.server()
    executor = mesh.executor(server)
    runs_a_job(mesh, server)
    with connections_refused(mesh.env["JOBMESH_DATABASE_URL"]):
        _, before = kill_the_executors_worker(server, executor)
        # Allowed again before the new worker, started a second later, opens the store.
        eventually(lambda: NOT_RELEASED in server.log.read_text(), 10, "the parent's line", interval=0.02)
    eventually(lambda: welcomes(executor)[before:], 30, "a welcome once the names lapsed")
    assert server.log.read_text().count(NOT_RELEASED) == 1
    assert server.popen.poll() is None
    runs_a_job(mesh, server)
