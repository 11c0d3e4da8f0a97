"""Records as the API's resource messages (`jobmesh.v1.Job`, `Run`, `RunAttempt`, `LogLine`, `AuditEvent`)."""

from __future__ import annotations

from datetime import datetime

from jobmesh.core.audit import AuditEvent
from jobmesh.core.definitions import decode_spec
from jobmesh.core.lateness import run_lateness
from jobmesh.core.names import job_name, run_name
from jobmesh.core.occurrences import next_fire_time
from jobmesh.core.records import (
    AttemptRecord,
    JobRecord,
    JobState,
    LogRecord,
    RunRecord,
    etag_of,
)
from jobmesh.core.run_counts import RunCounts
from jobmesh.core.states import HALTED_JOB_STATES, JOB_STATE_TO_WIRE, RUN_STATE_TO_WIRE
from jobmesh.core.timestamps import set_timestamp, to_duration, utcnow
from jobmesh.core.wire_enums import AUDIT_ACTION_TO_WIRE, LOG_STREAM_TO_WIRE, RUN_TRIGGER_TO_WIRE
from jobmesh.v1 import audit_pb2, job_pb2, run_pb2, search_service_pb2


def job_to_proto(record: JobRecord, spec: job_pb2.Job | None = None) -> job_pb2.Job:
    """`spec`: the record's definition when the caller holds it decoded (copied, not modified); else the
    record's spec is decoded."""
    if spec is None:
        job = decode_spec(record.spec)
    else:
        job = job_pb2.Job()
        job.CopyFrom(spec)
    job.name = job_name(record.job_id)
    job.state = JOB_STATE_TO_WIRE[record.state]
    _set_next_run_time(job, record.state, job.schedule, utcnow())
    set_timestamp(job.create_time, record.create_time)
    set_timestamp(job.update_time, record.update_time)
    job.etag = etag_of(record.version)
    job.namespace = record.namespace
    return job


def job_basic_proto(record: JobRecord, spec: job_pb2.Job | None = None) -> job_pb2.Job:
    """The job's name and next run time only (`BatchCreateJobs`' basic view). `spec`: as `job_to_proto`'s."""
    job = job_pb2.Job(name=job_name(record.job_id))
    schedule = (spec if spec is not None else decode_spec(record.spec)).schedule
    _set_next_run_time(job, record.state, schedule, utcnow())
    return job


def _set_next_run_time(job: job_pb2.Job, state: JobState, schedule: job_pb2.Schedule, now: datetime) -> None:
    """The schedule's next fire time from now, as `PreviewSchedule` gives it first; none while the job is
    paused or deleted. (The stored `JobRecord.next_run_time` is the watcher's cursor: the next occurrence not
    yet made into a run, which lies as far ahead as the watcher makes runs.)"""
    if state in HALTED_JOB_STATES:
        return
    fire_time = next_fire_time(schedule, now)
    if fire_time is not None:
        set_timestamp(job.next_run_time, fire_time)


def run_basic_proto(record: RunRecord) -> run_pb2.Run:
    """The run's name, state and schedule time only (`BatchCreateJobs`' basic view)."""
    run = run_pb2.Run(name=run_name(record.job_id, record.run_id), state=RUN_STATE_TO_WIRE[record.state])
    set_timestamp(run.schedule_time, record.schedule_time)
    return run


def run_to_proto(record: RunRecord) -> run_pb2.Run:
    run = run_pb2.Run(
        name=run_name(record.job_id, record.run_id),
        attempt=record.attempt,
        state=RUN_STATE_TO_WIRE[record.state],
        executor=record.executor or "",
        progress=record.progress,
        progress_message=record.progress_message,
        times_clamped=record.times_clamped,
        trigger=RUN_TRIGGER_TO_WIRE[record.trigger],
        replay_of=record.replay_of or "",
        namespace=record.namespace,
        created_after_schedule_time=record.created_after_schedule_time,
        result=record.result or "",
    )
    _set_times(run, record)
    if record.exit_code is not None:
        run.exit_code = record.exit_code
    if record.error_type or record.error_message:
        run.error.type = record.error_type or ""
        run.error.message = record.error_message or ""
    if (lateness := run_lateness(record)) is not None:
        run.lateness.CopyFrom(to_duration(lateness))
    run.previous_attempts.extend(attempt_to_proto(attempt) for attempt in record.previous_attempts)
    return run


def _set_times(run: run_pb2.Run, record: RunRecord) -> None:
    for field in ("schedule_time", "due_time", "create_time", "update_time"):
        set_timestamp(getattr(run, field), getattr(record, field))
    for field in ("dispatch_time", "start_time", "last_heartbeat_time", "end_time"):
        value = getattr(record, field)
        if value is not None:
            set_timestamp(getattr(run, field), value)


def attempt_to_proto(record: AttemptRecord) -> run_pb2.RunAttempt:
    attempt = run_pb2.RunAttempt(
        attempt=record.attempt,
        state=RUN_STATE_TO_WIRE[record.state],
        executor=record.executor or "",
    )
    if record.start_time is not None:
        set_timestamp(attempt.start_time, record.start_time)
    if record.end_time is not None:
        set_timestamp(attempt.end_time, record.end_time)
    if record.exit_code is not None:
        attempt.exit_code = record.exit_code
    if record.error_type or record.error_message:
        attempt.error.type = record.error_type or ""
        attempt.error.message = record.error_message or ""
    return attempt


def log_to_proto(record: LogRecord) -> run_pb2.LogLine:
    line = run_pb2.LogLine(
        sequence=record.sequence,
        attempt=record.attempt,
        stream=LOG_STREAM_TO_WIRE[record.stream],
        text=record.text,
    )
    set_timestamp(line.time, record.time)
    return line


def audit_event_to_proto(record: AuditEvent) -> audit_pb2.AuditEvent:
    event = audit_pb2.AuditEvent(
        name=f"auditEvents/{record.event_id}",
        actor=record.actor,
        action=AUDIT_ACTION_TO_WIRE[record.action],
        resource=record.resource,
        namespace=record.namespace,
        request_id=record.request_id,
    )
    set_timestamp(event.time, record.time)
    return event


def run_counts_to_proto(counts: RunCounts) -> search_service_pb2.RunCounts:
    message = search_service_pb2.RunCounts(
        counts=[
            search_service_pb2.RunCount(
                namespace=count.namespace,
                queue=count.queue,
                state=RUN_STATE_TO_WIRE[count.state],
                run_count=count.runs,
                upcoming_run_count=count.upcoming,
            )
            for count in counts.counts
        ]
    )
    set_timestamp(message.read_time, counts.read_time)
    return message
