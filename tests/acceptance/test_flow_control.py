"""Flow control on the production mesh (two servers, a watcher and two executors on PostgreSQL, Kafka and
Redis): 100 runs of jobs sharing a concurrency key limited to 1 never overlap and all run; a queue limited to
10 runs a second never starts more in any second; 30 runs of a queue limited to 3 at once never run more
than 3 at a time. Commands stamp the instants they really start and end."""

from __future__ import annotations

import itertools
import signal
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest

from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2_grpc
from tests.acceptance.mesh import Mesh, command_job, create, get_run, runs_of, warm_up
from tests.acceptance.processes import free_port
from tests.acceptance.test_dev import dev
from tests.support import eventually

pytestmark = pytest.mark.processes

KEYED_RUNS = 100
PACED_RUNS = 40
RATE = 10
QUEUE_RUNS = 30
QUEUE_LIMIT = 3
SECOND = timedelta(seconds=1)


def _stamping(file: Path, work: str = "") -> str:
    """A command that appends `start <instant> <run>` and `end <instant> <run>` lines around `work`."""
    stamp = 'echo "{what} $(date +%s.%N) $JOBMESH_RUN" >> "' + str(file) + '"'
    return "; ".join(part for part in (stamp.format(what="start"), work, stamp.format(what="end")) if part)


def _stamps(file: Path) -> dict[str, dict[str, datetime]]:
    """By run: the instants its command stamped (`start`, `end`)."""
    found: dict[str, dict[str, datetime]] = {}
    for line in file.read_text(encoding="utf-8").splitlines() if file.exists() else []:
        what, at, run = line.split()
        found.setdefault(run, {})[what] = datetime.fromtimestamp(float(at), UTC)
    return found


def _create_all(mesh: Mesh, server_index: int, jobs: Sequence[job_pb2.Job]) -> list[str]:
    """The jobs created (each makes one run at once), half through each server; their runs' names."""
    stub, _ = mesh.stubs(mesh.processes[server_index])
    requests = [job_service_pb2.CreateJobRequest(job=job) for job in jobs]
    answer = stub.BatchCreateJobs(job_service_pb2.BatchCreateJobsRequest(requests=requests))
    assert all(result.status.code == grpc.StatusCode.OK.value[0] for result in answer.results)
    return [result.run.name for result in answer.results]


def _two_servers_two_executors(
    mesh: Mesh, args: Sequence[str] = ()
) -> search_service_pb2_grpc.SearchServiceStub:
    first, second = mesh.server("server-1", args), mesh.server("server-2", args)
    mesh.watcher()
    mesh.executor(first, "executor-1", concurrency=8)
    mesh.executor(second, "executor-2", concurrency=8)
    jobs, search = mesh.stubs(first)
    warm_up(mesh, jobs, search)
    return search


def _all_succeeded(
    search: search_service_pb2_grpc.SearchServiceStub, tag: str, names: Sequence[str], timeout: float
) -> list[run_pb2.Run]:
    """The runs of the jobs labelled `flow: tag`, once they are all `names` and all succeeded (one list call
    every half second: polling each run would load the machine the test measures)."""

    def succeeded() -> list[run_pb2.Run]:
        runs = runs_of(search, "jobs/-", f'labels.flow = "{tag}" AND state = SUCCEEDED')
        return runs if sorted(run.name for run in runs) == sorted(names) else []

    return eventually(succeeded, timeout, f"the {len(names)} runs labelled {tag} to succeed", interval=0.5)


