"""BackfillJob through a real gRPC server, against SQLite and PostgreSQL: the runs it makes (one per past
occurrence, marked, paced), its idempotent retry, the audit event, pause, and every bad input."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.server.errors import call_error, error_info, field_violations
from tests.server.test_job_service import command_job, create, unique

INVALID = grpc.StatusCode.INVALID_ARGUMENT
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION


def day_before_yesterday() -> datetime:
    return (datetime.now(UTC) - timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)


def backfill_request(
    name: str,
    start: datetime | None,
    end: datetime | None,
    *,
    pace: timedelta | None = None,
    request_id: str = "",
) -> job_service_pb2.BackfillJobRequest:
    request = job_service_pb2.BackfillJobRequest(name=name, request_id=request_id)
    if start is not None:
        request.start_time.FromDatetime(start)
    if end is not None:
        request.end_time.FromDatetime(end)
    if pace is not None:
        request.pace.FromTimedelta(pace)
    return request


def backfill(api: Api, *args: object, **kwargs: object) -> job_service_pb2.BackfillJobResponse:
    response: job_service_pb2.BackfillJobResponse = api.jobs.BackfillJob(backfill_request(*args, **kwargs))  # type: ignore[arg-type]
    return response


def runs_of(api: Api, job: str) -> list[run_pb2.Run]:
    """The job's backfill runs (its schedule may make one of its own meanwhile)."""
    runs: list[run_pb2.Run] = []
    token = ""
    while True:
        request = search_service_pb2.ListRunsRequest(
            parent=job,
            filter="trigger = BACKFILL",
            page_size=1000,
            page_token=token,
            order_by="schedule_time",
        )
        page = api.search.ListRuns(request)
        runs += page.runs
        if not (token := page.next_page_token):
            return runs


def test_a_day_every_five_minutes_makes_288_paced_backfill_runs(api: Api) -> None:
    job = create(api, command_job(expression="*/5 * * * *")).job
    start = day_before_yesterday()
    before = datetime.now(UTC)
    made = backfill(api, job.name, start, start + timedelta(days=1), pace=timedelta(milliseconds=250))
    assert made.run_count == 288
    assert made.first_schedule_time.ToDatetime(UTC) == start
    assert made.last_schedule_time.ToDatetime(UTC) == start + timedelta(days=1, minutes=-5)
    runs = runs_of(api, job.name)
    assert {run.trigger for run in runs} == {run_pb2.RUN_TRIGGER_BACKFILL}
    assert len(runs) == 288
    assert [run.schedule_time.ToDatetime(UTC) for run in runs] == [
        start + timedelta(minutes=5 * i) for i in range(288)
    ]
    assert {run.state for run in runs} <= {run_pb2.RUN_STATE_SCHEDULED, run_pb2.RUN_STATE_QUEUED}
    due = [run.due_time.ToDatetime(UTC) for run in runs]
    assert before - timedelta(seconds=1) <= due[0] <= datetime.now(UTC)
    assert [later - earlier for earlier, later in itertools.pairwise(due)] == [
        timedelta(milliseconds=250)
    ] * 287
    assert made.last_due_time.ToDatetime(UTC) == due[-1]


def last_daylight_saving_change(now: datetime) -> datetime:
    """The start of 21 days, ended before now, around Europe's latest clock change (last Sunday of March
    or of October): always within the year a backfill may reach."""
    starts = [datetime(year, month, 15, tzinfo=UTC) for year in (now.year - 1, now.year) for month in (3, 10)]
    return max(start for start in starts if start + timedelta(days=21) <= now)


def test_occurrences_are_the_schedules_own_in_its_time_zone(api: Api) -> None:
    """The same fire times PreviewSchedule gives (one code for both), across a daylight saving change."""
    cron = job_pb2.Schedule.Cron(expression="30 2 * * *", time_zone="Europe/Paris")
    job = create(api, command_job(expression=cron.expression, time_zone=cron.time_zone)).job
    start = last_daylight_saving_change(datetime.now(UTC))
    end = start + timedelta(days=21)
    made = backfill(api, job.name, start, end, pace=timedelta(milliseconds=10))
    preview = search_service_pb2.PreviewScheduleRequest(schedule=job_pb2.Schedule(cron=cron), count=100)
    preview.after_time.FromDatetime(start - timedelta(microseconds=1))
    expected = [
        moment.ToDatetime(UTC)
        for moment in api.search.PreviewSchedule(preview).fire_times
        if moment.ToDatetime(UTC) < end
    ]
    runs = runs_of(api, job.name)
    assert {run.trigger for run in runs} == {run_pb2.RUN_TRIGGER_BACKFILL}
    assert made.run_count == len(runs) == len(expected) == 21
    assert [run.schedule_time.ToDatetime(UTC) for run in runs] == expected
    # The zone's local 02:30: 00:30 UTC in summer, 01:30 UTC in winter.
    assert {(0, 30), (1, 30)} <= {(moment.hour, moment.minute) for moment in expected}


def test_range_start_is_included_and_end_excluded(api: Api) -> None:
    job = create(api, command_job(expression="0 * * * *")).job
    start = day_before_yesterday()
    made = backfill(api, job.name, start, start + timedelta(hours=3))
    assert made.run_count == 3
    assert made.last_schedule_time.ToDatetime(UTC) == start + timedelta(hours=2)
    empty = backfill(api, job.name, start + timedelta(minutes=1), start + timedelta(minutes=59))
    assert empty.run_count == 0
    assert not empty.HasField("first_schedule_time")


