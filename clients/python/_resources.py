"""What the clients hand out: the API's resources with their enums as the SDK's `IntEnum`s (so `run.state`
prints `SUCCEEDED`, not `5`) and optional fields as `None` when unset. Nested messages (schedule, target,
timestamps, durations) stay the `jobmesh.v1` and `google.protobuf` messages they are; `proto` keeps the whole
message, for `json_format` or anything else that wants the wire form."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from google.protobuf import duration_pb2, timestamp_pb2

from jobmesh.client._enums import AuditAction, JobState, LogStream, Priority, RunState, RunTrigger
from jobmesh.client._errors import JobmeshError
from jobmesh.v1 import audit_pb2, job_pb2, job_service_pb2, run_pb2, search_service_pb2

__all__ = [
    "AuditEvent",
    "BatchCreated",
    "Job",
    "LogLine",
    "Run",
    "RunAttempt",
    "RunChanges",
    "SchedulePreview",
]


@dataclass(frozen=True, slots=True)
class Job:
    """A job: `jobs/{job}`, its schedule, target and policies."""

    name: str
    display_name: str
    labels: Mapping[str, str]
    schedule: job_pb2.Schedule
    target: job_pb2.Target
    retry_policy: job_pb2.RetryPolicy
    execution_timeout: duration_pb2.Duration | None
    heartbeat_timeout: duration_pb2.Duration | None
    priority: Priority
    queue: str
    state: JobState
    next_run_time: timestamp_pb2.Timestamp
    create_time: timestamp_pb2.Timestamp
    update_time: timestamp_pb2.Timestamp
    etag: str
    namespace: str
    proto: job_pb2.Job = field(repr=False, compare=False)
    # Flow control: at most `concurrency_limit` runs of the jobs naming `concurrency_key` run at once.
    concurrency_key: str = ""
    concurrency_limit: int = 0

    @classmethod
    def of(cls, job: job_pb2.Job) -> Job:
        return cls(
            name=job.name,
            display_name=job.display_name,
            labels=dict(job.labels),
            schedule=job.schedule,
            target=job.target,
            retry_policy=job.retry_policy,
            execution_timeout=job.execution_timeout if job.HasField("execution_timeout") else None,
            heartbeat_timeout=job.heartbeat_timeout if job.HasField("heartbeat_timeout") else None,
            priority=Priority(job.priority),
            queue=job.queue,
            state=JobState(job.state),
            next_run_time=job.next_run_time,
            create_time=job.create_time,
            update_time=job.update_time,
            etag=job.etag,
            namespace=job.namespace,
            proto=job,
            concurrency_key=job.concurrency_key,
            concurrency_limit=job.concurrency_limit,
        )


@dataclass(frozen=True, slots=True)
class RunAttempt:
    """One finished attempt of a run."""

    attempt: int
    state: RunState
    executor: str
    start_time: timestamp_pb2.Timestamp
    end_time: timestamp_pb2.Timestamp
    exit_code: int | None
    error: run_pb2.RunError

    @classmethod
    def of(cls, attempt: run_pb2.RunAttempt) -> RunAttempt:
        return cls(
            attempt=attempt.attempt,
            state=RunState(attempt.state),
            executor=attempt.executor,
            start_time=attempt.start_time,
            end_time=attempt.end_time,
            exit_code=attempt.exit_code if attempt.HasField("exit_code") else None,
            error=attempt.error,
        )


@dataclass(frozen=True, slots=True)
class Run:
    """One occurrence of a job: `jobs/{job}/runs/{run}`."""

    name: str
    attempt: int
    schedule_time: timestamp_pb2.Timestamp
    state: RunState
    executor: str
    dispatch_time: timestamp_pb2.Timestamp
    start_time: timestamp_pb2.Timestamp
    last_heartbeat_time: timestamp_pb2.Timestamp
    end_time: timestamp_pb2.Timestamp
    exit_code: int | None
    error: run_pb2.RunError
    progress: float
    progress_message: str
    lateness: duration_pb2.Duration | None
    due_time: timestamp_pb2.Timestamp
    trigger: RunTrigger
    replay_of: str
    previous_attempts: tuple[RunAttempt, ...]
    create_time: timestamp_pb2.Timestamp
    update_time: timestamp_pb2.Timestamp
    times_clamped: bool
    namespace: str
    created_after_schedule_time: bool
    # What its handler returned, decoded from JSON; None when nothing was (see `Task.result_of` for types).
    result: Any
    proto: run_pb2.Run = field(repr=False, compare=False)

    @classmethod
    def of(cls, run: run_pb2.Run) -> Run:
        return cls(
            name=run.name,
            attempt=run.attempt,
            schedule_time=run.schedule_time,
            state=RunState(run.state),
            executor=run.executor,
            dispatch_time=run.dispatch_time,
            start_time=run.start_time,
            last_heartbeat_time=run.last_heartbeat_time,
            end_time=run.end_time,
            exit_code=run.exit_code if run.HasField("exit_code") else None,
            error=run.error,
            progress=run.progress,
            progress_message=run.progress_message,
            lateness=run.lateness if run.HasField("lateness") else None,
            due_time=run.due_time,
            trigger=RunTrigger(run.trigger),
            replay_of=run.replay_of,
            previous_attempts=tuple(RunAttempt.of(attempt) for attempt in run.previous_attempts),
            create_time=run.create_time,
            update_time=run.update_time,
            times_clamped=run.times_clamped,
            namespace=run.namespace,
            created_after_schedule_time=run.created_after_schedule_time,
            result=json.loads(run.result) if run.result else None,
            proto=run,
        )


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of a run's log."""

    sequence: int
    attempt: int
    time: timestamp_pb2.Timestamp
    stream: LogStream
    text: str
    proto: run_pb2.LogLine = field(repr=False, compare=False)

    @classmethod
    def of(cls, line: run_pb2.LogLine) -> LogLine:
        return cls(line.sequence, line.attempt, line.time, LogStream(line.stream), line.text, line)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One change made through the API: who did what to which resource, and when."""

    name: str
    time: timestamp_pb2.Timestamp
    actor: str
    action: AuditAction
    resource: str
    namespace: str
    request_id: str
    proto: audit_pb2.AuditEvent = field(repr=False, compare=False)

    @classmethod
    def of(cls, event: audit_pb2.AuditEvent) -> AuditEvent:
        return cls(
            name=event.name,
            time=event.time,
            actor=event.actor,
            action=AuditAction(event.action),
            resource=event.resource,
            namespace=event.namespace,
            request_id=event.request_id,
            proto=event,
        )


@dataclass(frozen=True, slots=True)
class RunChanges:
    """One message of `watch_runs`: the runs that changed (the matching runs, in the first), and the token
    that resumes a later watch just after it."""

    runs: tuple[Run, ...]
    resume_token: str


@dataclass(frozen=True, slots=True)
class SchedulePreview:
    """The next fire times of a schedule, earliest first, as aware datetimes in its time zone."""

    fire_times: tuple[datetime, ...]
    time_zone: str


@dataclass(frozen=True, slots=True)
class Backfill:
    """What `backfill_job` made: how many runs (each marked `RunTrigger.BACKFILL`), the first and last
    occurrences they stand for (their `schedule_time`), and when the last is due at the pace asked. The times
    are None when the range held no occurrence."""

    run_count: int
    first_schedule_time: datetime | None
    last_schedule_time: datetime | None
    last_due_time: datetime | None
    proto: job_service_pb2.BackfillJobResponse = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class BatchCreated:
    """One item of `batch_create_jobs`, in the order asked: the job (and the run made at once, if any), or
    the typed error that refused it, with its field violations (`job.schedule...` as `CreateJob` names them).
    Unless the batch asked for `BatchCreateJobsView.FULL`, the job and run hold only their names, the job's
    `next_run_time` and the run's state and `schedule_time`."""

    job: Job | None
    run: Run | None
    error: JobmeshError | None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class BulkFailure:
    """A run or job a bulk call matched but could not change, and the typed error of why."""

    name: str
    error: JobmeshError


@dataclass(frozen=True, slots=True)
class BulkResult:
    """The outcome of a change by filter (`cancel_runs`, `replay_runs`, `pause_jobs`, `resume_jobs`): how many
    runs or jobs matched that it changed (or, for a dry run, would change), how many it changed, and the
    ones that failed."""

    matched: int
    changed: int
    failures: tuple[BulkFailure, ...]
    dry_run: bool


@dataclass(frozen=True)
class RunCount:
    """The runs of one namespace and queue in one state, as the mesh counts them (`Client.count_runs`).
    `run_count` is what `list_runs` lists with that state; for SCHEDULED, `upcoming_run_count` holds the runs
    made ahead of their time, apart."""

    namespace: str
    queue: str
    state: RunState
    run_count: int
    upcoming_run_count: int
    proto: search_service_pb2.RunCount = field(repr=False, compare=False)

    @classmethod
    def of(cls, count: search_service_pb2.RunCount) -> RunCount:
        return cls(
            namespace=count.namespace,
            queue=count.queue,
            state=RunState(count.state),
            run_count=count.run_count,
            upcoming_run_count=count.upcoming_run_count,
            proto=count,
        )