def _most_at_once(spans: Sequence[tuple[datetime, datetime]]) -> int:
    """The most spans open at one instant (one that ends as another starts is not open with it)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    open_now = most = 0
    for _, step in events:  # at one instant, ends (-1) sort before starts (+1)
        open_now += step
        most = max(most, open_now)
    return most


def _most_in_a_second(instants: Sequence[datetime]) -> int:
    """The most instants in any second, wherever it begins ([t, t + 1 s))."""
    ordered = sorted(instants)
    return max(sum(1 for t in ordered if s <= t < s + SECOND) for s in ordered)


@pytest.mark.postgres
@pytest.mark.kafka
@pytest.mark.redis
def test_runs_sharing_a_key_limited_to_one_never_overlap_and_all_run(mesh: Mesh, tmp_path: Path) -> None:
    search = _two_servers_two_executors(mesh)
    stamps = tmp_path / "stamps"
    jobs = [
        command_job(
            mesh.queue,
            _stamping(stamps, "sleep 0.02"),
            concurrency_key="customer-42",
            concurrency_limit=1,
            labels={"flow": mesh.queue},
        )
        for _ in range(KEYED_RUNS)
    ]
    names = _create_all(mesh, 0, jobs[::2]) + _create_all(mesh, 1, jobs[1::2])
    runs = _all_succeeded(search, mesh.queue, names, 100)

    # From the runs' records: each started after the one before it ended, one attempt each.
    assert len(runs) == KEYED_RUNS
    assert all(run.attempt == 1 for run in runs)
    ordered = sorted(runs, key=lambda run: run.start_time.ToDatetime(UTC))
    for earlier, later in itertools.pairwise(ordered):
        assert later.start_time.ToDatetime(UTC) >= earlier.end_time.ToDatetime(UTC), (
            earlier.name,
            later.name,
        )
    # From the commands' own stamps: one start and one end each, and no two between them at once.
    stamped = _stamps(stamps)
    assert sorted(stamped) == sorted(names)
    spans = sorted((times["start"], times["end"]) for times in stamped.values())
    for (_, ended), (started, _) in itertools.pairwise(spans):
        assert started >= ended
    # Both executors took part: the limit held across the mesh, not within one process.
    assert {run.executor for run in runs} == {"executor-1", "executor-2"}


@pytest.mark.postgres
@pytest.mark.kafka
@pytest.mark.redis
def test_a_queue_limited_to_ten_runs_a_second_never_exceeds_it(mesh: Mesh, tmp_path: Path) -> None:
    search = _two_servers_two_executors(mesh, ["--queue-rate-limits", f"{mesh.queue}={RATE}"])
    stamps = tmp_path / "stamps"
    jobs = [
        command_job(mesh.queue, _stamping(stamps), labels={"flow": mesh.queue}) for _ in range(PACED_RUNS)
    ]
    names = _create_all(mesh, 0, jobs[::2]) + _create_all(mesh, 1, jobs[1::2])
    runs = _all_succeeded(search, mesh.queue, names, 60)

    starts = [run.start_time.ToDatetime(UTC) for run in runs]
    assert _most_in_a_second(starts) == RATE
    # Paced, not merely spread: the whole batch took at least the time its rate allows.
    assert max(starts) - min(starts) >= (PACED_RUNS - 1) / RATE * SECOND
    # No command started before its run's recorded start (the pace is kept, never run ahead of).
    stamped = _stamps(stamps)
    assert sorted(stamped) == sorted(names)
    for run in runs:
        assert stamped[run.name]["start"] >= run.start_time.ToDatetime(UTC), run.name


@pytest.mark.postgres
@pytest.mark.kafka
@pytest.mark.redis
def test_a_queue_limited_to_three_at_once_never_runs_more_and_runs_all(mesh: Mesh, tmp_path: Path) -> None:
    """Two executors of 8 slots each, 30 runs of half a second of one queue limited to 3: at most 3 run at
    once (from the runs' records and from the commands' own stamps), and all run, each once."""
    search = _two_servers_two_executors(mesh, ["--queue-concurrency-limits", f"{mesh.queue}={QUEUE_LIMIT}"])
    stamps = tmp_path / "stamps"
    jobs = [
        command_job(mesh.queue, _stamping(stamps, "sleep 0.5"), labels={"flow": mesh.queue})
        for _ in range(QUEUE_RUNS)
    ]
    names = _create_all(mesh, 0, jobs[::2]) + _create_all(mesh, 1, jobs[1::2])
    runs = _all_succeeded(search, mesh.queue, names, 75)

    assert len(runs) == QUEUE_RUNS
    assert all(run.attempt == 1 for run in runs)
    recorded = [(run.start_time.ToDatetime(UTC), run.end_time.ToDatetime(UTC)) for run in runs]
    assert _most_at_once(recorded) <= QUEUE_LIMIT
    stamped = _stamps(stamps)
    assert sorted(stamped) == sorted(names)
    spans = [(times["start"], times["end"]) for times in stamped.values()]
    # The limit was reached (30 runs, 16 slots: the queue was full), never passed.
    assert _most_at_once(spans) == QUEUE_LIMIT
    assert {run.executor for run in runs} == {"executor-1", "executor-2"}


@pytest.mark.postgres
@pytest.mark.kafka
@pytest.mark.redis
def test_runs_deferred_by_a_killed_executor_run_on_another(mesh: Mesh, tmp_path: Path) -> None:
    """An executor holds runs deferred behind a busy key, their Kafka offsets uncommitted, and is SIGKILLed:
    another executor takes them from the group, and they all run, one at a time."""
    server = mesh.server()
    mesh.watcher()
    victim = mesh.executor(server, "executor-victim", concurrency=8)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    blocker = command_job(mesh.queue, "sleep 3", concurrency_key="busy", concurrency_limit=1)
    blocker.heartbeat_timeout.FromSeconds(3)
    blocker.retry_policy.max_attempts = 2
    blocker.retry_policy.initial_backoff.FromMilliseconds(100)
    busy = create(jobs, blocker).run.name
    eventually(lambda: get_run(search, busy).state == run_pb2.RUN_STATE_RUNNING, 20, "the key's first run")
    stamps = tmp_path / "stamps"
    waiting = command_job(
        mesh.queue,
        _stamping(stamps),
        concurrency_key="busy",
        concurrency_limit=1,
        labels={"flow": mesh.queue},
    )
    names = [create(jobs, waiting).run.name for _ in range(5)]
    time.sleep(1)  # taken from Kafka and deferred by the victim, the key still busy
    assert {get_run(search, name).state for name in names} == {run_pb2.RUN_STATE_QUEUED}
    victim.kill(signal.SIGKILL)
    mesh.executor(server, "executor-survivor", concurrency=8)

    runs = _all_succeeded(search, mesh.queue, names, 60)
    assert {run.executor for run in runs} == {"executor-survivor"}
    spans = sorted((times["start"], times["end"]) for times in _stamps(stamps).values())
    assert len(spans) == len(names)
    for (_, ended), (started, _) in itertools.pairwise(spans):
        assert started >= ended


def test_jobmesh_dev_keeps_a_key_s_limit_and_a_queue_s_rate(tmp_path: Path) -> None:
    """The embedded mesh (SQLite, an in-process queue): 30 runs of a key limited to 1 on a queue limited to 10
    runs a second run one at a time, and never more than 10 start in a second."""
    stamps = tmp_path / "stamps"
    address = f"127.0.0.1:{free_port()}"
    with dev(tmp_path, address, "--queue-rate-limits", f"default={RATE}") as (_, (jobs, search)):
        job = command_job(
            "default", _stamping(stamps), concurrency_key="solo", concurrency_limit=1, labels={"flow": "dev"}
        )
        names = [create(jobs, job).run.name for _ in range(30)]
        runs = _all_succeeded(search, "dev", names, 60)
    ordered = sorted(runs, key=lambda run: run.start_time.ToDatetime(UTC))
    for earlier, later in itertools.pairwise(ordered):
        assert later.start_time.ToDatetime(UTC) >= earlier.end_time.ToDatetime(UTC)
    assert _most_in_a_second([run.start_time.ToDatetime(UTC) for run in runs]) <= RATE
    spans = sorted((times["start"], times["end"]) for times in _stamps(stamps).values())
    assert len(spans) == len(names)
    for (_, ended), (started, _) in itertools.pairwise(spans):
        assert started >= ended
