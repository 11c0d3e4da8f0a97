"""Run and log statements of the SQL store. Each function runs inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Connection,
    RowMapping,
    Select,
    Text,
    and_,
    column,
    func,
    literal,
    select,
    text,
    tuple_,
    update,
)

from jobmesh.adapters.store import sql_audit
from jobmesh.adapters.store.schema import FAR_FUTURE, UtcDateTime, job_runs, jobs, run_attempts, run_logs
from jobmesh.adapters.store.sql_batch import batch_chunks, batch_size, batch_table, batch_values, insert_rows
from jobmesh.adapters.store.sql_jobs import upsert_ignoring_conflicts
from jobmesh.adapters.store.sql_prepared import execute_prepared
from jobmesh.adapters.store.sql_query import Listing, fetch_page, where_clauses
from jobmesh.adapters.store.sql_rows import (
    attempt_from_row,
    cancelled_values,
    cancelling_values,
    log_from_row,
    log_values,
    run_from_row,
    run_values,
)
from jobmesh.core.audit import AuditEvent
from jobmesh.core.errors import NotFound
from jobmesh.core.filters import ListQuery
from jobmesh.core.ids import schedule_window
from jobmesh.core.names import job_name, run_name
from jobmesh.core.ports.store import CreateRunOutcome, CreateStatus, Page
from jobmesh.core.records import AttemptRecord, LogRecord, RunRecord
from jobmesh.core.states import (
    CANCELLABLE_RUN_STATES,
    JobState,
    RunEvent,
    RunState,
    run_state_after,
)


def _run_listing(tiebreak: tuple[str, ...]) -> Listing:
    far_future = literal(FAR_FUTURE, UtcDateTime())
    return Listing(
        kind="runs",
        fields={
            "namespace": job_runs.c.namespace,
            "state": job_runs.c.state,
            "job": job_runs.c.job_id,
            "attempt": job_runs.c.attempt,
            "trigger": job_runs.c.trigger,
            # Unassigned reads as "" (the proto default), so `executor = ""` finds runs nobody took yet.
            "executor": func.coalesce(job_runs.c.executor, ""),
            **{name: job_runs.c[name] for name in ("schedule_time", "due_time", "start_time", "end_time")},
            **{name: job_runs.c[name] for name in ("create_time", "update_time")},
        },
        sortable={
            **{
                name: job_runs.c[name] for name in ("schedule_time", "due_time", "create_time", "update_time")
            },
            "start_time": func.coalesce(job_runs.c.start_time, far_future),
            "end_time": func.coalesce(job_runs.c.end_time, far_future),
        },
        tiebreak=tuple(job_runs.c[name] for name in tiebreak),
        labels=jobs.c.labels,
        namespace=job_runs.c.namespace,
    )


# Within one job the job id is constant: leaving it out of the keyset lets the (job_id, schedule_time, run_id)
# index answer the row comparison as a range.
RUN_LISTING = _run_listing(("job_id", "run_id"))
ONE_JOB_RUN_LISTING = _run_listing(("run_id",))


def _not_found(job_id: str, run_id: str) -> NotFound:
    return NotFound(run_name(job_id, run_id))


def create_run(connection: Connection, run: RunRecord) -> CreateRunOutcome:
    # The job row's lock serializes run creation per job: partitioned job_runs cannot have a unique
    # (job_id, run_id) or (job_id, request_id) constraint, so both are checked here. It also orders the
    # insert against delete_job, so no run sneaks in after the job's runs were cancelled.
    lock = select(jobs.c.state).where(jobs.c.job_id == run.job_id).with_for_update(key_share=True)
    state = connection.execute(lock).scalar()
    if state is None or state == JobState.DELETED:
        raise NotFound(job_name(run.job_id))
    if run.request_id is not None:
        earlier = connection.execute(
            select(job_runs.c.run_id, job_runs.c.request_hash)
            .where(job_runs.c.job_id == run.job_id, job_runs.c.request_id == run.request_id)
            .limit(1)
        ).first()
        if earlier is not None:
            if earlier.request_hash != run.request_hash:
                return CreateRunOutcome(CreateStatus.REQUEST_ID_REUSED)
            return CreateRunOutcome(CreateStatus.REPLAYED, get_run(connection, run.job_id, earlier.run_id))
    if _find(connection, run.job_id, run.run_id) is not None:
        return CreateRunOutcome(CreateStatus.ID_TAKEN)
    connection.execute(job_runs.insert(), run_values(run))
    return CreateRunOutcome(CreateStatus.CREATED, run)


def insert_runs(connection: Connection, runs: Sequence[RunRecord]) -> None:
    """New runs of a job whose row create_run locked in this transaction; their ids are fresh."""
    if runs:
        connection.execute(job_runs.insert(), [run_values(run) for run in runs])


def _find(connection: Connection, job_id: str, run_id: str, *, lock: bool = False) -> RowMapping | None:
    statement = select(job_runs).where(job_runs.c.job_id == job_id, job_runs.c.run_id == run_id)
    window = schedule_window(run_id)
    if window is not None:
        # Our run ids carry their schedule time's millisecond: the lookup prunes to one partition.
        statement = statement.where(
            job_runs.c.schedule_time >= window[0], job_runs.c.schedule_time < window[1]
        )
    # Otherwise each partition answers through the (job_id, run_id, ...) primary key prefix.
    if lock:
        statement = statement.with_for_update()
    return connection.execute(statement).mappings().first()


def get_run(connection: Connection, job_id: str, run_id: str) -> RunRecord:
    row = _find(connection, job_id, run_id)
    if row is None:
        raise _not_found(job_id, run_id)
    return run_from_row(row, _history(connection, row))


def _history(connection: Connection, row: RowMapping) -> list[AttemptRecord]:
    """The run's attempts before its current one."""
    attempts = connection.execute(
        select(run_attempts)
        .where(
            run_attempts.c.job_id == row["job_id"],
            run_attempts.c.run_id == row["run_id"],
            run_attempts.c.attempt < row["attempt"],
        )
        .order_by(run_attempts.c.attempt)
    )
    return [attempt_from_row(attempt) for attempt in attempts.mappings()]


