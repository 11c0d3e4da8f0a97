"""The values the store keeps: jobs and runs as the business logic sees them.

A job's full definition travels as its serialized `jobmesh.v1.Job` (`spec`); the fields that reads filter,
sort or schedule on are kept beside it as plain values so the store can index them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobmesh.core.flow_control import Concurrency
from jobmesh.core.names import DEFAULT_NAMESPACE

DEFAULT_HEARTBEAT_TIMEOUT = timedelta(seconds=15)


class JobState(enum.StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    DELETED = "DELETED"


class ScheduleKind(enum.StrEnum):
    IMMEDIATE = "IMMEDIATE"
    RUN_AT = "RUN_AT"
    CRON = "CRON"


class Priority(enum.StrEnum):
    HIGH = "HIGH"
    NORMAL = "NORMAL"
    LOW = "LOW"


class RunState(enum.StrEnum):
    SCHEDULED = "SCHEDULED"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    CANCELLING = "CANCELLING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMED_OUT = "TIMED_OUT"
    DEAD_LETTERED = "DEAD_LETTERED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_RUN_STATES

    @property
    def is_pending(self) -> bool:
        return self in PENDING_RUN_STATES


TERMINAL_RUN_STATES = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.TIMED_OUT, RunState.DEAD_LETTERED}
)
PENDING_RUN_STATES = frozenset({RunState.SCHEDULED, RunState.QUEUED})
REPLAYABLE_RUN_STATES = frozenset({RunState.FAILED, RunState.TIMED_OUT, RunState.DEAD_LETTERED})
# A cancel ends a pending run at once and asks a running one to stop; any other run it leaves as it is.
CANCELLABLE_RUN_STATES = PENDING_RUN_STATES | {RunState.RUNNING}


class RunTrigger(enum.StrEnum):
    SCHEDULE = "SCHEDULE"
    RUN_NOW = "RUN_NOW"
    REPLAY = "REPLAY"
    BACKFILL = "BACKFILL"  # one occurrence of the job's schedule in a past range (core/backfill.py)


@dataclass(frozen=True, slots=True)
class Withdrawal:
    """The pending runs (PENDING_RUN_STATES: not yet claimed by an executor) of a job that a change of the job
    ends CANCELLED with `reason`, in the change's transaction: those with one of `triggers`, but for the runs
    of `spared` (run ids). Those were claimed on their fences while the database was away (server/
    outage_mode.py): they started, and the journal's replay records their claim."""

    reason: str
    triggers: frozenset[RunTrigger] = frozenset(RunTrigger)
    spared: frozenset[str] = frozenset()


JOB_PAUSED = Withdrawal("job paused")
JOB_DELETED = Withdrawal("job deleted")
# The old schedule's runs: a run asked for by hand (run now, replay) is not the schedule's.
SCHEDULE_CHANGED = Withdrawal("schedule changed", frozenset({RunTrigger.SCHEDULE}))
# What a claim withdraws instead of starting, by its job's state: a run that raced the job's pause or delete
# (made by a watcher that read the job before, or already on the queue). Runs asked for by hand while the
# job is paused (run now, replay) are run; a backfill's are the schedule's and stop with it.
REFUSED_CLAIMS = {
    JobState.PAUSED: Withdrawal(JOB_PAUSED.reason, frozenset({RunTrigger.SCHEDULE, RunTrigger.BACKFILL})),
    JobState.DELETED: JOB_DELETED,
}


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job as stored. `version` grows by one on every change; the etag is derived from it.

    `next_run_time` is the watcher's cursor, internal: the next occurrence not yet made into a run. The API's
    `Job.next_run_time` is the schedule's next fire time from now, computed on read (`core.occurrences`)."""

    job_id: str
    spec: bytes
    display_name: str
    labels: Mapping[str, str]
    schedule_kind: ScheduleKind
    priority: Priority
    queue: str
    state: JobState
    next_run_time: datetime | None
    create_time: datetime
    update_time: datetime
    version: int = 1
    request_id: str | None = None
    request_hash: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    # The spec's concurrency key and limit (`core.flow_control`), kept beside it for the claims.
    concurrency: Concurrency | None = None


def etag_of(version: int) -> str:
    """A job's etag (AIP-154): its version, which grows by one on every change."""
    return str(version)


def version_of_etag(etag: str) -> int | None:
    """The version an etag names; None for a string no etag of ours looks like (it can never match)."""
    return int(etag) if etag.isascii() and etag.isdigit() and len(etag) < 19 else None  # not "²"


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run of a job. Its current attempt is `attempt`; earlier ones are in `previous_attempts`."""

    job_id: str
    run_id: str
    schedule_time: datetime
    due_time: datetime
    state: RunState
    trigger: RunTrigger
    priority: Priority
    queue: str
    create_time: datetime
    update_time: datetime
    attempt: int = 1
    replay_of: str | None = None
    executor: str | None = None
    dispatch_time: datetime | None = None
    start_time: datetime | None = None
    last_heartbeat_time: datetime | None = None
    end_time: datetime | None = None
    exit_code: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    progress: float = 0.0
    progress_message: str = ""
    first_start_time: datetime | None = None
    request_id: str | None = None
    request_hash: str | None = None
    # Copied from the job when the run is made: the sweeper reads it without the job's definition.
    heartbeat_timeout: timedelta = DEFAULT_HEARTBEAT_TIMEOUT
    # last_heartbeat_time + heartbeat_timeout while an attempt runs.
    heartbeat_deadline: datetime | None = None
    # An executor reported start or end times that contradict the server's claim and heartbeat record: the
    # times kept were clamped to that record.
    times_clamped: bool = False
    # Copied from the job, so that lists and feeds scope runs by namespace without reading jobs.
    namespace: str = DEFAULT_NAMESPACE
    # What a succeeded handler returned, as JSON text.
    result: str | None = None
    previous_attempts: tuple[AttemptRecord, ...] = field(default=())

    @property
    def created_after_schedule_time(self) -> bool:
        """The run was made when its schedule time had already passed: a `run_at` in the past or a caught-up
        occurrence (due at once; its lateness counts from its create time, `core.lateness`), or a backfill."""
        return self.create_time > self.schedule_time


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """A finished attempt of a run, kept for its history."""

    attempt: int
    state: RunState
    executor: str | None
    start_time: datetime | None
    end_time: datetime | None
    exit_code: int | None
    error_type: str | None
    error_message: str | None


@dataclass(frozen=True, slots=True)
class LogRecord:
    job_id: str
    run_id: str
    sequence: int
    attempt: int
    time: datetime
    stream: str
    text: str
