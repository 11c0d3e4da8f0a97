"""`PreviewSchedule`: the next fire times of a schedule, by the watcher's own rules (`core.occurrences`)."""

from __future__ import annotations

from datetime import datetime

from jobmesh.core.occurrences import fire_times
from jobmesh.core.timestamps import to_timestamp
from jobmesh.server.api.validation import Violations, check_schedule
from jobmesh.v1 import search_service_pb2

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
    times = fire_times(schedule, after, request.count or DEFAULT_PREVIEW_COUNT)
    zone = schedule.cron.time_zone if schedule.WhichOneof("kind") == "cron" else ""
    return search_service_pb2.PreviewScheduleResponse(
        fire_times=[to_timestamp(time) for time in times], time_zone=zone or "UTC"
    )
