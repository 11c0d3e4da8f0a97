"""Job statements of the SQL store. Each function runs inside the caller's transaction."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Insert,
    RowMapping,
    Update,
    func,
    literal,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from jobmesh.adapters.store import sql_audit
from jobmesh.adapters.store.schema import FAR_FUTURE, UtcDateTime, job_runs, jobs
from jobmesh.adapters.store.sql_batch import insert_rows, insert_runs
from jobmesh.adapters.store.sql_query import Listing, fetch_page, where_clauses
from jobmesh.adapters.store.sql_rows import (
    JOB_COLUMNS,
    JOB_ROW_COLUMNS,
    cancelled_values,
    cancelling_values,
    job_from_row,
    job_row,
    job_values,
    run_from_row,
)
from jobmesh.core.errors import EtagMismatch, NotFound
from jobmesh.core.filters import ListQuery
from jobmesh.core.names import job_name
from jobmesh.core.ports.store import CreateJobOutcome, CreateStatus, NewJob, Page
from jobmesh.core.records import (
    JOB_DELETED,
    PENDING_RUN_STATES,
    JobRecord,
    JobState,
    RunRecord,
    RunState,
    Withdrawal,
)

JOB_LISTING = Listing(
    kind="jobs",
    fields={
        "state": jobs.c.state,
        "schedule": jobs.c.schedule_kind,
        "priority": jobs.c.priority,
        "namespace": jobs.c.namespace,
        "queue": jobs.c.queue,
        "display_name": jobs.c.display_name,
        "name": jobs.c.job_id,
        "create_time": jobs.c.create_time,
        "update_time": jobs.c.update_time,
        "next_run_time": jobs.c.next_run_time,
    },
    sortable={
        "display_name": jobs.c.display_name,
        "name": jobs.c.job_id,
        "create_time": jobs.c.create_time,
        "update_time": jobs.c.update_time,
        "next_run_time": func.coalesce(jobs.c.next_run_time, literal(FAR_FUTURE, UtcDateTime())),
    },
    tiebreak=(jobs.c.job_id,),
    labels=jobs.c.labels,
    namespace=jobs.c.namespace,
)


def etag(version: int) -> str:
    """The etag the API shows for a job version (EtagMismatch carries it)."""
    return str(version)


def upsert_ignoring_conflicts(connection: Connection, table: Any) -> Insert:
    """`INSERT ... ON CONFLICT DO NOTHING` in the connection's dialect."""
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    return dialect_insert(table).on_conflict_do_nothing()


# Create --------------------------------------------------------------------------------------------------


def create_jobs(connection: Connection, items: Sequence[NewJob]) -> list[CreateJobOutcome]:
    candidates = _first_claims(items)
    inserted = _insert_jobs(connection, [items[i] for i in candidates])
    created = [i for i in candidates if items[i].job.job_id in inserted]
    sql_audit.record(connection, [items[i].audit for i in created])
    runs = [run for run in (items[i].first_run for i in created) if run is not None]
    if runs:
        insert_runs(connection, runs)
    outcomes: dict[int, CreateJobOutcome] = {
        i: CreateJobOutcome(CreateStatus.CREATED, items[i].job, items[i].first_run) for i in created
    }
    rest = [i for i in range(len(items)) if i not in outcomes]
    outcomes.update(zip(rest, _classify(connection, [items[i] for i in rest]), strict=True))
    return [outcomes[i] for i in range(len(items))]


def _first_claims(items: Sequence[NewJob]) -> list[int]:
    """Indexes of the items that claim a job id and request id first in the batch; later duplicates are
    classified against what the first ones left in the database."""
    ids: set[str] = set()
    requests: set[tuple[str, str]] = set()
    chosen: list[int] = []
    for index, item in enumerate(items):
        job, request = item.job, _request_key(item.job)
        if job.job_id in ids or (request is not None and request in requests):
            continue
        ids.add(job.job_id)
        if request is not None:
            requests.add(request)
        chosen.append(index)
    return chosen


def _request_key(job: JobRecord) -> tuple[str, str] | None:
    """What a create's request id is unique in: its namespace."""
    return None if job.request_id is None else (job.namespace, job.request_id)


def _insert_jobs(connection: Connection, items: Sequence[NewJob]) -> set[str]:
    if not items:
        return set()
    rows = [job_row(item.job, first_run_id=_first_run_id(item)) for item in items]
    # Conflicts on the id or the request id are skipped (and classified after).
    inserted = insert_rows(connection, jobs, JOB_ROW_COLUMNS, rows, skip_taken=True, returning=jobs.c.job_id)
    return set(inserted)


def _first_run_id(item: NewJob) -> str | None:
    return item.first_run.run_id if item.first_run else None


