"""The requests the clients send, built from Python values once for both clients (sync and asyncio), and
the small values they answer with."""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, Unpack
from zoneinfo import ZoneInfo

from google.protobuf import field_mask_pb2, timestamp_pb2

from jobmesh.client._enums import BatchCreateJobsView, Priority, RunState
from jobmesh.client._errors import DeadlineExceeded, JobmeshError, error_from_status
from jobmesh.client._resources import (
    Backfill,
    BatchCreated,
    BulkFailure,
    BulkResult,
    Job,
    Run,
    SchedulePreview,
)
from jobmesh.client._specs import duration, timestamp
from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2
from jobmesh.v1 import search_service_pb2 as search

__all__ = [
    "TERMINAL_STATES",
    "CreatedJob",
    "JobFields",
    "UpdateFields",
    "backfill_job_request",
    "backfill_of",
    "batch_create_jobs_request",
    "batch_created",
    "create_job_request",
    "created_job",
    "deadline",
    "is_terminal",
    "job_name",
    "list_audit_events_request",
    "new_request_id",
    "parent_of_run",
    "preview_schedule_request",
    "remaining",
    "schedule_preview",
    "stream_timed_out",
    "update_job_request",
]

TERMINAL_STATES = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.TIMED_OUT, RunState.DEAD_LETTERED}
)


class JobFields(TypedDict, total=False):
    """The optional fields of a job, as keyword arguments."""

    display_name: str
    labels: Mapping[str, str]
    queue: str
    priority: Priority | int
    retry_policy: job_pb2.RetryPolicy
    execution_timeout: timedelta
    heartbeat_timeout: timedelta
    # Flow control: at most `concurrency_limit` runs of the jobs naming `concurrency_key` run at once.
    concurrency_key: str
    concurrency_limit: int


class UpdateFields(JobFields, total=False):
    """What an update may change: a job's fields, its schedule and its target."""

    schedule: job_pb2.Schedule
    target: job_pb2.Target


# A job's optional fields, which an update may reset to unset (its schedule and target are required).
_CLEARABLE = frozenset(JobFields.__optional_keys__)


@dataclass(frozen=True, slots=True)
class CreatedJob:
    """A created job, and the run created with it when one was due at once (None otherwise)."""

    job: Job
    run: Run | None


def created_job(answer: job_service_pb2.CreateJobResponse) -> CreatedJob:
    return CreatedJob(Job.of(answer.job), Run.of(answer.run) if answer.HasField("run") else None)


def is_terminal(run: Run | run_pb2.Run) -> bool:
    return run.state in TERMINAL_STATES


def job_name(name: str) -> str:
    """`jobs/{job}`, from that or from the bare job id."""
    return name if name.startswith("jobs/") else f"jobs/{name}"


def parent_of_run(name: str) -> str:
    """`jobs/{job}` of `jobs/{job}/runs/{run}`."""
    parent, runs, run = name.rpartition("/runs/")
    if not runs or not parent.startswith("jobs/") or not run:
        raise ValueError(f"{name!r} is not a run name (jobs/JOB/runs/RUN)")
    return parent


def deadline(timeout: timedelta | None) -> float | None:
    """The monotonic time a stream (reconnections included) must end by; None for no end."""
    return None if timeout is None else time.monotonic() + timeout.total_seconds()


def remaining(limit: float | None) -> float | None:
    """What is left until `limit`, as a call's gRPC timeout (None: as long as it is read)."""
    return None if limit is None else max(limit - time.monotonic(), 0.0)


def stream_timed_out(error: JobmeshError, limit: float | None) -> bool:
    """A watch or a log tail cut by its own `timeout`: the end the caller asked for, not a failure."""
    return limit is not None and isinstance(error, DeadlineExceeded)


def new_request_id() -> str:
    """One per logical create: its retries carry the same id, so the server makes the job once."""
    return uuid.uuid4().hex


def _set_fields(job: job_pb2.Job, fields: Mapping[str, Any]) -> list[str]:
    """Copies `fields` into `job`; the field paths set, for an update mask."""
    paths = []
    for key, value in fields.items():
        if value is None:
            continue
        paths.append(key)
        if key == "labels":
            job.labels.clear()
            job.labels.update(dict(value))
        elif isinstance(value, timedelta):
            getattr(job, key).CopyFrom(duration(value))
        elif key in ("schedule", "target", "retry_policy"):
            getattr(job, key).CopyFrom(value)
        elif key == "priority":
            job.priority = job_pb2.Priority.ValueType(Priority(value))  # an unknown number fails here
        else:
            setattr(job, key, value)
    return paths


