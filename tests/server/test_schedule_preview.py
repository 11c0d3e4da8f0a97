"""SearchService.PreviewSchedule on a real gRPC server: the watcher's occurrences, validated as a create."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
from google.protobuf import timestamp_pb2

from jobmesh.v1 import job_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.server.errors import call_error, field_violations


def preview(
    api: Api, schedule: job_pb2.Schedule, **fields: object
) -> search_service_pb2.PreviewScheduleResponse:
    request = search_service_pb2.PreviewScheduleRequest(schedule=schedule, **fields)  # type: ignore[arg-type]
    response: search_service_pb2.PreviewScheduleResponse = api.search.PreviewSchedule(request)
    return response


def cron(expression: str, time_zone: str = "", **fields: object) -> job_pb2.Schedule:
    spec = job_pb2.Schedule.Cron(expression=expression, time_zone=time_zone, **fields)  # type: ignore[arg-type]
    return job_pb2.Schedule(cron=spec)


def times(response: search_service_pb2.PreviewScheduleResponse) -> list[datetime]:
    return [stamp.ToDatetime(UTC) for stamp in response.fire_times]


def test_cron_fire_times_in_its_time_zone_across_a_clock_change(api: Api) -> None:
    after = datetime(2030, 3, 29, 12, tzinfo=UTC)  # Paris moves to summer time on 31 March 2030
    response = preview(api, cron("30 2 * * *", "Europe/Paris"), after_time=_stamp(after))
    assert response.time_zone == "Europe/Paris"
    assert times(response) == [
        datetime(2030, 3, 30, 1, 30, tzinfo=UTC),  # 02:30 CET
        datetime(2030, 3, 31, 1, 0, tzinfo=UTC),  # 02:30 does not exist: the next valid instant, 03:00 CEST
        datetime(2030, 4, 1, 0, 30, tzinfo=UTC),  # 02:30 CEST
        datetime(2030, 4, 2, 0, 30, tzinfo=UTC),
        datetime(2030, 4, 3, 0, 30, tzinfo=UTC),
    ]


def test_count_start_and_end_bound_the_times(api: Api) -> None:
    after = datetime(2030, 1, 1, tzinfo=UTC)
    schedule = cron("0 * * * *", start_time=_stamp(after + timedelta(hours=5)))
    schedule.cron.end_time.CopyFrom(_stamp(after + timedelta(hours=7)))
    response = preview(api, schedule, after_time=_stamp(after), count=10)
    assert response.time_zone == "UTC"
    assert times(response) == [after + timedelta(hours=h) for h in (5, 6, 7)]
    assert len(preview(api, cron("* * * * * *"), count=100).fire_times) == 100
    assert len(preview(api, cron("@hourly")).fire_times) == 5  # 0 means 5


def test_the_times_end_with_the_calendar(api: Api) -> None:
    last_minute = datetime(9999, 12, 31, 23, 58, tzinfo=UTC)
    response = preview(api, cron("* * * * *"), after_time=_stamp(last_minute), count=5)
    assert times(response) == [datetime(9999, 12, 31, 23, 59, tzinfo=UTC)]


def test_one_shot_schedules(api: Api) -> None:
    now = datetime.now(UTC)
    ahead = job_pb2.Schedule(run_at=_stamp(now + timedelta(hours=1)))
    assert times(preview(api, ahead)) == [now + timedelta(hours=1)]
    past = job_pb2.Schedule(run_at=_stamp(now - timedelta(hours=1)))
    assert list(preview(api, past).fire_times) == []
    immediate = job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate())
    assert list(preview(api, immediate).fire_times) == []


def test_bad_input_names_each_field(api: Api) -> None:
    error = call_error(
        lambda: preview(api, cron("61 * * * *", "Mars/Olympus"), count=101), grpc.StatusCode.INVALID_ARGUMENT
    )
    assert set(field_violations(error)) == {
        "count",
        "schedule.cron.expression",
        "schedule.cron.time_zone",
    }
    missing = call_error(lambda: preview(api, job_pb2.Schedule()), grpc.StatusCode.INVALID_ARGUMENT)
    assert set(field_violations(missing)) == {"schedule"}


def _stamp(moment: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(moment)
    return stamp
