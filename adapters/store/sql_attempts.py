"""What executors report about attempts: claims, heartbeats, progress and ends; a batch in a few statements.

Every write is fenced: it applies only while the run is on the reported attempt, in the state the report
expects (and, for an executor's report, held by that executor). Each batch locks its runs with one ordered
`SELECT ... FOR NO KEY UPDATE` by key, checks the fence on what it read, and writes the passing runs with
one UPDATE by primary key (`sql_batch` says why in two steps). Each function runs inside the caller's
transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Boolean, Connection, Float, Integer, Text, update

from jobmesh.adapters.store.schema import UtcDateTime, job_runs, run_attempts
from jobmesh.adapters.store.sql_batch import (
    FENCE_COLUMNS,
    FromBatch,
    insert_rows,
    lock_runs,
    update_by_key,
)
from jobmesh.adapters.store.sql_flow import hold_back
from jobmesh.adapters.store.sql_rows import StoredRow, cancelled_values, run_from_row
from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.definitions import decode_spec
from jobmesh.core.flow_control import NO_PACING, NO_QUEUE_LIMITS, Deferred, Pacing
from jobmesh.core.ports.pipeline_store import Claim, ClaimStatus, Heartbeat, ProgressReport
from jobmesh.core.records import REFUSED_CLAIMS, RunTrigger
from jobmesh.core.states import HELD_RUN_STATES, JobState, RunEvent, RunState, run_sources, run_transition
from jobmesh.v1 import job_pb2

_MILLISECOND = timedelta(milliseconds=1)
# The batches' columns and expressions, built once: `update_by_key` keeps a statement built per shape.
_GRANT_COLUMNS = (("start", UtcDateTime()), ("first_start_time", UtcDateTime()), ("deadline", UtcDateTime()))
_BEAT_COLUMNS = (("deadline", UtcDateTime()),)
_PROGRESS_COLUMNS = (("progress", Float()), ("message", Text()))
_RETRY_COLUMNS = (
    ("due_time", UtcDateTime()),
    ("end_time", UtcDateTime()),
    ("times_clamped", Boolean()),
)
# An end writes no start: an attempt's start_time (and the run's first_start_time) is its claim's, written
# once (docs/design.md, "History is written once").
_FINAL_COLUMNS = (
    ("state", Text()),
    ("end_time", UtcDateTime()),
    ("exit_code", Integer()),
    ("error_type", Text()),
    ("error_message", Text()),
    ("times_clamped", Boolean()),
    ("result", Text()),
)
_NEXT_ATTEMPT = job_runs.c.attempt + 1
# The runs an executor's claim starts (core.states).
_CLAIMABLE = run_sources(RunEvent.CLAIM)


# Claims ----------------------------------------------------------------------------------------------------


def claim(
    connection: Connection,
    refs: Sequence[AttemptRef],
    executor: str,
    now: datetime,
    *,
    on_fence: bool = False,
    queue_rates: Mapping[str, Pacing] = NO_PACING,
    queue_limits: Mapping[str, int] = NO_QUEUE_LIMITS,
    clock: Callable[[], datetime] | None = None,
) -> list[Claim]:
    # Each run's job's state comes with its lock: a claim that raced a pause or a delete is refused. One
    # granted on its fence while the database was away is not: its run started then.
    rows = lock_runs(connection, refs, with_job_state=not on_fence)
    refused = (
        set() if on_fence else _withdraw_refused(connection, [rows[k] for k in _claimable(refs, rows)], now)
    )
    # Flow control holds back some of the rest (not those granted on their fences: their runs started).
    flow = (
        {}
        if on_fence
        else hold_back(
            connection,
            [rows[k] for k in _claimable(refs, rows) if k not in refused],
            now,
            queue_rates,
            queue_limits=queue_limits,
            clock=clock,
        )
    )
    claims: list[Claim] = []
    granted: set[AttemptRef] = set()
    for ref in refs:
        row = rows.get((ref.job_id, ref.run_id))
        status = _classify(ref, row, granted)
        if status is ClaimStatus.GRANTED and (ref.job_id, ref.run_id) in refused:
            status = ClaimStatus.CANCELLED
        decision = flow.get((ref.job_id, ref.run_id)) if status is ClaimStatus.GRANTED else None
        if isinstance(decision, Deferred):
            claims.append(Claim(ref, ClaimStatus.DEFERRED, retry_time=decision.retry_time))
            continue
        if status is not ClaimStatus.GRANTED or row is None:
            claims.append(Claim(ref, status))
            continue
        granted.add(ref)
        # An executor may claim ahead of the run's instant; it starts it then, never before (nor before its
        # queue's pace lets it).
        start = decision.start if decision is not None else max(now, row["due_time"])
        run = run_from_row(
            row,
            changes={
                "state": RunState.RUNNING,
                "executor": executor,
                "start_time": start,
                "last_heartbeat_time": now,
                "first_start_time": row["first_start_time"] or start,
                "heartbeat_deadline": now + row["heartbeat_timeout_ms"] * _MILLISECOND,
                "update_time": now,
            },
        )
        claims.append(Claim(ref, status, run))
    started = [claim.run for claim in claims if claim.run is not None]
    if started:
        update_by_key(
            connection,
            "grants",
            _GRANT_COLUMNS,
            [
                (r.job_id, r.run_id, r.schedule_time, r.start_time, r.first_start_time, r.heartbeat_deadline)
                for r in started
            ],
            state=RunState.RUNNING.value,
            executor=executor,
            start_time=FromBatch("start"),
            last_heartbeat_time=now,
            first_start_time=FromBatch("first_start_time"),
            heartbeat_deadline=FromBatch("deadline"),
            update_time=now,
        )
    return claims


def _claimable(
    refs: Sequence[AttemptRef], rows: Mapping[tuple[str, str], StoredRow]
) -> list[tuple[str, str]]:
    """The keys of the runs a ref of the batch would be granted."""
    keys = {(ref.job_id, ref.run_id): ref.attempt for ref in refs}
    return [
        key
        for key, attempt in keys.items()
        if (row := rows.get(key)) is not None
        and row["attempt"] == attempt
        and RunState(row["state"]) in _CLAIMABLE
    ]


def _withdraw_refused(
    connection: Connection, rows: Sequence[StoredRow], now: datetime
) -> set[tuple[str, str]]:
    """Ends CANCELLED, instead of granting them, the runs whose job was paused or deleted after they were made
    or queued (`REFUSED_CLAIMS`); their keys. Rare: one statement per refused run."""
    refused: set[tuple[str, str]] = set()
    for row in rows:
        withdrawal = REFUSED_CLAIMS.get(JobState(row["job_state"]))
        if withdrawal is None or RunTrigger(row["trigger"]) not in withdrawal.triggers:
            continue
        connection.execute(
            update(job_runs)
            .where(
                job_runs.c.job_id == row["job_id"],
                job_runs.c.run_id == row["run_id"],
                job_runs.c.schedule_time == row["schedule_time"],  # prunes to one partition
            )
            .values(cancelled_values(withdrawal.reason, now))
        )
        refused.add((row["job_id"], row["run_id"]))
    return refused


def _classify(ref: AttemptRef, row: StoredRow | None, granted: set[AttemptRef]) -> ClaimStatus:
    if row is None:
        return ClaimStatus.NOT_FOUND
    if row["attempt"] != ref.attempt:
        return ClaimStatus.STALE
    if RunState(row["state"]) in _CLAIMABLE and ref not in granted:
        return ClaimStatus.GRANTED
    if row["state"] == RunState.CANCELLED and row["start_time"] is None:
        return ClaimStatus.CANCELLED  # cancelled before this attempt started
    # Running, stopping or ended on this attempt (or granted earlier in this batch): a duplicate delivery.
    return ClaimStatus.DUPLICATE


# Heartbeats and progress -----------------------------------------------------------------------------------


def _held(row: StoredRow | None, ref: AttemptRef, executor: str | None) -> bool:
    """The fence of reports about a running attempt: that attempt, still running or stopping (and held by
    `executor` when given)."""
    return (
        row is not None
        and row["attempt"] == ref.attempt
        and RunState(row["state"]) in HELD_RUN_STATES
        and executor in (None, row["executor"])
    )


def heartbeat(
    connection: Connection, executor: str, beats: Sequence[Heartbeat], now: datetime
) -> list[AttemptRef]:
    latest = {beat.ref: beat.deadline for beat in beats}  # a repeated ref: its last beat counts
    rows = lock_runs(connection, list(latest), FENCE_COLUMNS)
    found = {ref: rows.get((ref.job_id, ref.run_id)) for ref in latest}
    held = {ref: row for ref, row in found.items() if row is not None and _held(row, ref, executor)}
    if held:
        update_by_key(
            connection,
            "beats",
            _BEAT_COLUMNS,
            [(row["job_id"], row["run_id"], row["schedule_time"], latest[ref]) for ref, row in held.items()],
            # update_time is left alone: it marks changes a reader can see, and beats are not one.
            last_heartbeat_time=now,
            heartbeat_deadline=FromBatch("deadline"),
        )
    return [ref for ref in latest if ref not in held]


def report_progress(connection: Connection, reports: Sequence[ProgressReport], now: datetime) -> None:
    rows = lock_runs(connection, [report.ref for report in reports], FENCE_COLUMNS)
    # Only the holder's reports pass the fence, and its last one about a ref counts.
    latest: dict[AttemptRef, tuple[StoredRow, ProgressReport]] = {}
    for report in reports:
        row = rows.get((report.ref.job_id, report.ref.run_id))
        if row is not None and _held(row, report.ref, report.executor):
            latest[report.ref] = (row, report)
    if latest:
        update_by_key(
            connection,
            "progress",
            _PROGRESS_COLUMNS,
            [
                (row["job_id"], row["run_id"], row["schedule_time"], report.progress, report.message)
                for row, report in latest.values()
            ],
            progress=FromBatch("progress"),
            progress_message=FromBatch("message"),
            update_time=now,
        )


# Ends ------------------------------------------------------------------------------------------------------


def finish_attempts(
    connection: Connection, refs: Sequence[AttemptRef], decide: Callable[[Dispatchable], AttemptEnd | None]
) -> list[tuple[Dispatchable, AttemptEnd]]:
    wanted = list(dict.fromkeys(refs))
    rows = lock_runs(connection, wanted, with_spec=True)
    found = {ref: rows.get((ref.job_id, ref.run_id)) for ref in wanted}
    held = {ref: row for ref, row in found.items() if row is not None and _held(row, ref, None)}
    applied: dict[AttemptRef, tuple[AttemptEnd, StoredRow, Dispatchable]] = {}
    specs: dict[str, job_pb2.Job] = {}  # each job's decoded once, whatever its runs here
    for ref, row in held.items():
        if ref.job_id not in specs:
            specs[ref.job_id] = decode_spec(bytes(row["spec"]))
        current = Dispatchable(run_from_row(row), specs[ref.job_id])
        end = decide(current)
        if end is None:
            continue
        _check(end, ref, RunState(row["state"]))
        if end.executor in (None, row["executor"]):
            applied[ref] = (end, row, current)
    if not applied:
        return []
    history = [_attempt_values(end, row) for end, row, _ in applied.values()]
    # The key (job, run, attempt) cannot be taken while the fence held; skipping is for safety only.
    insert_rows(connection, run_attempts, _HISTORY_COLUMNS, history, skip_taken=True)
    retries = [(e, r) for e, r, _ in applied.values() if e.run_state is RunState.SCHEDULED]
    finals = [(e, r) for e, r, _ in applied.values() if e.run_state is not RunState.SCHEDULED]
    if retries:
        update_by_key(
            connection,
            "retries",
            _RETRY_COLUMNS,
            [
                (
                    r["job_id"],
                    r["run_id"],
                    r["schedule_time"],
                    e.retry_due_time,
                    e.end_time,
                    _clamped(e, r),
                )
                for e, r in retries
            ],
            # The next attempt starts from scratch; first_start_time and the history keep the earlier ones.
            attempt=_NEXT_ATTEMPT,
            state=RunState.SCHEDULED.value,
            due_time=FromBatch("due_time"),
            times_clamped=FromBatch("times_clamped"),
            update_time=FromBatch("end_time"),
            **dict.fromkeys(_EXECUTION_FIELDS),
            progress=0.0,
            progress_message="",
        )
    if finals:
        update_by_key(
            connection,
            "finals",
            _FINAL_COLUMNS,
            [_final_row(e, r) for e, r in finals],
            **{name: FromBatch(name) for name, _ in _FINAL_COLUMNS},
            update_time=FromBatch("end_time"),
            heartbeat_deadline=None,  # not running any more: out of the sweeper's index
        )
    return [(current, end) for end, _, current in applied.values()]


_EXECUTION_FIELDS = (
    "executor",
    "dispatch_time",
    "start_time",
    "last_heartbeat_time",
    "heartbeat_deadline",
    "end_time",
    "exit_code",
    "error_type",
    "error_message",
)


def _final_row(end: AttemptEnd, row: StoredRow) -> tuple[Any, ...]:
    key = (row["job_id"], row["run_id"], row["schedule_time"])
    errors = (end.exit_code, end.error_type, end.error_message)
    return (*key, end.run_state.value, end.end_time, *errors, _clamped(end, row), end.result)


def _clamped(end: AttemptEnd, row: StoredRow) -> bool:
    """Once an attempt's times were clamped, the run keeps the flag."""
    return bool(row["times_clamped"]) or end.times_clamped


