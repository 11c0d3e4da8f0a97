"""Every way the server makes a run tells the hook chain once, naming the call: a create (one job or a
batch), RunJobNow, ReplayRun, a schedule change and a resume; a create that made no run (an idempotent
replay) tells nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from google.protobuf import field_mask_pb2

from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.definitions import SchedulingPolicy
from jobmesh.core.hooks import RunHooks
from jobmesh.core.records import JobRecord, RunRecord
from jobmesh.server.api.job_commands import JobCommands
from jobmesh.server.auth.authorization import Access
from jobmesh.server.principals import UNRESTRICTED, Role
from jobmesh.v1 import job_pb2, job_service_pb2

ADMIN = Access(UNRESTRICTED, "CreateJob", Role.ADMIN)


class Creates(RunHooks):
    def __init__(self) -> None:
        self.seen: list[tuple[str, list[str], list[str]]] = []

    def create(
        self, call: str, start_ns: int, runs: Sequence[RunRecord], jobs: Sequence[JobRecord] = ()
    ) -> None:
        self.seen.append((call, [run.job_id for run in runs], [job.job_id for job in jobs]))


@pytest.fixture
def store(tmp_path: Path, migrated_sqlite: Callable[[Path], str]) -> Iterator[SqlStore]:
    store = open_store(migrated_sqlite(tmp_path / "store.db"))
    yield store
    store.close()


def _request(job_id: str, *, cron: str = "", request_id: str = "") -> job_service_pb2.CreateJobRequest:
    job = job_pb2.Job(target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])))
    if cron:
        job.schedule.cron.expression = cron
    else:
        job.schedule.immediate.SetInParent()
    return job_service_pb2.CreateJobRequest(job_id=job_id, job=job, request_id=request_id)


def test_each_call_that_makes_runs_tells_the_hooks_once(store: SqlStore) -> None:
    hooks = Creates()
    commands = JobCommands(store, SchedulingPolicy(), lambda: datetime.now(UTC), hooks=hooks)

    commands.create_jobs([_request("one", request_id="r1")], ADMIN)
    commands.create_jobs([_request("one", request_id="r1")], ADMIN)  # a replay: nothing new
    batch = "jobmesh.v1.JobService/BatchCreateJobs"
    commands.create_jobs([_request("two"), _request("cron", cron="* * * * *")], ADMIN, batch)
    commands.run_job_now(job_service_pb2.RunJobNowRequest(name="jobs/two"), ADMIN)
    commands.pause_job("jobs/cron", ADMIN)
    commands.resume_job("jobs/cron", ADMIN)
    every_minute = job_pb2.Job(
        name="jobs/cron", schedule=job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="*/1 * * * *"))
    )
    commands.update_job(every_minute, field_mask_pb2.FieldMask(paths=["schedule"]), ADMIN)

    calls = [(call.rsplit("/", 1)[1], runs, jobs) for call, runs, jobs in hooks.seen]
    assert calls[:3] == [
        ("CreateJob", ["one"], ["one"]),
        ("BatchCreateJobs", ["two", "cron"], ["two", "cron"]),  # a cron job due within a minute has its run
        ("RunJobNow", ["two"], []),
    ]
    assert [call for call, _, _ in calls[3:]] == ["ResumeJob", "UpdateJob"]
    assert all(runs == ["cron"] for _, runs, _ in calls[3:])
