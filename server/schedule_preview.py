"""`PreviewSchedule`: the next fire times of a schedule, by the watcher's own rules (`core.occurrences`)."""

from __future__ import annotations

from datetime import datetime

from jobmesh.core.occurrences import first_cron_occurrence, next_cron_occurrence
from jobmesh.core.schedules import CronError
from jobmesh.core.timestamps import to_datetime, to_timestamp
from jobmesh.server.validation import Violations, check_schedule
from jobmesh.v1 import job_pb2, search_service_pb2

DEFAULT_PREVIEW_COUNT = 5
MAX_PREVIEW_COUNT = 100


def preview_schedule(
    request: search_service_pb2.PreviewScheduleRequest, now: datetime
) -> search_service_pb2.PreviewScheduleResponse:
    """Raises InvalidArgument, with a violation per bad field, as `CreateJob` would for the same schedule."""
    found = Violations()
    if not 0 <= request.count <= MAX_PREVIEW_COUNT:
        found.add("count", f"from 0 to {MAX_PREVIEW_COUNT}")
    after = found.timestamp("after_time", request.after_time) if request.HasField("after_time") else now
    schedule = request.schedule
    if not request.HasField("schedule") or not schedule.WhichOneof("kind"):
        found.add("schedule", "required: one of immediate, run_at or cron")
    else:
        check_schedule(found, schedule, now, "schedule")
    found.raise_if_any()
    assert after is not None
    times = _fire_times(schedule, after, request.count or DEFAULT_PREVIEW_COUNT)
    zone = schedule.cron.time_zone if schedule.WhichOneof("kind") == "cron" else ""
    return search_service_pb2.PreviewScheduleResponse(
        fire_times=[to_timestamp(time) for time in times], time_zone=zone or "UTC"
    )


def _fire_times(schedule: job_pb2.Schedule, after: datetime, count: int) -> list[datetime]:
    kind = schedule.WhichOneof("kind")
    if kind == "run_at":
        run_at = to_datetime(schedule.run_at)
        return [run_at] if run_at > after else []
    if kind != "cron":
        return []
    times: list[datetime] = []
    try:
        occurrence = first_cron_occurrence(schedule.cron, after)
        while occurrence is not None and len(times) < count:
            times.append(occurrence)
            occurrence = next_cron_occurrence(schedule.cron, occurrence)
    except (OverflowError, CronError):  # nothing after year 9999, or nothing at all: the times end here
        pass
    return times
