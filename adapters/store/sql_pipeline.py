"""The watcher's statements: due and stale runs, QUEUED marks, cron materialisation, overlap and lost-attempt
scans, and attempt lookups. Each function runs inside the caller's transaction.

Scans find their runs in `open_runs` (by state and wake time, or by job) and read them from `job_runs` by
primary key (INDEXES.md); batches of refs join `job_runs` through `sql_batch`, pruned to the partitions of
their run ids.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    Text,
    and_,
    func,
    literal_column,
    or_,
    select,
    true,
    update,
)

from jobmesh.adapters.store.schema import job_runs, jobs, open_runs
from jobmesh.adapters.store.sql_batch import (
    ACTIVE,
    FENCE_COLUMNS,
    HELD,
    Columns,
    batch_chunks,
    batch_size,
    batch_table,
    batch_values,
    chunks,
    insert_runs,
    lock_runs,
    run_rows,
    select_runs,
    update_by_key,
)
from jobmesh.adapters.store.sql_feed import changes_after
from jobmesh.adapters.store.sql_prepared import execute_prepared
from jobmesh.adapters.store.sql_rows import JOB_COLUMNS, StoredRow, job_from_row, run_from_row
from jobmesh.core.attempts import AttemptRef, Dispatchable
from jobmesh.core.definitions import decode_spec
from jobmesh.core.names import run_name
from jobmesh.core.ports.pipeline_store import DueChanges
from jobmesh.core.ports.store import FeedCursor
from jobmesh.core.records import JobRecord, RunRecord, RunTrigger, ScheduleKind
from jobmesh.core.states import JobState, RunEvent, RunState, run_sources
from jobmesh.v1 import job_pb2

_JOB_ID_COLUMNS: Columns = (("job_id", Text()),)


def _dispatchables(connection: Connection, statement: Select[tuple[object, ...]]) -> list[Dispatchable]:
    """The runs `statement` (built for this call) selects, with their jobs' specs fetched by primary key in a
    second statement. Not a join: the planner misjudges how few runs a window scan returns (due time and
    partition are correlated) and would hash-join a sequential scan of every job; this way each spec also
    travels once."""
    return _with_specs(connection, connection.execute(statement).mappings())


def _with_specs(connection: Connection, rows: Iterable[StoredRow]) -> list[Dispatchable]:
    runs = [run_from_row(row) for row in rows]
    specs = _specs_of(connection, {run.job_id for run in runs})
    return [Dispatchable(run, specs[run.job_id]) for run in runs]


def _specs_of(connection: Connection, job_ids: Iterable[str]) -> dict[str, job_pb2.Job]:
    """The definitions of these jobs, by primary key, each decoded once."""
    specs: dict[str, job_pb2.Job] = {}
    for chunk in batch_chunks(connection, sorted(set(job_ids))):
        statement = _specs_statement(connection.dialect.name, batch_size(connection, len(chunk)))
        values = batch_values(connection, "wanted", _JOB_ID_COLUMNS, [(job_id,) for job_id in chunk])
        found = execute_prepared(connection, statement, values)
        specs.update((job_id, decode_spec(bytes(spec))) for job_id, spec in found.tuples())
    return specs


@lru_cache(maxsize=64)
def _specs_statement(dialect: str, size: int) -> Select[Any]:
    wanted = batch_table(dialect, "wanted", _JOB_ID_COLUMNS, size)
    return select(jobs.c.job_id, jobs.c.spec).join(wanted, jobs.c.job_id == wanted.c.job_id)


def _open_runs(
    connection: Connection, *conditions: ColumnElement[bool], executor: str | None = None
) -> Select[Any]:
    """The `job_runs` rows of the open runs that meet `conditions` (on `open_runs`; held by `executor` when
    given). On PostgreSQL each is looked up by key, through a LATERAL subquery that its OFFSET keeps from
    being flattened into a join: `open_runs` churns faster than its statistics follow, and a sweep that
    believed them read the day's `job_runs` whole and probed `open_runs` for each run (50 ms a sweep at
    46,000 runs, growing with the day)."""
    found = and_(
        job_runs.c.job_id == open_runs.c.job_id,
        job_runs.c.run_id == open_runs.c.run_id,
        job_runs.c.schedule_time == open_runs.c.schedule_time,
        true() if executor is None else job_runs.c.executor == executor,
    )
    if connection.dialect.name != "postgresql":
        return select(job_runs).select_from(open_runs).join(job_runs, found).where(*conditions)
    run = select(job_runs).where(found).offset(0).lateral("run")
    return select(run).select_from(open_runs).join(run, true()).where(*conditions)


def due_runs(
    connection: Connection,
    until: datetime,
    *,
    limit: int,
    shards: Collection[int],
    after: datetime | None = None,
) -> list[Dispatchable]:
    """A range of `ix_open_runs_shard_wake` per shard."""
    statement = (
        _open_runs(
            connection,
            open_runs.c.shard.in_(sorted(shards)),
            open_runs.c.state == RunState.SCHEDULED.value,
            open_runs.c.wake_time <= until,
            true() if after is None else open_runs.c.wake_time > after,
            # due_time >= schedule_time always: the second bound prunes the partitions of later days.
            open_runs.c.schedule_time <= until,
        )
        .order_by(open_runs.c.wake_time)
        .limit(limit)
    )
    return _dispatchables(connection, statement)


# The runs a dispatch hands to the queue (core.states).
_DISPATCHABLE = run_sources(RunEvent.DISPATCH)


def due_runs_changed(
    connection: Connection, cursor: FeedCursor, until: datetime, *, shards: Collection[int], limit: int
) -> DueChanges:
    """From the change feed (`sql_feed`): its log holds every shard's changes, of which only the runs of
    these shards are looked up."""
    page = changes_after(connection, cursor, limit, _DISPATCHABLE, shards)
    runs = [change.run for change in page.changes if change.run.due_time <= until]
    specs = _specs_of(connection, {run.job_id for run in runs})
    due = [Dispatchable(run, specs[run.job_id]) for run in runs]
    return DueChanges(due, page.cursor, page.complete, len(page.changes))


def mark_queued(connection: Connection, refs: Sequence[AttemptRef], now: datetime) -> list[AttemptRef]:
    # Locked by key and fenced in Python, then written by key (see sql_batch): a claim may have come first.
    rows = lock_runs(connection, refs, FENCE_COLUMNS)
    changed: dict[AttemptRef, StoredRow] = {}
    for ref in refs:
        row = rows.get((ref.job_id, ref.run_id))
        if row is not None and row["attempt"] == ref.attempt and row["state"] in _DISPATCHABLE:
            changed[ref] = row
    if changed:
        update_by_key(
            connection,
            "queued",
            (),
            [(row["job_id"], row["run_id"], row["schedule_time"]) for row in changed.values()],
            state=RunState.QUEUED.value,
            dispatch_time=now,
            update_time=now,
        )
    return list(changed)


def backlog(connection: Connection, now: datetime) -> dict[str, tuple[int, datetime]]:
    """The waiting runs by queue: two ranges of `ix_open_runs_wake` (SCHEDULED due by now, every QUEUED),
    each run looked up by key for its queue and due time."""
    waiting = _open_runs(
        connection,
        or_(
            and_(open_runs.c.state == RunState.SCHEDULED.value, open_runs.c.wake_time <= now),
            open_runs.c.state == RunState.QUEUED.value,
        ),
    ).subquery("waiting")
    statement = select(waiting.c.queue, func.count(), func.min(waiting.c.due_time)).group_by(waiting.c.queue)
    return {queue: (count, oldest) for queue, count, oldest in connection.execute(statement)}


def stale_queued(connection: Connection, dispatched_before: datetime, *, limit: int) -> list[Dispatchable]:
    statement = (
        _open_runs(
            connection, open_runs.c.state == RunState.QUEUED.value, open_runs.c.wake_time < dispatched_before
        )
        .order_by(open_runs.c.wake_time)
        .limit(limit)
    )
    return _dispatchables(connection, statement)


def cron_jobs_due(
    connection: Connection, until: datetime, *, limit: int, shards: Collection[int]
) -> list[JobRecord]:
    """A range of `ix_jobs_shard_next_run_time` per shard."""
    statement = (
        select(*JOB_COLUMNS)
        .where(
            jobs.c.shard.in_(sorted(shards)),
            # ix_jobs_shard_next_run_time's predicate
            jobs.c.state == literal_column(f"'{JobState.ACTIVE.value}'"),
            jobs.c.schedule_kind == ScheduleKind.CRON.value,
            jobs.c.next_run_time <= until,
        )
        .order_by(jobs.c.next_run_time)
        .limit(limit)
    )
    return [job_from_row(row) for row in connection.execute(statement).mappings()]


def materialize(
    connection: Connection,
    job_id: str,
    *,
    expected_next_run_time: datetime,
    runs: Sequence[RunRecord],
    next_run_time: datetime | None,
    completed: bool,
) -> list[RunRecord]:
    for run in runs:
        if run.job_id != job_id or run.trigger is not RunTrigger.SCHEDULE:
            raise ValueError(f"{run_name(run.job_id, run.run_id)}: not a scheduled occurrence of {job_id}")
    # The job row's lock serializes watchers over this job: partitioned job_runs cannot hold a unique
    # (job, schedule time) constraint, so "each occurrence once" (invariant 7) is checked under it.
    lock = (
        select(jobs.c.state, jobs.c.next_run_time)
        .where(jobs.c.job_id == job_id)
        .with_for_update(key_share=True)
    )
    job = connection.execute(lock).first()
    if job is None or job.state != JobState.ACTIVE or job.next_run_time != expected_next_run_time:
        return []  # another watcher got there first, or the job changed under us
    fresh = _first_per_time(runs)
    if fresh:
        existing = connection.execute(
            select(job_runs.c.schedule_time).where(
                job_runs.c.job_id == job_id,
                job_runs.c.trigger == literal_column(f"'{RunTrigger.SCHEDULE.value}'"),
                job_runs.c.schedule_time.in_([run.schedule_time for run in fresh]),
                # An occurrence withdrawn before it ever started (a pause, a schedule change) is made again
                # when the schedule is planned again from before it (a resume, a change back).
                or_(
                    job_runs.c.state != literal_column(f"'{RunState.CANCELLED.value}'"),
                    job_runs.c.first_start_time.is_not(None),
                ),
            )
        ).scalars()
        taken = set(existing)
        fresh = [run for run in fresh if run.schedule_time not in taken]
    if fresh:
        insert_runs(connection, fresh)
    # Neither version nor update_time moves: they (and the etag) belong to the user's edits.
    state = JobState.COMPLETED.value if completed else jobs.c.state
    connection.execute(
        update(jobs).where(jobs.c.job_id == job_id).values(next_run_time=next_run_time, state=state)
    )
    return fresh


def _first_per_time(runs: Sequence[RunRecord]) -> list[RunRecord]:
    seen: set[datetime] = set()
    first = []
    for run in runs:
        if run.schedule_time not in seen:
            seen.add(run.schedule_time)
            first.append(run)
    return first


def active_runs(connection: Connection, job_ids: Sequence[str]) -> Mapping[str, list[RunRecord]]:
    found: dict[str, list[RunRecord]] = {job_id: [] for job_id in job_ids}
    for chunk in chunks(sorted(set(job_ids))):
        statement = _open_runs(
            connection, open_runs.c.job_id.in_(chunk), open_runs.c.state.in_(ACTIVE)
        ).order_by(open_runs.c.job_id, open_runs.c.schedule_time, open_runs.c.run_id)
        for row in connection.execute(statement).mappings():
            found[row["job_id"]].append(run_from_row(row))
    return found


def lost_attempts(connection: Connection, now: datetime, *, limit: int) -> list[Dispatchable]:
    statement = (
        _open_runs(connection, open_runs.c.state.in_(HELD), open_runs.c.wake_time < now)
        .order_by(open_runs.c.wake_time)
        .limit(limit)
    )
    return _dispatchables(connection, statement)


def attempts_held_by(connection: Connection, executor: str) -> list[Dispatchable]:
    """Through the open runs' state index: the runs RUNNING or CANCELLING at once are few, whatever the
    table holds."""
    statement = _open_runs(connection, open_runs.c.state.in_(HELD), executor=executor)
    return _dispatchables(connection, statement)


def attempts(connection: Connection, refs: Sequence[AttemptRef]) -> dict[AttemptRef, Dispatchable]:
    wanted = set(refs)
    found: dict[AttemptRef, Dispatchable] = {}
    for chunk in batch_chunks(connection, run_rows(wanted)):
        for item in _with_specs(
            connection, execute_prepared(connection, *select_runs(connection, chunk)).rows
        ):
            current = AttemptRef(item.run.job_id, item.run.run_id, item.run.attempt)
            if current in wanted:
                found[current] = item
    return found
