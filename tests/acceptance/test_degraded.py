"""Degraded, not down (invariant 8): Kafka is stopped, or Redis frozen (SIGSTOP), while the mesh works.

The module stops its own Kafka and Redis (`private_services`), never the suite's, which tests on other
workers use meanwhile; they are always brought back, whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jobmesh.adapters.queue.kafka import KafkaRunQueue
from jobmesh.core.ports.queue import Delivery, RunConsumer
from jobmesh.v1 import job_service_pb2, run_pb2
from tests.acceptance.mesh import (
    STAMP,
    Mesh,
    command_job,
    create,
    escaping_sleeps,
    get_run,
    pid_gone,
    pids_in,
    read_times,
    running_sleep,
    warm_up,
)
from tests.acceptance.processes import REPO
from tests.adapters.queue.support import make_run
from tests.support import AT_ONCE, eventually, silence_when_stopped

pytestmark = [pytest.mark.postgres, pytest.mark.kafka, pytest.mark.redis, pytest.mark.processes]
# The producer gives up on a message after 3 s here (30 s by default): outages longer than that, than the
# consumers' session (2 s here) and than the admin client's timeout (10 s) make the clients give up and start
# again, as a long outage does in production.
DELIVERY_TIMEOUT_MS = 3000
FROZEN_FOR = 12.0


@pytest.fixture
def services(private_services: dict[str, str]) -> dict[str, str]:
    return private_services


@pytest.fixture
def mesh(mesh: Mesh, private_services: dict[str, str]) -> Mesh:
    mesh.env["JOBMESH_QUEUE_URL"] += f"&delivery_timeout_ms={DELIVERY_TIMEOUT_MS}"
    mesh.env["JOBMESH_SERVICES_DIR"] = private_services["JOBMESH_SERVICES_DIR"]
    return mesh


def _services(mesh: Mesh) -> Path:
    return Path(mesh.env["JOBMESH_SERVICES_DIR"])


@contextlib.contextmanager
def kafka_stopped(folder: Path) -> Iterator[None]:
    """The Kafka of the services in `folder` stopped, and started again (answering) on leaving."""
    script = str(REPO / "tools/services/services.sh")
    subprocess.run(["bash", script, "kafka", "stop", str(folder)], check=True, timeout=60)
    try:
        yield
    finally:
        subprocess.run(["bash", script, "kafka", "start", str(folder)], check=True, timeout=120)


def _service_pid(mesh: Mesh, name: str) -> int:
    folder = _services(mesh)
    for line in reversed((folder / "pids").read_text().splitlines()):  # the latest: a restart appends one
        service, pid = line.split()
        if service == name:
            return int(pid)
    raise AssertionError(f"{name} is not among the services in {folder}")


@contextlib.contextmanager
def frozen(mesh: Mesh, name: str) -> Iterator[None]:
    pid = _service_pid(mesh, name)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.timing
def test_creates_succeed_while_kafka_is_stopped_and_run_when_it_returns(mesh: Mesh, tmp_path: Path) -> None:
    mesh.env["JOBMESH_WATCHER_SCAN_INTERVAL"] = "5"
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    starts = tmp_path / "starts"
    names = []
    with kafka_stopped(_services(mesh)):
        for _ in range(5):
            began = time.monotonic()
            names.append(create(jobs, command_job(mesh.queue, STAMP.format(file=starts))).run.name)
            assert time.monotonic() - began < AT_ONCE, "a create waited for Kafka (5 s at most)"
            time.sleep(2)  # 10 s in all: three times the producer's delivery timeout
        assert read_times(starts) == []
    eventually(
        lambda: all(get_run(search, name).state == run_pb2.RUN_STATE_SUCCEEDED for name in names),
        120,
        "every run created while Kafka was down to succeed",
        interval=1.0,
    )
    assert len(read_times(starts)) == len(names)


def test_a_frozen_broker_stalls_no_consumer_once_it_thaws(mesh: Mesh, tmp_path: Path) -> None:
    """Kafka stopped by SIGSTOP for longer than every client timeout, then let go: runs created while it was
    frozen and after it thawed all run, with no process restarted."""
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    starts = tmp_path / "starts"
    with frozen(mesh, "kafka"):
        during = [create(jobs, command_job(mesh.queue, STAMP.format(file=starts))).run.name for _ in range(5)]
        time.sleep(FROZEN_FOR)
    after = [create(jobs, command_job(mesh.queue, STAMP.format(file=starts))).run.name for _ in range(5)]
    names = during + after
    try:
        eventually(
            lambda: all(get_run(search, name).state == run_pb2.RUN_STATE_SUCCEEDED for name in names),
            90,
            "every run created while Kafka was frozen and after it thawed to succeed",
            interval=1.0,
        )
    except AssertionError as timed_out:  # which step stalled: the runs' states and every process's log
        states = {name: run_pb2.RunState.Name(get_run(search, name).state) for name in names}
        raise AssertionError(f"{timed_out}\n{states}\n{mesh.logs()}") from None
    assert len(read_times(starts)) == len(names)
    later = create(jobs, command_job(mesh.queue, STAMP.format(file=starts))).run.name
    eventually(lambda: get_run(search, later).state == run_pb2.RUN_STATE_SUCCEEDED, 30, "a run after")
    assert "Traceback" not in mesh.logs(), mesh.logs()


@pytest.mark.timing
def test_cancel_over_the_stream_works_while_redis_is_down(mesh: Mesh, tmp_path: Path) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    run_name, pid = running_sleep(mesh, jobs, search, tmp_path / "pid")
    request = job_service_pb2.CancelRunRequest(name=run_name, reason="redis is down")
    with frozen(mesh, "redis"), ThreadPoolExecutor(1) as pool:
        cancelled_at = time.monotonic()
        answer = pool.submit(jobs.CancelRun, request, timeout=30)  # it also waits for Redis (the cancel key)
        eventually(lambda: pid_gone(pid), 5.0, "the process to stop", interval=0.02)
        stopped_after = time.monotonic() - cancelled_at
        assert answer.result().run.state in (run_pb2.RUN_STATE_CANCELLING, run_pb2.RUN_STATE_CANCELLED)
    assert stopped_after < AT_ONCE, stopped_after
    eventually(lambda: get_run(search, run_name).state == run_pb2.RUN_STATE_CANCELLED, 30, "CANCELLED")


@contextlib.contextmanager
def stopped(group: int) -> Iterator[None]:
    """Every process of a process group (a server and its workers) stopped."""
    os.killpg(group, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(group, signal.SIGCONT)


@pytest.mark.timing
def test_an_executor_cut_off_from_server_and_bus_kills_its_attempt_before_it_may_be_retried(
    mesh: Mesh, tmp_path: Path
) -> None:
    """The server and Redis frozen: nothing keeps the attempt alive, so its executor kills it within its
    heartbeat timeout (5 s) less the margin; the retry, once they thaw, starts after its processes died."""
    server = mesh.server()
    mesh.watcher()
    executor = mesh.executor(server)
    jobs, search = mesh.stubs(server)
    pids, starts = tmp_path / "pids", tmp_path / "starts"
    job = command_job(mesh.queue, escaping_sleeps(starts, pids))
    job.heartbeat_timeout.FromSeconds(5)
    job.retry_policy.max_attempts = 2
    job.retry_policy.initial_backoff.FromMilliseconds(100)
    run_name = create(jobs, job).run.name
    sleeps = eventually(lambda: pids_in(pids, 2), 20, "the command and its escapee to start")
    with stopped(server.popen.pid), frozen(mesh, "redis"):
        eventually(
            lambda: all(pid_gone(pid) for pid in sleeps), 6, "the cut-off executor to kill its attempt"
        )
        gone_at = time.time()
    # Its heartbeat timeout is 5 s after the last heartbeat the server had, which was before the cut.
    assert silence_when_stopped(executor.log.read_text()) < 5.0
    eventually(lambda: len(read_times(starts)) == 2, 60, "the retry to start", interval=0.5)
    assert read_times(starts)[1].timestamp() > gone_at
    eventually(lambda: get_run(search, run_name).attempt == 2, 30, "the retry in the run")
    [first] = get_run(search, run_name).previous_attempts
    assert first.error.type in {"ContactLost", "HeartbeatLost"}


# A restarted broker answers a join NOT_COORDINATOR while it loads its groups, and librdkafka tries again
# up to 2.3 s later (a 1 s join backoff served on a main loop that ticks once a second): a static member is
# back within that and the publish; a dynamic one waits out its old id's 6 s session on top.
REJOINED = 4.5


@pytest.mark.timing
def test_an_executors_consumers_take_runs_again_at_once_when_kafka_returns(services: dict[str, str]) -> None:
    """Kafka stopped for longer than the consumers' session (6 s): a consumer that joined again as a new
    member made its group wait for the old member's session to run out, 6 s after the broker was back,
    before any run was taken; one named as its executor takes its partitions back at once."""
    queue = KafkaRunQueue(services["JOBMESH_KAFKA_BOOTSTRAP"], client_id="restart-test")
    name = f"restart-{uuid.uuid4().hex[:8]}"
    consumers = [queue.consumer(f"{name}-g", [name], member=f"{name}-executor-{i}") for i in range(2)]
    try:
        queue.publish([make_run(name, f"job{i}", "before") for i in range(6)])
        assert len(_drain_all(consumers, 6, 60)) == 6  # both joined, and hold their share
        with kafka_stopped(Path(services["JOBMESH_SERVICES_DIR"])):
            time.sleep(8)
        back = time.monotonic()
        queue.publish([make_run(name, f"job{i}", "after") for i in range(6)], timeout=10)
        got = _drain_all(consumers, 6, 30)
        took = time.monotonic() - back
        assert len(got) == 6
        assert took < REJOINED, took
    finally:
        # Both at once: a member's close waits for its group's rebalance, which the other answers only while
        # it is served; one after the other, the first is left behind past its bound, still closing when the
        # module's Kafka stops (a close that then never returned held the GIL and froze this process).
        with ThreadPoolExecutor(len(consumers)) as closing:
            list(closing.map(lambda consumer: consumer.close(), consumers))
        queue.close()


def _drain_all(consumers: Sequence[RunConsumer], count: int, timeout: float) -> list[Delivery]:
    """Polls every consumer in turn (each serves its own group membership) until `count` runs came."""
    got: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for consumer in consumers:
            taken = consumer.poll(count, 0.05)
            consumer.commit(taken)
            got += taken
    return got