def _check(end: AttemptEnd, ref: AttemptRef, state: RunState) -> None:
    """A decided end is written only as a transition core.states allows from the run's `state`
    (TransitionRefused otherwise)."""
    if end.ref != ref:
        raise ValueError(f"{ref}: decided as the end of another attempt, {end.ref}")
    if not end.attempt_state.is_terminal:
        raise ValueError(f"{end.ref}: an attempt ends in a terminal state, not {end.attempt_state}")
    run_transition(state, end.run_state)
    if end.run_state is RunState.SCHEDULED and end.retry_due_time is None:
        raise ValueError(f"{end.ref}: a retry needs its retry_due_time")


_HISTORY_COLUMNS = tuple((column.name, column.type) for column in run_attempts.c)


def _attempt_values(end: AttemptEnd, row: StoredRow) -> tuple[Any, ...]:
    values = {
        "job_id": end.ref.job_id,
        "run_id": end.ref.run_id,
        "attempt": end.ref.attempt,
        "state": end.attempt_state.value,
        "executor": row["executor"],
        "start_time": row["start_time"],  # the claim's, as readers saw it while the attempt ran
        "end_time": end.end_time,
        "exit_code": end.exit_code,
        "error_type": end.error_type,
        "error_message": end.error_message,
    }
    return tuple(values[name] for name, _ in _HISTORY_COLUMNS)
