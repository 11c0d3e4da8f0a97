"""A job's `next_run_time` is its next fire time from now (`PreviewSchedule`'s first entry), not how far
ahead the mesh made runs; runs made ahead of their time show only when asked for (`show_upcoming`); and a
`run_at` already passed runs at once and is marked on its run. On both stores."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import grpc
from google.protobuf import timestamp_pb2

from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.server.errors import call_error, field_violations
from tests.server.test_job_service import command_job, create, unique

# An occurrence every minute (six fields, second 0): the first one is always due within the server's
# one-minute threshold, so it is made into a run at create, and the stored cursor moves to the one after.
EVERY_MINUTE = "0 * * * * *"


def first_fire_time(api: Api, schedule: job_pb2.Schedule) -> timestamp_pb2.Timestamp | None:
    request = search_service_pb2.PreviewScheduleRequest(schedule=schedule, count=1)
    times = api.search.PreviewSchedule(request).fire_times
    return times[0] if times else None


def read_beside_preview(api: Api, read: Callable[[], job_pb2.Job]) -> tuple[job_pb2.Job, object]:
    """The job as `read` answers, and PreviewSchedule's first fire time read between two such answers: read
    again when a fire time passed meanwhile (the two answers differ)."""
    for _ in range(5):
        before = read()
        preview = first_fire_time(api, before.schedule)
        after = read()
        if before.next_run_time == after.next_run_time:
            return after, preview
    raise AssertionError("the next run time kept moving")


def get_job(api: Api, name: str) -> job_pb2.Job:
    return api.jobs.GetJob(job_service_pb2.GetJobRequest(name=name)).job


def listed_job(api: Api, name: str) -> job_pb2.Job:
    request = search_service_pb2.ListJobsRequest(filter=f'name = "{name}"')
    (job,) = api.search.ListJobs(request).jobs
    return job


def test_next_run_time_is_the_first_fire_time_not_the_runs_made_ahead(api: Api) -> None:
    created = create(api, command_job(expression=EVERY_MINUTE))
    assert created.HasField("run")  # the first occurrence was made into a run at once
    assert created.job.next_run_time == created.run.schedule_time
    for read in (lambda: get_job(api, created.job.name), lambda: listed_job(api, created.job.name)):
        job, preview = read_beside_preview(api, read)
        assert job.HasField("next_run_time")
        assert job.next_run_time == preview


def test_a_far_cron_occurrence_is_the_next_run_time_too(api: Api) -> None:
    created = create(api, command_job(expression="0 3 * * *", time_zone="Europe/Paris"))
    job, preview = read_beside_preview(api, lambda: get_job(api, created.job.name))
    assert job.next_run_time == preview


def test_batch_create_answers_the_first_fire_time_in_its_basic_view(api: Api) -> None:
    request = job_service_pb2.BatchCreateJobsRequest(
        requests=[job_service_pb2.CreateJobRequest(job=command_job(expression=EVERY_MINUTE), job_id=unique())]
    )
    (result,) = api.jobs.BatchCreateJobs(request).results
    assert result.job.next_run_time == result.run.schedule_time
    assert result.job.next_run_time.ToDatetime(UTC) > datetime.now(UTC) - timedelta(seconds=1)


def test_a_paused_job_has_no_next_run_and_a_resumed_one_its_next_fire_time(api: Api) -> None:
    job = create(api, command_job(expression=EVERY_MINUTE)).job
    paused = api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=job.name)).job
    assert not paused.HasField("next_run_time")
    assert not get_job(api, job.name).HasField("next_run_time")
    assert not listed_job(api, job.name).HasField("next_run_time")
    api.jobs.ResumeJob(job_service_pb2.ResumeJobRequest(name=job.name))
    resumed, preview = read_beside_preview(api, lambda: get_job(api, job.name))
    assert resumed.next_run_time == preview


def test_a_run_at_ahead_is_the_next_run_time_and_one_passed_or_immediate_has_none(api: Api) -> None:
    ahead = create(api, command_job(run_at=datetime.now(UTC) + timedelta(hours=2))).job
    assert get_job(api, ahead.name).next_run_time == ahead.schedule.run_at
    assert first_fire_time(api, ahead.schedule) == ahead.schedule.run_at
    passed = create(api, command_job(run_at=datetime.now(UTC) - timedelta(hours=1))).job
    assert not get_job(api, passed.name).HasField("next_run_time")
    immediate = create(api, command_job()).job
    assert not get_job(api, immediate.name).HasField("next_run_time")


def test_a_cron_that_has_ended_has_no_next_run(api: Api) -> None:
    job = command_job(expression="0 3 * * *")
    job.schedule.cron.end_time.FromDatetime(datetime.now(UTC) + timedelta(seconds=2))
    created = create(api, job).job
    assert first_fire_time(api, created.schedule) is None
    assert not get_job(api, created.name).HasField("next_run_time")


# Upcoming runs ------------------------------------------------------------------------------------------


def list_runs(api: Api, parent: str, *, filter_text: str = "", show_upcoming: bool = False) -> list[str]:
    request = search_service_pb2.ListRunsRequest(
        parent=parent, filter=filter_text, show_upcoming=show_upcoming
    )
    return [run.name for run in api.search.ListRuns(request).runs]


def test_list_runs_leaves_upcoming_runs_out_unless_asked(api: Api) -> None:
    upcoming = create(api, command_job(run_at=datetime.now(UTC) + timedelta(minutes=30)))
    due = create(api, command_job(run_at=datetime.now(UTC) - timedelta(seconds=5)))
    assert list_runs(api, upcoming.job.name) == []
    assert list_runs(api, upcoming.job.name, filter_text="state = SCHEDULED") == []
    assert list_runs(api, upcoming.job.name, show_upcoming=True) == [upcoming.run.name]
    assert list_runs(api, due.job.name) == [due.run.name]  # due already: not upcoming, whatever its state
    every = set(
        list_runs(api, "jobs/-", filter_text=f'create_time >= "{_rfc3339(upcoming.run.create_time)}"')
    )
    assert due.run.name in every
    assert upcoming.run.name not in every


def test_a_cancelled_future_run_is_history_not_upcoming(api: Api) -> None:
    created = create(api, command_job(run_at=datetime.now(UTC) + timedelta(minutes=30)))
    api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=created.run.name))
    assert list_runs(api, created.job.name) == [created.run.name]


def test_a_page_token_with_upcoming_runs_does_not_go_on_without_them(api: Api) -> None:
    job = create(api, command_job(run_at=datetime.now(UTC) + timedelta(minutes=30))).job
    api.jobs.RunJobNow(job_service_pb2.RunJobNowRequest(name=job.name))
    first_page = search_service_pb2.ListRunsRequest(parent=job.name, page_size=1, show_upcoming=True)
    token = api.search.ListRuns(first_page).next_page_token
    assert token
    request = search_service_pb2.ListRunsRequest(parent=job.name, page_size=1, page_token=token)
    error = call_error(lambda: api.search.ListRuns(request), grpc.StatusCode.INVALID_ARGUMENT)
    assert list(field_violations(error)) == ["page_token"]


def _rfc3339(time: timestamp_pb2.Timestamp) -> str:
    return time.ToDatetime(UTC).isoformat().replace("+00:00", "Z")


def first_watched(api: Api, parent: str, *, show_upcoming: bool) -> list[str]:
    request = search_service_pb2.WatchRunsRequest(parent=parent, show_upcoming=show_upcoming)
    stream = api.search.WatchRuns(request, timeout=20)
    try:
        return [run.name for run in next(stream).runs]
    finally:
        stream.cancel()


def test_watch_runs_leaves_upcoming_runs_out_of_its_first_page_and_changes_unless_asked(api: Api) -> None:
    job = create(api, command_job(run_at=datetime.now(UTC) + timedelta(minutes=30)))
    assert first_watched(api, job.job.name, show_upcoming=False) == []
    assert first_watched(api, job.job.name, show_upcoming=True) == [job.run.name]
    stream = api.search.WatchRuns(search_service_pb2.WatchRunsRequest(parent="jobs/-"), timeout=20)
    try:
        next(stream)
        later = create(api, command_job(run_at=datetime.now(UTC) + timedelta(minutes=30)))
        now = create(api, command_job())
        seen: set[str] = set()
        while now.run.name not in seen:  # the changes come in commit order: `later` before `now`
            seen |= {run.name for run in next(stream).runs}
        assert later.run.name not in seen
    finally:
        stream.cancel()


# A run_at already passed --------------------------------------------------------------------------------


def test_a_run_at_in_the_past_runs_at_once_and_is_marked(api: Api) -> None:
    created = create(api, command_job(run_at=datetime.now(UTC) - timedelta(hours=1)))
    run = created.run
    assert run.created_after_schedule_time
    assert run.state in {run_pb2.RUN_STATE_SCHEDULED, run_pb2.RUN_STATE_QUEUED}
    # Handed to the queue by the server's bypass at once (no watcher runs here), off the request path.
    deadline = time.monotonic() + 10
    fetched = api.search.GetRun(search_service_pb2.GetRunRequest(name=run.name)).run
    while fetched.state == run_pb2.RUN_STATE_SCHEDULED and time.monotonic() < deadline:
        time.sleep(0.05)
        fetched = api.search.GetRun(search_service_pb2.GetRunRequest(name=run.name)).run
    assert fetched.state == run_pb2.RUN_STATE_QUEUED
    assert fetched.created_after_schedule_time


def test_runs_made_on_or_ahead_of_time_are_not_marked(api: Api) -> None:
    ahead = create(api, command_job(run_at=datetime.now(UTC) + timedelta(minutes=10))).run
    immediate = create(api, command_job())
    now = api.jobs.RunJobNow(job_service_pb2.RunJobNowRequest(name=immediate.job.name)).run
    cron = create(api, command_job(expression=EVERY_MINUTE)).run
    for run in (ahead, immediate.run, now, cron):
        assert not run.created_after_schedule_time, run.name