def create_job_request(
    schedule: job_pb2.Schedule,
    target: job_pb2.Target,
    *,
    job_id: str = "",
    namespace: str = "",
    request_id: str | None = None,
    **fields: Unpack[JobFields],
) -> job_service_pb2.CreateJobRequest:
    job = job_pb2.Job(schedule=schedule, target=target, namespace=namespace)
    _set_fields(job, fields)
    return job_service_pb2.CreateJobRequest(job=job, job_id=job_id, request_id=request_id or new_request_id())


def update_job_request(
    name: str, *, etag: str = "", clear: Collection[str] = (), **fields: Unpack[UpdateFields]
) -> job_service_pb2.UpdateJobRequest:
    """Sets `fields` and resets the fields named in `clear` to unset (no execution timeout, no labels…)."""
    job = job_pb2.Job(name=job_name(name), etag=etag)
    unknown = sorted(set(clear) - _CLEARABLE)
    if unknown:
        raise ValueError(f"cannot clear {', '.join(unknown)}: only {', '.join(sorted(_CLEARABLE))}")
    both = sorted(set(clear) & fields.keys())
    if both:
        raise ValueError(f"{', '.join(both)}: set or cleared, not both")
    paths = _set_fields(job, fields) + sorted(set(clear))
    if not paths:
        raise ValueError("nothing to update: name at least one field")
    return job_service_pb2.UpdateJobRequest(job=job, update_mask=field_mask_pb2.FieldMask(paths=paths))


def batch_create_jobs_request(
    requests: Iterable[job_service_pb2.CreateJobRequest], view: BatchCreateJobsView | int
) -> job_service_pb2.BatchCreateJobsRequest:
    """The batch, each item with a request id of its own (one is made where none was given, so a retried
    batch makes each job once)."""
    batch = job_service_pb2.BatchCreateJobsRequest(
        requests=list(requests), view=job_service_pb2.BatchCreateJobsView.ValueType(BatchCreateJobsView(view))
    )
    for item in batch.requests:  # copies: the caller's requests stay as they were
        item.request_id = item.request_id or new_request_id()
    return batch


def batch_created(answer: job_service_pb2.BatchCreateJobsResponse) -> list[BatchCreated]:
    """Each item's job and run, or the typed error of its refusal."""
    return [
        BatchCreated(None, None, error_from_status(result.status))
        if result.status.code
        else BatchCreated(Job.of(result.job), Run.of(result.run) if result.HasField("run") else None, None)
        for result in answer.results
    ]


def preview_schedule_request(
    schedule: job_pb2.Schedule, count: int, after: datetime | None
) -> search.PreviewScheduleRequest:
    request = search.PreviewScheduleRequest(schedule=schedule, count=count)
    if after is not None:
        request.after_time.CopyFrom(timestamp(after, "after"))
    return request


def schedule_preview(answer: search.PreviewScheduleResponse) -> SchedulePreview:
    zone = ZoneInfo(answer.time_zone or "UTC")
    times = tuple(stamp.ToDatetime(tzinfo=zone) for stamp in answer.fire_times)
    return SchedulePreview(times, answer.time_zone or "UTC")


def backfill_job_request(
    name: str, start: datetime, end: datetime, pace: timedelta | None, request_id: str | None
) -> job_service_pb2.BackfillJobRequest:
    request = job_service_pb2.BackfillJobRequest(
        name=job_name(name),
        start_time=timestamp(start, "start"),
        end_time=timestamp(end, "end"),
        request_id=request_id or new_request_id(),
    )
    if pace is not None:
        request.pace.CopyFrom(duration(pace))
    return request


def backfill_of(answer: job_service_pb2.BackfillJobResponse) -> Backfill:
    made = answer.run_count > 0  # the times are set when the range held an occurrence

    def moment(stamp: timestamp_pb2.Timestamp) -> datetime | None:
        return stamp.ToDatetime(tzinfo=UTC) if made else None

    return Backfill(
        answer.run_count,
        moment(answer.first_schedule_time),
        moment(answer.last_schedule_time),
        moment(answer.last_due_time),
        answer,
    )


def list_audit_events_request(
    *, filter: str, order_by: str, page_size: int, page_token: str
) -> search.ListAuditEventsRequest:
    return search.ListAuditEventsRequest(
        filter=filter, order_by=order_by, page_size=page_size, page_token=page_token
    )


BulkResponse = (
    job_service_pb2.BulkCancelRunsResponse
    | job_service_pb2.BulkReplayRunsResponse
    | job_service_pb2.BulkPauseJobsResponse
    | job_service_pb2.BulkResumeJobsResponse
)


def bulk_result(answer: BulkResponse, dry_run: bool) -> BulkResult:
    """A bulk call's counts, and each failed item's typed error."""
    failures = tuple(BulkFailure(item.name, error_from_status(item.status)) for item in answer.failures)
    return BulkResult(answer.matched_count, answer.changed_count, failures, dry_run)
