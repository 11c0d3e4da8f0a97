"""Backfill on the production mesh (server, watcher and executor processes on PostgreSQL, Kafka and Redis): a
day of a job every 5 minutes makes 288 runs, each marked as a backfill, started one after the other at the
pace asked, never before their due time. Commands stamp the instant they really start."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest

from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2
from tests.acceptance.mesh import Mesh, command_job, create, runs_of, warm_up
from tests.support import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.kafka, pytest.mark.redis, pytest.mark.processes]

T = TypeVar("T")
PACE = timedelta(milliseconds=100)
DAY_OF_RUNS = 288  # one every 5 minutes


def all_of(items: list[T]) -> list[T] | None:
    """`items` once they are the whole day's runs."""
    return items if len(items) >= DAY_OF_RUNS else None


def _stamps(path: Path) -> list[tuple[str, datetime]]:
    """(run, instant it started) of each line a command stamped."""
    if not path.exists():
        return []
    lines = [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
    return [
        (run, datetime.fromtimestamp(float(at), UTC))
        for at, run in (line for line in lines if len(line) == 2)
    ]


def test_a_day_every_five_minutes_backfills_288_marked_paced_runs(mesh: Mesh, tmp_path: Path) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server, concurrency=8)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)

    starts = tmp_path / "starts"
    cron = job_pb2.Schedule.Cron(expression="*/5 * * * *", time_zone="America/New_York")
    # Each start stamped with its run: the job's own cron occurrences (every 5 minutes) may start meanwhile.
    stamp = f'echo "$(date +%s.%N) $JOBMESH_RUN" >> "{starts}"'
    job = create(jobs, command_job(mesh.queue, stamp, schedule=job_pb2.Schedule(cron=cron))).job
    day = (datetime.now(UTC) - timedelta(days=3)).replace(hour=5, minute=0, second=0, microsecond=0)
    request = job_service_pb2.BackfillJobRequest(name=job.name, request_id="a-day")
    request.start_time.FromDatetime(day)
    request.end_time.FromDatetime(day + timedelta(days=1))
    request.pace.FromTimedelta(PACE)
    made = jobs.BackfillJob(request)
    assert made.run_count == DAY_OF_RUNS

    backfilled = runs_of(search, job.name, "trigger = BACKFILL")
    names = {run.name for run in backfilled}
    stamped = eventually(
        lambda: all_of([(run, at) for run, at in _stamps(starts) if run in names]),
        DAY_OF_RUNS * PACE.total_seconds() + 60,
        "the backfill's 288 runs to start",
    )
    assert len(backfilled) == DAY_OF_RUNS == len(stamped) == len(dict(stamped))
    assert [run.schedule_time.ToDatetime(UTC) for run in backfilled] == [
        day + timedelta(minutes=5 * i) for i in range(DAY_OF_RUNS)
    ]
    # Paced: each run was due one pace after the one before, and none started before it was due.
    due = sorted(run.due_time.ToDatetime(UTC) for run in backfilled)
    assert [later - earlier for earlier, later in itertools.pairwise(due)] == [PACE] * (DAY_OF_RUNS - 1)
    due_of = {run.name: run.due_time.ToDatetime(UTC) for run in backfilled}
    for run, started in stamped:
        assert started >= due_of[run], (run, started, due_of[run])
    finished = eventually(
        lambda: all_of(runs_of(search, job.name, "trigger = BACKFILL AND state = SUCCEEDED")),
        60,
        "the backfill's runs to succeed",
    )
    # Their lateness counts from when the pace released them, not from the day they stand for.
    assert all(run.lateness.ToTimedelta() < timedelta(seconds=2) for run in finished)
    assert {run.trigger for run in finished} == {run_pb2.RUN_TRIGGER_BACKFILL}
    # Retried with its request id, the call makes nothing again.
    assert jobs.BackfillJob(request).run_count == DAY_OF_RUNS
    assert len(runs_of(search, job.name, "trigger = BACKFILL")) == DAY_OF_RUNS