# Every namespace that holds a job, in one probe of `ix_jobs_namespace_create_time` each: the walk skips from
# one namespace to the next instead of reading the jobs between them. A run's namespace is its job's, which
# never changes, and jobs are never removed.
_NAMESPACES_IN_USE = (
    text(
        """
        WITH RECURSIVE found(namespace) AS (
            (SELECT namespace FROM jobs ORDER BY namespace LIMIT 1)
            UNION ALL
            SELECT (
                SELECT j.namespace FROM jobs j WHERE j.namespace > f.namespace ORDER BY j.namespace LIMIT 1
            )
            FROM found f WHERE f.namespace IS NOT NULL
        )
        SELECT namespace FROM found WHERE namespace IS NOT NULL
        """
    )
    .columns(column("namespace", Text()))
    .subquery("in_use")
)


_EVERY_RUN = select(job_runs)


def list_runs(connection: Connection, job_id: str | None, query: ListQuery) -> Page[RunRecord]:
    listing = RUN_LISTING if job_id is None else ONE_JOB_RUN_LISTING
    statement = select(job_runs).where(*where_clauses(listing, query.comparisons, connection.dialect.name))
    if job_id is not None:
        statement = statement.where(job_runs.c.job_id == job_id)
    if any(comparison.field == "labels" for comparison in query.comparisons):
        statement = statement.join_from(job_runs, jobs, jobs.c.job_id == job_runs.c.job_id)
    # Runs of every job, unscoped and unfiltered, are walked per namespace in use by
    # `ix_job_runs_namespace_schedule`: no index holds their order alone, so each page sorted every run.
    # (One that did, led by the schedule time, drew the claims' lookups by key into scans of a time range.)
    every_namespace = None
    if job_id is None and not query.comparisons and connection.dialect.name == "postgresql":
        statement, every_namespace = _EVERY_RUN, _NAMESPACES_IN_USE
    if query.upcoming_after is not None:  # as core.filters.is_upcoming
        statement = statement.where(
            ~and_(
                job_runs.c.state == RunState.SCHEDULED.value, job_runs.c.schedule_time > query.upcoming_after
            )
        )
    return fetch_page(
        connection,
        statement,
        listing=listing,
        query=query,
        scope=("job", job_id),
        convert=run_from_row,
        every_namespace=every_namespace,
    )


