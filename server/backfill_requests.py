"""The checks of a `BackfillJob` request that need no job: its range and its pace."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from jobmesh.core.backfill import DEFAULT_PACE, MAX_PACE, MIN_PACE
from jobmesh.core.names import parse_job_name
from jobmesh.server.validation import Violations, check_request_id
from jobmesh.v1 import job_service_pb2


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
