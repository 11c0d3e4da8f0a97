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
        ("61 * * * *", "", "minute field: 61 is out of range 0-59"),
        ("@reboot", "", "unknown macro"),
        ("* * * * *", "Mars/Olympus", "IANA"),
        ("* * * * *", "../../etc/passwd", "IANA"),
        ("0 0 31 2 *", "", "never matches"),
    ],
)
def test_bad_expressions(expression: str, zone: str, complaint: str) -> None:
    with pytest.raises(CronError, match=complaint):
        parse_cron(expression, zone)


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ("60 * * * * *", "second field: 60 is out of range 0-59"),
        ("61 * * * *", "minute field: 61 is out of range 0-59"),
        ("1-70 * * * *", "minute field: 70 is out of range 0-59"),
        ("0 25 * * *", "hour field: 25 is out of range 0-23"),
        ("0 0 32 * *", "day of month field: 32 is out of range 1-31"),
        ("0 0 0 * *", "day of month field: 0 is out of range 1-31"),
        ("0 0 * 13 *", "month field: 13 is out of range 1-12"),
        ("0 0 * 0 *", "month field: 0 is out of range 1-12"),
        ("0 0 * * 8", "day of week field: 8 is out of range 0-7"),
        ("0 0 1,2,99 * *", "day of month field: 99 is out of range 1-31"),
    ],
)
def test_a_value_out_of_its_fields_range_names_the_field_and_the_range(
    expression: str, complaint: str
) -> None:
    with pytest.raises(CronError) as raised:
        parse_cron(expression, "")
    assert str(raised.value) == complaint


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ("x * * * * *", "second field: 'x' is not a value in 0-59"),
        ("x * * * *", "minute field: 'x' is not a value in 0-59"),
        ("0 noon * * *", "hour field: 'noon' is not a value in 0-23"),
        ("0 0 LW * *", "day of month field: 'LW' is not a value in 1-31 or L"),
        ("0 0 * foo *", "month field: 'foo' is not a value in 1-12 or jan-dec"),
        ("0 0 * * sun-xyz", "day of week field: 'xyz' is not a value in 0-7 or sun-sat"),
        ("*/x * * * *", "minute field: 'x' is not a step (1 to 60)"),
        ("0 1--2 * * *", "hour field: '1--2' is not a value, a range or a step"),
        (", * * * *", "minute field: '' is not a value, a range or a step"),
    ],
)
def test_garbage_in_a_field_names_the_field_and_what_it_takes(expression: str, complaint: str) -> None:
    with pytest.raises(CronError) as raised:
        parse_cron(expression, "")
    assert str(raised.value) == complaint


@pytest.mark.parametrize(
    "expression",
    ["0 0 * * 7", "0 0 * * mon-fri", "0 0 * JAN-dec *", "0 0 L * *", "0 0 * * 5#3", "*/15 0-23/2 1,15 * *"],
)
def test_the_forms_each_field_takes_are_accepted(expression: str) -> None:
    parse_cron(expression, "")


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
