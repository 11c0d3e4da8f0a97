"""`jobmesh server --workers 2` on PostgreSQL, Kafka and Redis: both workers serve the one address and run
jobs; a worker that dies is started again while the other serves; a SIGKILLed parent takes its workers
along; SIGTERM stops them all cleanly."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from jobmesh.v1 import run_pb2
from tests.acceptance.mesh import Mesh, Process, command_job, create, get_run, pid_gone
from tests.acceptance.processes import wait_serving
from tests.support import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.kafka, pytest.mark.redis, pytest.mark.processes]


def workers_of(server: Process) -> list[int]:
    """The parent's worker processes, from /proc (not the resource tracker that multiprocessing starts)."""
    children = Path(f"/proc/{server.popen.pid}/task/{server.popen.pid}/children")
    pids = [int(pid) for pid in children.read_text().split()] if children.exists() else []
    return [pid for pid in pids if b"spawn_main" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def two_workers(server: Process) -> list[int] | None:
    pids = workers_of(server)
    return pids if len(pids) == 2 else None


def replaced(server: Process, dead: int) -> list[int] | None:
    pids = two_workers(server)
    return pids if pids is not None and dead not in pids else None


def runs_a_job(mesh: Mesh, server: Process) -> None:
    jobs, search = mesh.stubs(server)
    name = create(jobs, command_job(mesh.queue, "true")).run.name
    eventually(lambda: get_run(search, name).state == run_pb2.RUN_STATE_SUCCEEDED, 30, "the job to run")


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


def test_a_killed_parent_takes_its_workers_along(mesh: Mesh) -> None:
    mesh.env["JOBMESH_SERVER_WORKERS"] = "2"
    server = mesh.server()
    pids = eventually(lambda: two_workers(server), 30, "two workers")
    server.popen.send_signal(signal.SIGKILL)  # the parent alone, not its process group
    server.popen.wait(timeout=10)
    eventually(lambda: all(pid_gone(pid) for pid in pids), 10, "the workers to die with their parent")
