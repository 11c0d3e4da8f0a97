"""The checks of a `BackfillJob` request (its range, its pace, its job) and what a backfill answers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from jobmesh.core.backfill import DEFAULT_PACE, MAX_PACE, MIN_PACE
from jobmesh.core.errors import FailedPrecondition
from jobmesh.core.names import parse_job_name
from jobmesh.core.records import JobState
from jobmesh.server.api.validation import Violations, check_request_id
from jobmesh.v1 import job_pb2, job_service_pb2


@dataclass(frozen=True, slots=True)
class Backfill:
    """What a backfill made: how many runs, the first and last occurrences, and when the last run is due."""

    run_count: int
    first_schedule_time: datetime | None = None
    last_schedule_time: datetime | None = None
    last_due_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class BackfillRange:
    """[start, end) and the time between two runs' due times."""

    start: datetime
    end: datetime
    pace: timedelta


def check_backfill(request: job_service_pb2.BackfillJobRequest, now: datetime) -> BackfillRange:
    """Raises InvalidArgument with a field violation per problem."""
    parse_job_name(request.name)
    found = Violations()
    check_request_id(found, request.request_id)
    start = _bound(found, request, "start_time", now)
    end = _bound(found, request, "end_time", now)
    if start is not None and end is not None and end <= start:
        found.add("end_time", "must be after start_time (the range is [start_time, end_time))")
    pace = (
        found.duration("pace", request.pace, maximum=MAX_PACE) if request.HasField("pace") else DEFAULT_PACE
    )
    if pace is not None and pace < MIN_PACE:
        found.add("pace", f"must be at least {MIN_PACE.total_seconds() * 1000:.0f} ms")
    found.raise_if_any()
    # raise_if_any refused the request otherwise
    assert start is not None
    assert end is not None
    assert pace is not None
    return BackfillRange(start, end, pace)


def _bound(
    found: Violations, request: job_service_pb2.BackfillJobRequest, field: str, now: datetime
) -> datetime | None:
    if not request.HasField(field):  # type: ignore[arg-type]
        found.add(field, "required")
        return None
    moment = found.moment(field, getattr(request, field), now)
    if moment is not None and moment > now:
        found.add(field, "must not be in the future: a backfill runs past occurrences")
        return None
    return moment


def check_backfillable(name: str, state: JobState, spec: job_pb2.Job) -> None:
    """Only an active or completed cron job: a paused one's backfill runs would be cancelled by the pause
    (resume it first), and a job without a cron schedule has no occurrences."""
    if not spec.schedule.HasField("cron"):
        raise FailedPrecondition(
            f"{name} has no cron schedule: only a cron job's occurrences can be backfilled",
            reason="JOB_NOT_CRON",
            metadata={"job": name},
        )
    if state is JobState.PAUSED:
        raise FailedPrecondition(
            f"{name} is paused: resume it to backfill it", reason="JOB_PAUSED", metadata={"job": name}
        )
