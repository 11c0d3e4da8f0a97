from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobmesh.core.definitions import SchedulingPolicy, plan_schedule
from jobmesh.core.records import JobState
from jobmesh.core.schedules import CronError, next_occurrence, parse_cron
from jobmesh.v1 import job_pb2

NOW = datetime(2026, 3, 28, 12, 0, 0, 500_000, tzinfo=UTC)


def test_six_fields_lead_with_seconds() -> None:
    spec = parse_cron("*/10 * * * * *", "")
    assert next_occurrence(spec, NOW) == datetime(2026, 3, 28, 12, 0, 10, tzinfo=UTC)


def test_macros_and_time_zones() -> None:
    spec = parse_cron("@daily", "Asia/Tokyo")
    assert next_occurrence(spec, NOW) == datetime(2026, 3, 28, 15, 0, tzinfo=UTC)  # midnight in Tokyo


@pytest.mark.parametrize(
    ("expression", "zone", "complaint"),
    [
        ("", "", "empty"),
        ("* * * *", "", "expected 5 fields"),
        ("* * * * * * *", "", "expected 5 fields"),
        ("61 * * * *", "", "not a valid"),
        ("@reboot", "", "unknown macro"),
        ("* * * * *", "Mars/Olympus", "IANA"),
        ("* * * * *", "../../etc/passwd", "IANA"),
        ("0 0 31 2 *", "", "never matches"),
    ],
)
def test_bad_expressions(expression: str, zone: str, complaint: str) -> None:
    with pytest.raises(CronError, match=complaint):
        parse_cron(expression, zone)


def _cron_job(expression: str, **extra: object) -> job_pb2.Job:
    return job_pb2.Job(schedule=job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression=expression, **extra)))  # type: ignore[arg-type]


def test_a_cron_occurrence_within_the_threshold_is_made_at_once() -> None:
    plan = plan_schedule(_cron_job("* * * * * *"), NOW, SchedulingPolicy())
    assert plan.first_run_time == datetime(2026, 3, 28, 12, 0, 1, tzinfo=UTC)
    assert plan.next_run_time == datetime(2026, 3, 28, 12, 0, 2, tzinfo=UTC)
    assert plan.state is JobState.ACTIVE


def test_a_later_cron_occurrence_waits() -> None:
    plan = plan_schedule(
        _cron_job("0 * * * *"), NOW, SchedulingPolicy(immediate_threshold=timedelta(seconds=30))
    )
    assert plan.first_run_time is None
    assert plan.next_run_time == datetime(2026, 3, 28, 13, 0, tzinfo=UTC)


def test_start_and_end_times_bound_the_schedule() -> None:
    start = job_pb2.Job().create_time.__class__()
    start.FromDatetime(datetime(2026, 4, 1, 0, 0, tzinfo=UTC))
    plan = plan_schedule(_cron_job("0 0 * * *", start_time=start), NOW, SchedulingPolicy())
    assert plan.next_run_time == datetime(2026, 4, 1, 0, 0, tzinfo=UTC)  # exactly at start_time counts
    end = job_pb2.Job().create_time.__class__()
    end.FromDatetime(datetime(2026, 3, 28, 12, 30, tzinfo=UTC))
    ended = plan_schedule(_cron_job("0 * * * *", end_time=end), NOW, SchedulingPolicy())
    assert ended.next_run_time is None
    assert ended.state is JobState.COMPLETED


PARIS = "Europe/Paris"


def _local_times(expression: str, after: datetime, count: int) -> list[str]:
    spec = parse_cron(expression, PARIS)
    times, cursor = [], after
    for _ in range(count):
        cursor = next_occurrence(spec, cursor)
        times.append(cursor.astimezone(spec.time_zone).isoformat())
    return times


def test_a_local_time_that_does_not_exist_runs_at_the_next_valid_instant() -> None:
    # 2026-03-29: clocks in Paris jump from 02:00 to 03:00, so 02:30 does not exist that day.
    assert _local_times("30 2 * * *", datetime(2026, 3, 28, 12, tzinfo=UTC), 2) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]


def test_a_local_time_that_repeats_runs_once() -> None:
    # 2026-10-25: clocks in Paris fall back from 03:00 to 02:00, so 02:30 happens twice; it runs once.
    assert _local_times("30 2 * * *", datetime(2026, 10, 24, 12, tzinfo=UTC), 2) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]
    assert _local_times("*/30 * * * *", datetime(2026, 10, 24, 23, 40, tzinfo=UTC), 4) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T03:00:00+01:00",
        "2026-10-25T03:30:00+01:00",
    ]
