"""A backfill's occurrences (the schedule's own, in [start, end)), its paced runs, and their lateness."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from google.protobuf import duration_pb2

from jobmesh.core.backfill import backfill_runs
from jobmesh.core.lateness import run_lateness
from jobmesh.core.occurrences import cron_occurrences_between
from jobmesh.core.records import RunState, RunTrigger
from jobmesh.v1 import job_pb2
from tests.adapters.store.builders import job, run

START = datetime(2026, 3, 28, tzinfo=UTC)


def test_occurrences_are_those_of_the_range_in_the_time_zone() -> None:
    cron = job_pb2.Schedule.Cron(expression="30 2 * * *", time_zone="Europe/Paris")
    times = cron_occurrences_between(cron, START, START + timedelta(days=3), limit=10)
    # 02:30 does not exist on 29 March in Paris (clocks jump to 03:00): that day runs at the next instant.
    assert times == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
    ]


def test_the_start_is_included_the_end_excluded_and_the_schedules_own_bounds_kept() -> None:
    cron = job_pb2.Schedule.Cron(expression="0 * * * *")
    assert len(cron_occurrences_between(cron, START, START + timedelta(hours=3), limit=10)) == 3
    cron.start_time.FromDatetime(START + timedelta(hours=1))
    cron.end_time.FromDatetime(START + timedelta(hours=2))
    assert cron_occurrences_between(cron, START, START + timedelta(hours=5), limit=10) == [
        START + timedelta(hours=1),
        START + timedelta(hours=2),
    ]


def test_one_more_than_the_limit_tells_a_range_too_large() -> None:
    cron = job_pb2.Schedule.Cron(expression="* * * * *")
    assert len(cron_occurrences_between(cron, START, START + timedelta(days=1), limit=100)) == 101


def test_runs_keep_their_occurrence_and_are_due_at_the_pace() -> None:
    now = START + timedelta(days=30)
    times = [START + timedelta(minutes=5 * i) for i in range(4)]
    spec = job_pb2.Job(heartbeat_timeout=duration_pb2.Duration(seconds=40))
    record = job("nightly", spec=spec.SerializeToString())
    runs = backfill_runs(record, spec, times, now, timedelta(seconds=2), request_id="r", request_digest="d")
    assert [r.schedule_time for r in runs] == times
    assert [r.due_time for r in runs] == [now + timedelta(seconds=2 * i) for i in range(4)]
    assert {(r.trigger, r.state) for r in runs} == {(RunTrigger.BACKFILL, RunState.SCHEDULED)}
    assert [(r.request_id, r.request_hash) for r in runs] == [("r", "d")] + [(None, None)] * 3
    assert len({r.run_id for r in runs}) == 4
    assert {r.heartbeat_timeout for r in runs} == {timedelta(seconds=40)}


def test_a_backfill_runs_lateness_counts_from_its_due_time() -> None:
    scheduled = START
    due = START + timedelta(days=2)
    started = due + timedelta(milliseconds=300)
    backfilled = run("j", "r", trigger=RunTrigger.BACKFILL, schedule_time=scheduled, due_time=due)
    assert run_lateness(backfilled) is None
    assert run_lateness(replace(backfilled, first_start_time=started)) == timedelta(milliseconds=300)
    assert run_lateness(replace(backfilled, first_start_time=started, attempt=2)) is None
    made_ahead = scheduled - timedelta(
        minutes=1
    )  # a scheduled run made after its time counts from its making
    by_schedule = replace(
        backfilled, trigger=RunTrigger.SCHEDULE, first_start_time=started, create_time=made_ahead
    )
    assert run_lateness(by_schedule) == started - scheduled