def cancel_run(
    connection: Connection,
    job_id: str,
    run_id: str,
    *,
    reason: str,
    now: datetime,
    audit: Callable[[RunRecord], AuditEvent | None] | None = None,
) -> tuple[RunRecord, AuditEvent | None]:
    """The run as the cancel left it, read once (under its lock), and the audit event of its change (None
    when it did not change: a run already cancelling or terminal). `audit` sees the run before the change,
    and may refuse it by raising."""
    row = _find(connection, job_id, run_id, lock=True)
    if row is None:
        raise _not_found(job_id, run_id)
    event = audit(run_from_row(row)) if audit is not None else None
    changes = _cancel_values(RunState(row["state"]), reason, now)
    if changes is None:
        return run_from_row(row, _history(connection, row)), None
    connection.execute(
        update(job_runs)
        .where(
            job_runs.c.job_id == job_id,
            job_runs.c.run_id == run_id,
            job_runs.c.schedule_time == row["schedule_time"],  # prunes to one partition
        )
        .values(changes)
    )
    return run_from_row(row, _history(connection, row), changes=changes), event


def _cancel_values(state: RunState, reason: str, now: datetime) -> dict[str, Any] | None:
    """What a cancel writes on a run in `state`, where core.states' cancel takes it: a pending run ends
    CANCELLED, a running one is asked to stop (its reason kept for the end: the attempt's own report says how
    it stopped, not why); None for a run no cancel moves (already stopping, or ended)."""
    if state not in CANCELLABLE_RUN_STATES:
        return None
    if run_state_after(state, RunEvent.CANCEL) is RunState.CANCELLING:
        return cancelling_values(reason, now)
    return cancelled_values(reason, now)


_CANCEL_CHUNK = 500


def cancel_runs(
    connection: Connection, runs: Sequence[tuple[str, str, AuditEvent]], *, reason: str, now: datetime
) -> list[RunRecord | None]:
    """Many cancels, each as cancel_run, in a few statements per 500 runs rather than a few per run: the runs
    are read once (locked) and updated by the state they were in; the answers are built from that read and the
    changes written. The runs it answers carry no previous attempts; None stands for a run that is not there.
    The audit events of those that changed are written in one statement."""
    keys = [(job_id, run_id) for job_id, run_id, _ in runs]
    before = _rows(connection, keys, lock=True)
    written = {
        key: values
        for key, row in before.items()
        if (values := _cancel_values(RunState(row["state"]), reason, now))
    }
    # One update per kind of change (the values of a kind are the same for every run).
    kinds: dict[str, tuple[dict[str, Any], list[tuple[str, str]]]] = {}
    for key, values in written.items():
        kinds.setdefault(values["state"], (values, []))[1].append(key)
    for values, changed in kinds.values():
        for start in range(0, len(changed), _CANCEL_CHUNK):
            chunk = changed[start : start + _CANCEL_CHUNK]
            connection.execute(update(job_runs).where(_keyed(chunk)).values(values))
    sql_audit.record(connection, [audit for job_id, run_id, audit in runs if (job_id, run_id) in written])
    return [run_from_row(before[key], changes=written.get(key)) if key in before else None for key in keys]


def _keyed(keys: Sequence[tuple[str, str]]) -> Any:
    return tuple_(job_runs.c.job_id, job_runs.c.run_id).in_(keys)


def _rows(
    connection: Connection, keys: Sequence[tuple[str, str]], *, lock: bool
) -> dict[tuple[str, str], RowMapping]:
    """The rows of the runs `keys` name that exist, by key."""
    found: dict[tuple[str, str], RowMapping] = {}
    for start in range(0, len(keys), _CANCEL_CHUNK):
        statement = select(job_runs).where(_keyed(keys[start : start + _CANCEL_CHUNK]))
        if lock:  # in key order, as every other writer of many runs takes its locks
            statement = statement.order_by(job_runs.c.job_id, job_runs.c.run_id).with_for_update()
        for row in connection.execute(statement).mappings():
            found[row["job_id"], row["run_id"]] = row
    return found


