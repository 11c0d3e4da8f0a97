"""From a validated job definition to the records to store: its columns, next run time and first run."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from google.protobuf.message import Message

from jobmesh.core.flow_control import concurrency_of
from jobmesh.core.ids import new_run_id
from jobmesh.core.names import DEFAULT_NAMESPACE
from jobmesh.core.occurrences import first_cron_occurrence, next_cron_occurrence
from jobmesh.core.records import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    JobRecord,
    JobState,
    Priority,
    RunRecord,
    RunState,
    RunTrigger,
    ScheduleKind,
)
from jobmesh.core.timestamps import to_datetime, to_timedelta
from jobmesh.core.wire_enums import PRIORITY_FROM_WIRE
from jobmesh.v1 import job_pb2

OUTPUT_ONLY_JOB_FIELDS = ("name", "state", "next_run_time", "create_time", "update_time", "etag")
# Set when the job is created, never changed after.
IMMUTABLE_JOB_FIELDS = ("namespace",)
_SCHEDULE_KINDS = {
    "immediate": ScheduleKind.IMMEDIATE,
    "run_at": ScheduleKind.RUN_AT,
    "cron": ScheduleKind.CRON,
}


@dataclass(frozen=True, slots=True)
class SchedulingPolicy:
    """Rules the write path applies when it creates runs."""

    # A run due within this is created and handed to the queue at once (the immediate bypass).
    immediate_threshold: timedelta = timedelta(minutes=1)


def priority_of(job: job_pb2.Job) -> Priority:
    return PRIORITY_FROM_WIRE[job.priority]


def schedule_kind_of(job: job_pb2.Job) -> ScheduleKind:
    return _SCHEDULE_KINDS[job.schedule.WhichOneof("kind") or "immediate"]


def writable_part(job: job_pb2.Job) -> job_pb2.Job:
    """A copy of `job` without its output-only fields: the definition a job record stores (`spec_of`)."""
    spec = job_pb2.Job()
    spec.CopyFrom(job)
    for field in OUTPUT_ONLY_JOB_FIELDS:
        spec.ClearField(field)  # type: ignore[arg-type]
    return spec


def spec_of(job: job_pb2.Job) -> bytes:
    """A job record's `spec`: `job`, a writable part (`writable_part`), serialized deterministically."""
    return job.SerializeToString(deterministic=True)


def decode_spec(spec: bytes) -> job_pb2.Job:
    """The definition a job record's `spec` holds, decoded: the one place a stored spec is decoded. A request
    or a read decodes each spec once and passes the message on (`Dispatchable.job`); whoever holds one
    shares it and never modifies it."""
    return job_pb2.Job.FromString(spec)


def request_hash(request: Message) -> str:
    return hashlib.sha256(request.SerializeToString(deterministic=True)).hexdigest()


@dataclass(frozen=True, slots=True)
class Planned:
    """What a schedule asks for now: the run to create at once, the next occurrence left, the job's state."""

    first_run_time: datetime | None
    next_run_time: datetime | None
    state: JobState


def plan_schedule(job: job_pb2.Job, now: datetime, policy: SchedulingPolicy) -> Planned:
    """One-shot schedules create their run at once. A cron job creates its first occurrence at once when it
    is due within the threshold; `next_run_time` is always the next occurrence not yet made into a run."""
    kind = job.schedule.WhichOneof("kind")
    if kind == "run_at":
        return Planned(to_datetime(job.schedule.run_at), None, JobState.COMPLETED)
    if kind == "cron":
        occurrence = first_cron_occurrence(job.schedule.cron, now)
        if occurrence is None:
            return Planned(None, None, JobState.COMPLETED)
        if occurrence - now > policy.immediate_threshold:
            return Planned(None, occurrence, JobState.ACTIVE)
        following = next_cron_occurrence(job.schedule.cron, occurrence)
        return Planned(occurrence, following, JobState.ACTIVE if following else JobState.COMPLETED)
    return Planned(now, None, JobState.COMPLETED)


def build_job(
    job_id: str,
    job: job_pb2.Job,
    now: datetime,
    policy: SchedulingPolicy,
    *,
    request_id: str = "",
    request_digest: str = "",
) -> tuple[JobRecord, RunRecord | None]:
    """`job`: the writable part of the definition (`writable_part`), stored as it is."""
    plan = plan_schedule(job, now, policy)
    record = JobRecord(
        job_id=job_id,
        spec=spec_of(job),
        display_name=job.display_name,
        labels=dict(job.labels),
        schedule_kind=schedule_kind_of(job),
        priority=priority_of(job),
        queue=job.queue or "default",
        state=plan.state,
        next_run_time=plan.next_run_time,
        create_time=now,
        update_time=now,
        request_id=request_id or None,
        request_hash=request_digest or None,
        namespace=job.namespace or DEFAULT_NAMESPACE,
        concurrency=concurrency_of(job),
    )
    first_run = None
    if plan.first_run_time is not None:
        first_run = new_run(
            record, plan.first_run_time, now, RunTrigger.SCHEDULE, heartbeat_timeout=heartbeat_timeout_of(job)
        )
    return record, first_run


def heartbeat_timeout_of(job: job_pb2.Job) -> timedelta:
    timeout = job.heartbeat_timeout
    return to_timedelta(timeout) if timeout.seconds or timeout.nanos else DEFAULT_HEARTBEAT_TIMEOUT


def new_run(
    job: JobRecord,
    schedule_time: datetime,
    now: datetime,
    trigger: RunTrigger,
    *,
    replay_of: str | None = None,
    request_id: str = "",
    request_digest: str = "",
    heartbeat_timeout: timedelta,
) -> RunRecord:
    """`heartbeat_timeout`: the job's (`heartbeat_timeout_of` its decoded spec, which the caller holds)."""
    return RunRecord(
        job_id=job.job_id,
        run_id=new_run_id(schedule_time),
        schedule_time=schedule_time,
        due_time=schedule_time,
        state=RunState.SCHEDULED,
        trigger=trigger,
        priority=job.priority,
        queue=job.queue,
        create_time=now,
        update_time=now,
        replay_of=replay_of,
        request_id=request_id or None,
        request_hash=request_digest or None,
        heartbeat_timeout=heartbeat_timeout,
        namespace=job.namespace,
    )
