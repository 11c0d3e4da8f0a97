"""Conversions between the store's records and table rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from jobmesh.adapters.store.schema import job_runs, jobs
from jobmesh.core.error_types import ErrorType
from jobmesh.core.flow_control import Concurrency
from jobmesh.core.records import (
    AttemptRecord,
    JobRecord,
    JobState,
    LogRecord,
    Priority,
    RunRecord,
    RunState,
    RunTrigger,
    ScheduleKind,
)
from jobmesh.core.shards import shard_of

# A row read from the store: SQLAlchemy's `RowMapping`, or the mapping a prepared statement returns.
StoredRow = Mapping[Any, Any]

_RUN_CONVERTED = ("state", "trigger", "priority", "progress", "heartbeat_timeout_ms", "shard")
_RUN_PLAIN_FIELDS = tuple(column.name for column in job_runs.c if column.name not in _RUN_CONVERTED)
_MILLISECOND = timedelta(milliseconds=1)
# Stored value → member, by dict: the enums' own lookup costs more, and a page of runs makes hundreds.
_RUN_STATE_OF = {state.value: state for state in RunState}
_RUN_TRIGGER_OF = {trigger.value: trigger for trigger in RunTrigger}
_PRIORITY_OF = {priority.value: priority for priority in Priority}


def timeout_ms(timeout: timedelta) -> int:
    """A heartbeat timeout as stored: whole milliseconds (the wire's precision is plenty for a timeout)."""
    return timeout // _MILLISECOND


def cancelled_values(reason: str, now: datetime) -> dict[str, Any]:
    """The columns that end a run not yet started as CANCELLED: every cancel, withdrawal and refused claim."""
    return {
        "state": RunState.CANCELLED.value,
        "end_time": now,
        "update_time": now,
        "error_type": ErrorType.CANCELLED,
        "error_message": reason,
    }


def cancelling_values(reason: str, now: datetime) -> dict[str, Any]:
    """The columns that ask a running attempt to stop; its end keeps the reason (`core.lifecycle`)."""
    return {
        "state": RunState.CANCELLING.value,
        "update_time": now,
        "error_type": ErrorType.CANCELLED,
        "error_message": reason,
    }


def job_values(job: JobRecord, *, first_run_id: str | None = None) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "spec": job.spec,
        "display_name": job.display_name,
        "labels": dict(job.labels),
        "schedule_kind": job.schedule_kind.value,
        "priority": job.priority.value,
        "queue": job.queue,
        "state": job.state.value,
        "next_run_time": job.next_run_time,
        "create_time": job.create_time,
        "update_time": job.update_time,
        "version": job.version,
        "request_id": job.request_id,
        "request_hash": job.request_hash,
        "first_run_id": first_run_id,
        "namespace": job.namespace,
        "shard": shard_of(job.job_id),
        "concurrency_key": job.concurrency.key if job.concurrency else None,
        "concurrency_limit": job.concurrency.limit if job.concurrency else None,
    }


def concurrency_of_row(row: StoredRow) -> Concurrency | None:
    """A job row's concurrency key and limit (the job's columns, as a claim's lock reads them too)."""
    key = row["concurrency_key"]
    return Concurrency(key, row["concurrency_limit"]) if key is not None else None


def job_from_row(row: StoredRow) -> JobRecord:
    return JobRecord(
        job_id=row["job_id"],
        spec=bytes(row["spec"]),
        display_name=row["display_name"],
        labels=dict(row["labels"]),
        schedule_kind=ScheduleKind(row["schedule_kind"]),
        priority=Priority(row["priority"]),
        queue=row["queue"],
        state=JobState(row["state"]),
        next_run_time=row["next_run_time"],
        create_time=row["create_time"],
        update_time=row["update_time"],
        version=row["version"],
        request_id=row["request_id"],
        request_hash=row["request_hash"],
        namespace=row["namespace"],
        concurrency=concurrency_of_row(row),
    )


# A new row's columns, in the order of `job_row` and `run_row` (for batch inserts).
JOB_ROW_COLUMNS = tuple((column.name, column.type) for column in jobs.c)
RUN_ROW_COLUMNS = tuple((column.name, column.type) for column in job_runs.c)


def job_row(job: JobRecord, *, first_run_id: str | None = None) -> tuple[Any, ...]:
    values = job_values(job, first_run_id=first_run_id)
    return tuple(values[name] for name, _ in JOB_ROW_COLUMNS)


def run_row(run: RunRecord) -> tuple[Any, ...]:
    values = run_values(run)
    return tuple(values[name] for name, _ in RUN_ROW_COLUMNS)


def run_values(run: RunRecord) -> dict[str, Any]:
    values: dict[str, Any] = {name: getattr(run, name) for name in _RUN_PLAIN_FIELDS}
    values.update(
        state=run.state.value,
        trigger=run.trigger.value,
        priority=run.priority.value,
        progress=float(run.progress),
        heartbeat_timeout_ms=timeout_ms(run.heartbeat_timeout),
        shard=shard_of(run.job_id),
    )
    return values


def run_from_row(
    row: StoredRow, attempts: Sequence[AttemptRecord] = (), *, changes: Mapping[str, Any] | None = None
) -> RunRecord:
    """The run a row holds; with `changes` (plain fields and `state`), as it is once they are written (the
    claim builds its answer so, without a dataclasses.replace per run on its hot path)."""
    plain = {name: row[name] for name in _RUN_PLAIN_FIELDS}
    state = row["state"]
    if changes:
        plain.update(changes)
        state = plain.pop("state", state)
    return RunRecord(
        **plain,
        state=_RUN_STATE_OF[state],
        trigger=_RUN_TRIGGER_OF[row["trigger"]],
        priority=_PRIORITY_OF[row["priority"]],
        progress=float(row["progress"]),
        heartbeat_timeout=row["heartbeat_timeout_ms"] * _MILLISECOND,
        previous_attempts=tuple(attempts),
    )


def attempt_from_row(row: StoredRow) -> AttemptRecord:
    return AttemptRecord(
        attempt=row["attempt"],
        state=_RUN_STATE_OF[row["state"]],
        executor=row["executor"],
        start_time=row["start_time"],
        end_time=row["end_time"],
        exit_code=row["exit_code"],
        error_type=row["error_type"],
        error_message=row["error_message"],
    )


def log_values(record: LogRecord) -> dict[str, Any]:
    return {
        "job_id": record.job_id,
        "run_id": record.run_id,
        "sequence": record.sequence,
        "attempt": record.attempt,
        "time": record.time,
        "stream": record.stream,
        "text": record.text,
    }


def log_from_row(row: StoredRow) -> LogRecord:
    return LogRecord(**{name: row[name] for name in log_columns()})


def log_columns() -> tuple[str, ...]:
    return ("job_id", "run_id", "sequence", "attempt", "time", "stream", "text")


JOB_COLUMNS = tuple(column for column in jobs.c if column.name != "first_run_id")