def append_logs(connection: Connection, records: Sequence[LogRecord]) -> None:
    if records:
        connection.execute(upsert_ignoring_conflicts(connection, run_logs), [log_values(r) for r in records])
        notify_logs(connection)


_NOTIFY_LOGS = text("SELECT pg_notify('jobmesh_logs', '')")


def notify_logs(connection: Connection) -> None:
    """Tells other processes' feeds, when this transaction commits, that logs were added (PostgreSQL)."""
    if connection.dialect.name == "postgresql":
        execute_prepared(connection, _NOTIFY_LOGS, {})


def list_logs(
    connection: Connection, job_id: str, run_id: str, *, after_sequence: int, limit: int
) -> list[LogRecord]:
    if limit <= 0:
        return []
    rows = connection.execute(
        select(run_logs)
        .where(run_logs.c.job_id == job_id, run_logs.c.run_id == run_id, run_logs.c.sequence > after_sequence)
        .order_by(run_logs.c.sequence)
        .limit(limit)
    )
    return [log_from_row(row) for row in rows.mappings()]


# Separate from the maintenance lock keys (0x6A6D_0001, 0x6A6D_0002): those use the one-bigint key space,
# this the two-int one, and PostgreSQL keeps the two apart.
_LOG_LOCK_CLASS = 0x6A6D_0003


_LOG_COLUMNS = tuple((column.name, column.type) for column in run_logs.c)
_LOGGED_COLUMNS = (("job_id", Text()), ("run_id", Text()))
_LOCK_LOGS = text(
    "SELECT pg_advisory_xact_lock(:class, hashtext(job_id || '/' || run_id)) "
    "FROM unnest(CAST(:jobs AS text[]), CAST(:runs AS text[])) AS r(job_id, run_id) "
    "ORDER BY job_id, run_id"
)


@lru_cache(maxsize=16)
def _last_sequences(dialect: str, size: int) -> Select[Any]:
    """Each run of a batch of (job_id, run_id) with its last stored log line's sequence, if it has any."""
    batch = batch_table(dialect, "logged", _LOGGED_COLUMNS, size)
    match = and_(run_logs.c.job_id == batch.c.job_id, run_logs.c.run_id == batch.c.run_id)
    return (
        select(run_logs.c.job_id, run_logs.c.run_id, func.max(run_logs.c.sequence))
        .join_from(run_logs, batch, match)
        .group_by(run_logs.c.job_id, run_logs.c.run_id)
    )


def append_attempt_logs(connection: Connection, lines: Sequence[LogRecord]) -> list[LogRecord]:
    """Numbers each run's lines after its last stored one, in the given order, and stores them."""
    runs = sorted({(line.job_id, line.run_id) for line in lines})
    if not runs:
        return []
    if connection.dialect.name == "postgresql":
        # Two replicas appending to one run (a reconnected stream) would read the same maximum: a per-run
        # advisory lock, taken in key order, serializes them without touching the run's row.
        execute_prepared(
            connection,
            _LOCK_LOGS,
            {"class": _LOG_LOCK_CLASS, "jobs": [j for j, _ in runs], "runs": [r for _, r in runs]},
        )
    last: dict[tuple[str, str], int] = dict.fromkeys(runs, 0)
    for chunk in batch_chunks(connection, runs):
        statement = _last_sequences(connection.dialect.name, batch_size(connection, len(chunk)))
        found = execute_prepared(
            connection, statement, batch_values(connection, "logged", _LOGGED_COLUMNS, chunk)
        )
        last.update({(job_id, run_id): top for job_id, run_id, top in found.tuples()})
    stored = []
    for line in lines:
        key = (line.job_id, line.run_id)
        last[key] += 1
        stored.append(replace(line, sequence=last[key]))
    rows = [tuple(log_values(line)[name] for name, _ in _LOG_COLUMNS) for line in stored]
    insert_rows(connection, run_logs, _LOG_COLUMNS, rows, skip_taken=False)
    notify_logs(connection)
    return stored