def _classify(connection: Connection, items: Sequence[NewJob]) -> list[CreateJobOutcome]:
    """Outcomes of items that were not inserted: the request id decides first, then the job id."""
    if not items:
        return []
    ids = {item.job.job_id for item in items}
    requests = {key for key in map(_request_key, (item.job for item in items)) if key is not None}
    taken: ColumnElement[bool] = jobs.c.job_id.in_(ids)
    if requests:
        taken = or_(taken, tuple_(jobs.c.namespace, jobs.c.request_id).in_(sorted(requests)))
    rows = connection.execute(select(*JOB_COLUMNS, jobs.c.first_run_id).where(taken)).mappings().all()
    by_request = {(row["namespace"], row["request_id"]): row for row in rows if row["request_id"] is not None}
    first_runs = _first_runs(connection, [row for row in rows if row["first_run_id"] is not None])
    outcomes: list[CreateJobOutcome] = []
    for item in items:
        key = _request_key(item.job)
        earlier = by_request.get(key) if key is not None else None
        if earlier is None:
            outcomes.append(CreateJobOutcome(CreateStatus.ID_TAKEN))
        elif earlier["request_hash"] == item.job.request_hash:
            first_run = first_runs.get((earlier["job_id"], earlier["first_run_id"]))
            outcomes.append(CreateJobOutcome(CreateStatus.REPLAYED, job_from_row(earlier), first_run))
        else:
            outcomes.append(CreateJobOutcome(CreateStatus.REQUEST_ID_REUSED))
    return outcomes


def _first_runs(connection: Connection, rows: Sequence[RowMapping]) -> dict[tuple[str, str], RunRecord]:
    if not rows:
        return {}
    keys = [(row["job_id"], row["first_run_id"]) for row in rows]
    found = connection.execute(select(job_runs).where(tuple_(job_runs.c.job_id, job_runs.c.run_id).in_(keys)))
    return {(row["job_id"], row["run_id"]): run_from_row(row) for row in found.mappings()}


# Read, update, delete ------------------------------------------------------------------------------------


def get_job(connection: Connection, job_id: str, *, include_deleted: bool) -> JobRecord:
    row = connection.execute(select(*JOB_COLUMNS).where(jobs.c.job_id == job_id)).mappings().first()
    if row is None or (row["state"] == JobState.DELETED and not include_deleted):
        raise NotFound(job_name(job_id))
    return job_from_row(row)


def update_job(
    connection: Connection,
    job: JobRecord,
    *,
    expected_version: int | None,
    withdraw: Withdrawal | None = None,
) -> JobRecord:
    values = job_values(job)
    writable = (
        "spec",
        "display_name",
        "labels",
        "schedule_kind",
        "priority",
        "queue",
        "state",
        "next_run_time",
        "concurrency_key",
        "concurrency_limit",
    )
    updated = _versioned_update(
        connection,
        job.job_id,
        expected_version,
        {**{name: values[name] for name in writable}, "update_time": job.update_time},
    )
    if withdraw is not None:
        withdraw_runs(connection, job.job_id, withdraw, job.update_time)
    return updated


def delete_job(
    connection: Connection,
    job_id: str,
    *,
    expected_version: int | None,
    now: datetime,
    spared: frozenset[str] = frozenset(),
) -> tuple[JobRecord, int]:
    values = {"state": JobState.DELETED.value, "next_run_time": None, "update_time": now}
    deleted = _versioned_update(connection, job_id, expected_version, values)
    cancelled = withdraw_runs(connection, job_id, dataclasses.replace(JOB_DELETED, spared=spared), now)
    cancelling = connection.execute(
        _runs_of(job_id, (RunState.RUNNING,)).values(cancelling_values(JOB_DELETED.reason, now))
    ).rowcount
    return deleted, cancelled + cancelling


def withdraw_runs(connection: Connection, job_id: str, withdrawal: Withdrawal, now: datetime) -> int:
    """Ends the job's runs not yet claimed (of the withdrawal's triggers, but for the spared ones) CANCELLED;
    how many there were."""
    statement = _runs_of(job_id, tuple(PENDING_RUN_STATES)).where(
        job_runs.c.trigger.in_(sorted(trigger.value for trigger in withdrawal.triggers))
    )
    if withdrawal.spared:
        statement = statement.where(job_runs.c.run_id.not_in(sorted(withdrawal.spared)))
    return connection.execute(statement.values(cancelled_values(withdrawal.reason, now))).rowcount


def _runs_of(job_id: str, states: Sequence[RunState]) -> Update:
    return update(job_runs).where(
        job_runs.c.job_id == job_id, job_runs.c.state.in_(sorted(s.value for s in states))
    )


def _versioned_update(
    connection: Connection, job_id: str, expected_version: int | None, values: Mapping[str, Any]
) -> JobRecord:
    statement = update(jobs).where(jobs.c.job_id == job_id, jobs.c.state != JobState.DELETED.value)
    if expected_version is not None:
        statement = statement.where(jobs.c.version == expected_version)
    statement = statement.values(**values, version=jobs.c.version + 1).returning(*JOB_COLUMNS)
    row = connection.execute(statement).mappings().first()
    if row is None:
        current = connection.execute(
            select(jobs.c.state, jobs.c.version).where(jobs.c.job_id == job_id)
        ).first()
        if current is None or current.state == JobState.DELETED:
            raise NotFound(job_name(job_id))
        raise EtagMismatch(job_name(job_id), etag(current.version))
    return job_from_row(row)


# List ----------------------------------------------------------------------------------------------------


def list_jobs(connection: Connection, query: ListQuery, *, show_deleted: bool) -> Page[JobRecord]:
    statement = select(*JOB_COLUMNS).where(
        *where_clauses(JOB_LISTING, query.comparisons, connection.dialect.name)
    )
    if not show_deleted:
        statement = statement.where(jobs.c.state != JobState.DELETED.value)
    return fetch_page(
        connection,
        statement,
        listing=JOB_LISTING,
        query=query,
        scope=("show_deleted", show_deleted),
        convert=job_from_row,
    )