def test_a_retried_request_id_makes_no_run_again(api: Api) -> None:
    job = create(api, command_job(expression="0 * * * *")).job
    start, request_id = day_before_yesterday(), unique("req")
    first = backfill(api, job.name, start, start + timedelta(hours=6), request_id=request_id)
    again = backfill(api, job.name, start, start + timedelta(hours=6), request_id=request_id)
    assert first.run_count == again.run_count == 6
    assert again.last_due_time == first.last_due_time
    assert len(runs_of(api, job.name)) == 6
    other = backfill_request(job.name, start, start + timedelta(hours=5), request_id=request_id)
    call_error(lambda: api.jobs.BackfillJob(other), grpc.StatusCode.ALREADY_EXISTS)
    assert len(runs_of(api, job.name)) == 6


def test_the_backfill_is_audited_once(api: Api) -> None:
    job = create(api, command_job(expression="0 * * * *")).job
    start = day_before_yesterday()
    backfill(api, job.name, start, start + timedelta(hours=2), request_id="audited-backfill")
    request = search_service_pb2.ListAuditEventsRequest(filter=f'job = "{job.name}" AND action = BACKFILL')
    events = api.search.ListAuditEvents(request).audit_events
    assert [(event.resource, event.request_id) for event in events] == [(job.name, "audited-backfill")]


def test_a_pause_cancels_the_pending_backfill_runs(api: Api) -> None:
    job = create(api, command_job(expression="0 * * * *")).job
    start = day_before_yesterday()
    backfill(api, job.name, start, start + timedelta(hours=4), pace=timedelta(minutes=10))
    api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=job.name))
    runs = runs_of(api, job.name)
    assert len(runs) == 4
    assert {run.state for run in runs[1:]} == {run_pb2.RUN_STATE_CANCELLED}
    error = call_error(
        lambda: api.jobs.BackfillJob(backfill_request(job.name, start, start + timedelta(hours=1))),
        PRECONDITION,
    )
    assert error_info(error).reason == "JOB_PAUSED"


@pytest.mark.parametrize(
    ("change", "field", "description"),
    [
        ({"start": None}, "start_time", "required"),
        ({"end": None}, "end_time", "required"),
        ({"end": "start"}, "end_time", "must be after start_time"),
        ({"end": "future"}, "end_time", "must not be in the future"),
        ({"start": "future", "end": "later"}, "start_time", "must not be in the future"),
        ({"start": "ancient"}, "start_time", "more than a year in the past"),
        ({"pace": timedelta(milliseconds=5)}, "pace", "at least 10 ms"),
        ({"pace": timedelta(0)}, "pace", "at least 10 ms"),
        ({"pace": timedelta(seconds=-1)}, "pace", "must not be negative"),
        ({"pace": timedelta(hours=2)}, "pace", "at most 1:00:00"),
        ({"request_id": "x" * 129}, "request_id", "longer than 128"),
    ],
)
def test_bad_ranges_and_paces_are_field_violations(
    api: Api, change: dict[str, object], field: str, description: str
) -> None:
    job = create(api, command_job(expression="0 * * * *")).job
    start = day_before_yesterday()
    now = datetime.now(UTC)
    moments = {
        "start": start,
        "future": now + timedelta(hours=1),
        "later": now + timedelta(hours=2),
        "ancient": now - timedelta(days=400),
    }
    values: dict[str, object] = {"start": start, "end": start + timedelta(hours=1)}
    for key, value in change.items():
        values[key] = moments.get(value, value) if isinstance(value, str) and key != "request_id" else value
    request = backfill_request(job.name, **values)  # type: ignore[arg-type]
    violations = field_violations(call_error(lambda: api.jobs.BackfillJob(request), INVALID))
    assert description in violations[field]
    assert runs_of(api, job.name) == []


def test_a_range_of_more_than_the_maximum_is_refused(api: Api) -> None:
    job = create(api, command_job(expression="* * * * * *")).job  # every second: 86,400 a day
    start = day_before_yesterday()
    request = backfill_request(job.name, start, start + timedelta(days=1))
    violations = field_violations(call_error(lambda: api.jobs.BackfillJob(request), INVALID))
    assert "more than 10000 occurrences" in violations["end_time"]
    assert runs_of(api, job.name) == []


def test_only_an_existing_cron_job_can_be_backfilled(api: Api) -> None:
    start = day_before_yesterday()
    end = start + timedelta(hours=1)
    once = create(api, command_job(run_at=datetime.now(UTC) + timedelta(days=1))).job
    error = call_error(lambda: api.jobs.BackfillJob(backfill_request(once.name, start, end)), PRECONDITION)
    assert error_info(error).reason == "JOB_NOT_CRON"
    missing = backfill_request(f"jobs/{unique()}", start, end)
    call_error(lambda: api.jobs.BackfillJob(missing), grpc.StatusCode.NOT_FOUND)
    deleted = create(api, command_job(expression="0 * * * *")).job
    api.jobs.DeleteJob(job_service_pb2.DeleteJobRequest(name=deleted.name))
    call_error(
        lambda: api.jobs.BackfillJob(backfill_request(deleted.name, start, end)), grpc.StatusCode.NOT_FOUND
    )
    bad_name = backfill_request("nightly", start, end)
    assert "name" in field_violations(call_error(lambda: api.jobs.BackfillJob(bad_name), INVALID))
