"""Pause pauses (issue 20): a pause, a delete or a schedule change withdraws the job's runs no executor
claimed yet (SCHEDULED and QUEUED), a claim that raced it is refused, running runs go on, and resume plans
from now."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from google.protobuf import field_mask_pb2

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.definitions import new_run
from jobmesh.core.filters import Comparison, ListQuery
from jobmesh.core.names import parse_job_name
from jobmesh.core.occurrences import first_cron_occurrence
from jobmesh.core.ports.pipeline_store import ClaimStatus
from jobmesh.core.records import DEFAULT_HEARTBEAT_TIMEOUT, RunRecord, RunState, RunTrigger
from jobmesh.v1 import job_pb2, job_service_pb2
from tests.server.conftest import Api
from tests.server.test_job_service import command_job, create

EVERY_5_MINUTES = "*/5 * * * *"


def _job_with_runs(api: Api) -> tuple[str, dict[str, RunRecord]]:
    """A cron job with a run made ahead of time, one queued, one running and one asked for by hand."""
    name = create(api, command_job(expression=EVERY_5_MINUTES)).job.name
    job = api.store.get_job(parse_job_name(name))
    now = datetime.now(UTC)

    def add(seconds: int, state: RunState = RunState.SCHEDULED) -> RunRecord:
        run = new_run(
            job,
            now + timedelta(seconds=seconds),
            now,
            RunTrigger.SCHEDULE,
            heartbeat_timeout=DEFAULT_HEARTBEAT_TIMEOUT,
        )
        run = dataclasses.replace(run, state=state)
        api.store.create_run(run)
        return run

    runs = {
        "scheduled": add(120),
        "queued": add(1, state=RunState.QUEUED),
        "running": add(0, state=RunState.QUEUED),
    }
    assert api.store.claim([AttemptRef.of(runs["running"])], "ex1", now)[0].status is ClaimStatus.GRANTED
    return name, runs


def _state(api: Api, run: RunRecord) -> tuple[RunState, str | None, str | None]:
    stored = api.store.get_run(run.job_id, run.run_id)
    return stored.state, stored.error_type, stored.error_message


def test_a_pause_withdraws_the_runs_not_yet_claimed(api: Api) -> None:
    name, runs = _job_with_runs(api)
    api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=name))
    for kind in ("scheduled", "queued"):
        assert _state(api, runs[kind]) == (RunState.CANCELLED, "Cancelled", "job paused"), kind
    assert _state(api, runs["running"])[0] is RunState.RUNNING  # running runs go on


def test_a_claim_that_raced_the_pause_is_refused(api: Api) -> None:
    name, runs = _job_with_runs(api)
    api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=name))
    claims = api.store.claim([AttemptRef.of(runs["queued"])], "ex2", datetime.now(UTC))
    assert claims[0].status is ClaimStatus.CANCELLED
    # A run the watcher made from the job as it read it just before the pause.
    job = api.store.get_job(parse_job_name(name))
    late = new_run(
        job,
        datetime.now(UTC),
        datetime.now(UTC),
        RunTrigger.SCHEDULE,
        heartbeat_timeout=DEFAULT_HEARTBEAT_TIMEOUT,
    )
    api.store.create_run(late)
    assert api.store.claim([AttemptRef.of(late)], "ex2", datetime.now(UTC))[0].status is ClaimStatus.CANCELLED
    assert _state(api, late) == (RunState.CANCELLED, "Cancelled", "job paused")


def test_a_delete_withdraws_the_runs_and_refuses_their_claims(api: Api) -> None:
    name, runs = _job_with_runs(api)
    api.jobs.DeleteJob(job_service_pb2.DeleteJobRequest(name=name))
    for kind in ("scheduled", "queued"):
        assert _state(api, runs[kind]) == (RunState.CANCELLED, "Cancelled", "job deleted"), kind
    claims = api.store.claim([AttemptRef.of(runs["queued"])], "ex2", datetime.now(UTC))
    assert claims[0].status is ClaimStatus.CANCELLED


def test_a_schedule_change_withdraws_the_old_schedules_runs(api: Api) -> None:
    name, runs = _job_with_runs(api)
    api.jobs.UpdateJob(
        job_service_pb2.UpdateJobRequest(
            job=_named(name, "0 0 1 1 *"), update_mask=field_mask_pb2.FieldMask(paths=["schedule"])
        )
    )
    for kind in ("scheduled", "queued"):
        assert _state(api, runs[kind]) == (RunState.CANCELLED, "Cancelled", "schedule changed"), kind
    assert _state(api, runs["running"])[0] is RunState.RUNNING


def test_resume_plans_the_next_run_at_the_next_fire_time_from_now(api: Api) -> None:
    name, _ = _job_with_runs(api)
    api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=name))
    before = datetime.now(UTC)
    resumed = api.jobs.ResumeJob(job_service_pb2.ResumeJobRequest(name=name)).job
    after = datetime.now(UTC)
    cron = job_pb2.Schedule.Cron(expression=EVERY_5_MINUTES)
    fire_times = {first_cron_occurrence(cron, before), first_cron_occurrence(cron, after)}
    assert resumed.state == job_pb2.JOB_STATE_ACTIVE
    # The next fire time is made into a run at once (and handed out) when it is due within the threshold,
    # else planned.
    query = ListQuery((Comparison("state", "!=", RunState.CANCELLED.value),), (), 10, "")
    made = {run.schedule_time for run in api.store.list_runs(parse_job_name(name), query).items}
    assert fire_times & (made | {resumed.next_run_time.ToDatetime(UTC)})


def test_resume_makes_the_next_run_at_once_when_it_is_due_soon(api: Api) -> None:
    name = create(api, command_job(expression="* * * * * *")).job.name
    api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=name))
    resumed_at = datetime.now(UTC)
    api.jobs.ResumeJob(job_service_pb2.ResumeJobRequest(name=name))
    query = ListQuery((Comparison("state", "!=", RunState.CANCELLED.value),), (), 10, "")
    runs = api.store.list_runs(parse_job_name(name), query).items
    assert [run.create_time >= resumed_at for run in runs] == [True]  # the pause withdrew the first one
    assert resumed_at < runs[0].schedule_time <= resumed_at + timedelta(seconds=1)


def _named(name: str, expression: str) -> job_pb2.Job:
    job = job_pb2.Job(name=name)
    job.schedule.cron.expression = expression
    return job
