"""`SqlStore`: the store ports (`Store`, `PipelineStore`) over SQLAlchemy Core, for PostgreSQL and SQLite.

Statements live in `sql_jobs`, `sql_runs`, `sql_query`, `sql_partitions`, and for the pipeline in
`sql_pipeline`, `sql_attempts` and `sql_leases`; this class owns the engine, the transaction around each call
and the translation of driver errors (`sql_engine.translate_errors`). Pipeline writes go through
`run_write`, which repeats a transaction PostgreSQL aborted for a deadlock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar, cast

from sqlalchemy import Connection, Engine

from jobmesh.adapters.store import (
    sql_attempts,
    sql_audit,
    sql_feed,
    sql_jobs,
    sql_leases,
    sql_partitions,
    sql_pipeline,
    sql_run_counts,
    sql_runs,
    sql_usage,
)
from jobmesh.adapters.store.sql_engine import (
    make_engine,
    read_connection,
    run_write,
    translate_errors,
    unavailable,
    write_transaction,
)
from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.audit import AuditEvent
from jobmesh.core.filters import ListQuery
from jobmesh.core.flow_control import NO_PACING, NO_QUEUE_LIMITS, Pacing
from jobmesh.core.group_commit import GroupCommit
from jobmesh.core.ports.pipeline_store import (
    Claim,
    DueChanges,
    Heartbeat,
    Lease,
    PipelineStore,
    ProgressReport,
)
from jobmesh.core.ports.store import (
    LOGS_CHANGED,
    RUNS_CHANGED,
    ChangePage,
    CreateJobOutcome,
    CreateRunOutcome,
    CreateStatus,
    FeedCursor,
    NamespaceUsage,
    NewJob,
    Page,
    Store,
)
from jobmesh.core.ports.subscription import Subscription
from jobmesh.core.records import JobRecord, LogRecord, RunRecord, RunState, Withdrawal
from jobmesh.core.run_counts import RunCounts
from jobmesh.core.shards import ALL_SHARDS

R = TypeVar("R")
DEFAULT_RETENTION_DAYS = 30
DEFAULT_PARTITION_AHEAD_DAYS = 7
# The most calls whose writes share a transaction: enough to take what queues while one commits at rate,
# few enough that a transaction stays short.
WRITES_PER_TRANSACTION = 32


@dataclass(frozen=True, slots=True)
class _Unwatch:
    store: SqlStore
    key: int

    def close(self) -> None:
        self.store._unwatch(self.key)


# The kinds of write whose concurrent calls share a transaction: those that insert and lock no run.
_SHARED = frozenset({"create_jobs", "append_attempt_logs", "try_lease", "renew_sessions", "release_session"})


def _own_failure(error: BaseException) -> bool:
    """Whether a shared write transaction failed for one call's sake, rather than the database's."""
    return isinstance(error, Exception) and not unavailable(error)


class SqlStore:
    """Implements `Store` and `PipelineStore`. Thread-safe: each call takes a pooled connection."""

    def __init__(
        self,
        url: str,
        *,
        retention_days: int = DEFAULT_RETENTION_DAYS,
        partition_ahead_days: int = DEFAULT_PARTITION_AHEAD_DAYS,
    ) -> None:
        if retention_days < 1 or partition_ahead_days < 0:
            raise ValueError("retention_days must be >= 1 and partition_ahead_days >= 0")
        self._engine = make_engine(url)
        self._retention_days = retention_days
        self._partition_ahead_days = partition_ahead_days
        self._listeners: dict[int, Callable[[str], None]] = {}
        self._listeners_lock = threading.Lock()
        self._listener: sql_feed.Listener | None = None
        # Concurrent calls of one kind that locks no run (the creates of every caller, the executors' log
        # lines) share a write transaction: its BEGIN, COMMIT and WAL flush are paid once for all of them.
        # A call that fails, except for an unavailable database, fails the shared transaction, which
        # is then run again call by call so that only that call fails.
        self._writes: dict[str, GroupCommit[Callable[[Connection], object], object]] = {}
        self._writes_lock = threading.Lock()

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    @property
    def engine(self) -> Engine:
        """The underlying engine, for tests and tools that look beneath the port."""
        return self._engine

    @translate_errors
    def check_reachable(self) -> None:
        with read_connection(self._engine) as connection:
            connection.exec_driver_sql("SELECT 1")

    # Jobs ------------------------------------------------------------------------------------------------

    @translate_errors
    def create_jobs(self, items: Sequence[NewJob]) -> list[CreateJobOutcome]:
        if not items:
            return []
        return self._run_write("create_jobs", lambda connection: sql_jobs.create_jobs(connection, items))

    @translate_errors
    def get_job(self, job_id: str, *, include_deleted: bool = False) -> JobRecord:
        with read_connection(self._engine) as connection:
            return sql_jobs.get_job(connection, job_id, include_deleted=include_deleted)

    @translate_errors
    def update_job(
        self,
        job: JobRecord,
        *,
        expected_version: int | None,
        audit: AuditEvent | None = None,
        withdraw: Withdrawal | None = None,
    ) -> JobRecord:
        with self._writing() as connection:
            updated = sql_jobs.update_job(
                connection, job, expected_version=expected_version, withdraw=withdraw
            )
            sql_audit.record(connection, [audit])
            return updated

    @translate_errors
    def delete_job(
        self,
        job_id: str,
        *,
        expected_version: int | None,
        now: datetime,
        audit: AuditEvent | None = None,
        spared: frozenset[str] = frozenset(),
    ) -> tuple[JobRecord, int]:
        with self._writing() as connection:
            deleted = sql_jobs.delete_job(
                connection, job_id, expected_version=expected_version, now=now, spared=spared
            )
            sql_audit.record(connection, [audit])
            return deleted

    @translate_errors
    def list_jobs(self, query: ListQuery, *, show_deleted: bool) -> Page[JobRecord]:
        with read_connection(self._engine) as connection:
            return sql_jobs.list_jobs(connection, query, show_deleted=show_deleted)

    @translate_errors
    def record_audit(self, events: Sequence[AuditEvent]) -> None:
        with self._writing(notice=None) as connection:
            sql_audit.record(connection, events)

    @translate_errors
    def namespace_usage(self, namespace: str) -> NamespaceUsage:
        with read_connection(self._engine) as connection:
            return sql_usage.namespace_usage(connection, namespace)

    @translate_errors
    def count_runs(self, now: datetime) -> RunCounts:
        with read_connection(self._engine) as connection:
            counts, stored = sql_run_counts.read(connection, now)
        if stored > sql_run_counts.FOLD_ROWS and self.dialect == "postgresql":
            with write_transaction(self._engine) as connection:
                sql_run_counts.fold(connection)
        return counts

    # Runs ------------------------------------------------------------------------------------------------

    @translate_errors
    def create_run(self, run: RunRecord, *, audit: AuditEvent | None = None) -> CreateRunOutcome:
        with self._writing() as connection:
            outcome = sql_runs.create_run(connection, run)
            if outcome.status is CreateStatus.CREATED:
                sql_audit.record(connection, [audit])
            return outcome

    @translate_errors
    def create_runs(self, runs: Sequence[RunRecord], *, audit: AuditEvent | None = None) -> CreateRunOutcome:
        with self._writing() as connection:
            outcome = sql_runs.create_run(connection, runs[0])
            if outcome.status is CreateStatus.CREATED:
                sql_runs.insert_runs(connection, runs[1:])
                sql_audit.record(connection, [audit])
            return outcome

    @translate_errors
    def get_run(self, job_id: str, run_id: str) -> RunRecord:
        with read_connection(self._engine) as connection:
            return sql_runs.get_run(connection, job_id, run_id)

    @translate_errors
    def list_runs(self, job_id: str | None, query: ListQuery) -> Page[RunRecord]:
        with read_connection(self._engine) as connection:
            return sql_runs.list_runs(connection, job_id, query)

    @translate_errors
    def cancel_run(
        self,
        job_id: str,
        run_id: str,
        *,
        reason: str,
        now: datetime,
        audit: Callable[[RunRecord], AuditEvent | None] | None = None,
    ) -> RunRecord:
        with self._writing() as connection:
            run, event = sql_runs.cancel_run(connection, job_id, run_id, reason=reason, now=now, audit=audit)
            if event is not None:
                sql_audit.record(connection, [event])
            return run

    @translate_errors
    def cancel_runs(
        self, runs: Sequence[tuple[str, str, AuditEvent]], *, reason: str, now: datetime
    ) -> list[RunRecord | None]:
        with self._writing() as connection:
            return sql_runs.cancel_runs(connection, runs, reason=reason, now=now)

    # The audit trail ---------------------------------------------------------------------------------------

    @translate_errors
    def list_audit_events(self, query: ListQuery) -> Page[AuditEvent]:
        with read_connection(self._engine) as connection:
            return sql_audit.list_events(connection, query)

    # Logs ------------------------------------------------------------------------------------------------

    @translate_errors
    def append_logs(self, records: Sequence[LogRecord]) -> None:
        if not records:
            return
        with self._writing(LOGS_CHANGED) as connection:
            sql_runs.append_logs(connection, records)

    @translate_errors
    def list_logs(self, job_id: str, run_id: str, *, after_sequence: int, limit: int) -> list[LogRecord]:
        with read_connection(self._engine) as connection:
            return sql_runs.list_logs(connection, job_id, run_id, after_sequence=after_sequence, limit=limit)

    # The pipeline: the watcher ---------------------------------------------------------------------------

    @translate_errors
    def due_runs(
        self,
        until: datetime,
        *,
        limit: int,
        shards: Collection[int] = ALL_SHARDS,
        after: datetime | None = None,
    ) -> list[Dispatchable]:
        with read_connection(self._engine) as connection:
            return sql_pipeline.due_runs(connection, until, limit=limit, shards=shards, after=after)

    @translate_errors
    def due_runs_changed(
        self, cursor: FeedCursor, until: datetime, *, shards: Collection[int], limit: int
    ) -> DueChanges:
        with read_connection(self._engine) as connection:
            return sql_pipeline.due_runs_changed(connection, cursor, until, shards=shards, limit=limit)

    @translate_errors
    def mark_queued(self, refs: Sequence[AttemptRef], now: datetime) -> list[AttemptRef]:
        if not refs:
            return []
        return self._run_write(
            "mark_queued", lambda connection: sql_pipeline.mark_queued(connection, refs, now)
        )

    @translate_errors
    def backlog(self, now: datetime) -> dict[str, tuple[int, datetime]]:
        with read_connection(self._engine) as connection:
            return sql_pipeline.backlog(connection, now)

    @translate_errors
    def stale_queued(self, dispatched_before: datetime, *, limit: int) -> list[Dispatchable]:
        with read_connection(self._engine) as connection:
            return sql_pipeline.stale_queued(connection, dispatched_before, limit=limit)

    @translate_errors
    def cron_jobs_due(
        self, until: datetime, *, limit: int, shards: Collection[int] = ALL_SHARDS
    ) -> list[JobRecord]:
        with read_connection(self._engine) as connection:
            return sql_pipeline.cron_jobs_due(connection, until, limit=limit, shards=shards)

    @translate_errors
    def materialize(
        self,
        job_id: str,
        *,
        expected_next_run_time: datetime,
        runs: Sequence[RunRecord],
        next_run_time: datetime | None,
        completed: bool,
    ) -> list[RunRecord]:
        return self._run_write(
            "materialize",
            lambda connection: sql_pipeline.materialize(
                connection,
                job_id,
                expected_next_run_time=expected_next_run_time,
                runs=runs,
                next_run_time=next_run_time,
                completed=completed,
            ),
        )

    @translate_errors
    def active_runs(self, job_ids: Sequence[str]) -> Mapping[str, list[RunRecord]]:
        with read_connection(self._engine) as connection:
            return sql_pipeline.active_runs(connection, job_ids)

    @translate_errors
    def lost_attempts(self, now: datetime, *, limit: int) -> list[Dispatchable]:
        with read_connection(self._engine) as connection:
            return sql_pipeline.lost_attempts(connection, now, limit=limit)

    @translate_errors
    def attempts_held_by(self, executor: str) -> list[Dispatchable]:
        with read_connection(self._engine) as connection:
            return sql_pipeline.attempts_held_by(connection, executor)

    # The pipeline: the executors' streams -----------------------------------------------------------------

    @translate_errors
    def claim(
        self,
        refs: Sequence[AttemptRef],
        executor: str,
        now: datetime,
        *,
        on_fence: bool = False,
        queue_rates: Mapping[str, Pacing] = NO_PACING,
        queue_limits: Mapping[str, int] = NO_QUEUE_LIMITS,
        clock: Callable[[], datetime] | None = None,
    ) -> list[Claim]:
        if not refs:
            return []
        return self._run_write(
            "claim",
            lambda connection: sql_attempts.claim(
                connection,
                refs,
                executor,
                now,
                on_fence=on_fence,
                queue_rates=queue_rates,
                queue_limits=queue_limits,
                clock=clock,
            ),
        )

    @translate_errors
    def heartbeat(self, executor: str, beats: Sequence[Heartbeat], now: datetime) -> list[AttemptRef]:
        if not beats:
            return []
        return self._run_write(
            "heartbeat",
            lambda connection: sql_attempts.heartbeat(connection, executor, beats, now),
            notice=None,
        )

    @translate_errors
    def attempts(self, refs: Sequence[AttemptRef]) -> Mapping[AttemptRef, Dispatchable]:
        if not refs:
            return {}
        with read_connection(self._engine) as connection:
            return sql_pipeline.attempts(connection, refs)

    @translate_errors
    def finish_attempts(
        self, refs: Sequence[AttemptRef], decide: Callable[[Dispatchable], AttemptEnd | None]
    ) -> list[tuple[Dispatchable, AttemptEnd]]:
        if not refs:
            return []
        return self._run_write(
            "finish_attempts",
            lambda connection: sql_attempts.finish_attempts(connection, refs, decide),
        )

    @translate_errors
    def report_progress(self, reports: Sequence[ProgressReport], now: datetime) -> None:
        if reports:
            self._run_write(
                "report_progress",
                lambda connection: sql_attempts.report_progress(connection, reports, now),
            )

    @translate_errors
    def append_attempt_logs(self, lines: Sequence[LogRecord]) -> list[LogRecord]:
        if not lines:
            return []
        return self._run_write(
            "append_attempt_logs",
            lambda connection: sql_runs.append_attempt_logs(connection, lines),
            notice=LOGS_CHANGED,
        )

    # Leadership --------------------------------------------------------------------------------------------

    @translate_errors
    def try_lease(self, name: str, holder: str, ttl: timedelta, now: datetime) -> bool:
        return self._run_write(
            "try_lease",
            lambda connection: sql_leases.try_lease(connection, name, holder, ttl, now),
            notice=None,
        )

    @translate_errors
    def try_leases(self, names: Sequence[str], holder: str, ttl: timedelta, now: datetime) -> frozenset[str]:
        with self._writing(None) as connection:
            return sql_leases.try_leases(connection, names, holder, ttl, now)

    @translate_errors
    def release_lease(self, name: str, holder: str) -> None:
        with self._writing(None) as connection:
            sql_leases.release_lease(connection, name, holder)

    @translate_errors
    def leases(self, prefix: str) -> Mapping[str, Lease]:
        with read_connection(self._engine) as connection:
            return sql_leases.leases_named(connection, prefix)

    @translate_errors
    def renew_sessions(
        self, executor_ids: Sequence[str], server_id: str, now: datetime, *, stale_after: timedelta
    ) -> frozenset[str]:
        if not executor_ids:
            return frozenset()
        return self._run_write(
            "renew_sessions",
            lambda connection: sql_leases.renew_sessions(
                connection, executor_ids, server_id, now, stale_after
            ),
            notice=None,
        )

    @translate_errors
    def release_session(self, executor_id: str, server_id: str) -> None:
        self._run_write(
            "release_session",
            lambda connection: sql_leases.release_sessions(connection, server_id, executor_id),
            notice=None,
        )

    @translate_errors
    def release_server_sessions(self, server_id: str) -> frozenset[str]:
        with self._writing(None) as connection:
            return sql_leases.release_sessions(connection, server_id)

    @translate_errors
    def session_renewals(self, executor_ids: Sequence[str]) -> Mapping[str, datetime]:
        if not executor_ids:
            return {}
        with read_connection(self._engine) as connection:
            return sql_leases.session_renewals(connection, executor_ids)

    # The change feed --------------------------------------------------------------------------------------

    @translate_errors
    def feed_cursor(self) -> FeedCursor:
        with read_connection(self._engine) as connection:
            return sql_feed.feed_cursor(connection)

    @translate_errors
    def changes_after(
        self, cursor: FeedCursor, *, limit: int, states: frozenset[RunState] | None = None
    ) -> ChangePage:
        with read_connection(self._engine) as connection:
            return sql_feed.changes_after(connection, cursor, limit, states)

    def watch_changes(self, callback: Callable[[str], None]) -> Subscription:
        with self._listeners_lock:
            key = id(callback)
            self._listeners[key] = callback
            if self.dialect == "postgresql" and self._listener is None:
                self._listener = sql_feed.Listener(self._engine.url, self._notify)
        return _Unwatch(self, key)

    @property
    def notices_from_other_processes(self) -> bool:
        return self.dialect == "postgresql"

    def _unwatch(self, key: int) -> None:
        with self._listeners_lock:
            self._listeners.pop(key, None)
            listener = self._listener if not self._listeners else None
            if listener is not None:
                self._listener = None
        if listener is not None:
            listener.close()

    def _notify(self, what: str) -> None:
        with self._listeners_lock:
            callbacks = list(self._listeners.values())
        for callback in callbacks:
            callback(what)

    @contextmanager
    def _writing(self, notice: str | None = RUNS_CHANGED) -> Iterator[Connection]:
        """A write transaction; once it has committed, this process's feed hears of it."""
        with write_transaction(self._engine) as connection:
            yield connection
        if notice is not None:
            self._notify(notice)

    def _run_write(
        self, kind: str, work: Callable[[Connection], R], *, notice: str | None = RUNS_CHANGED
    ) -> R:
        """`work` in a write transaction, shared with concurrent calls of the same `kind` (this store's
        method) when that kind locks no run (`_SHARED`). A call must not hold a transaction of this store
        open while it waits.

        Writes that lock runs keep a transaction each. Each locks its runs in one statement, in key order,
        so two of them never deadlock. Shared, they locked call after call, out of that order, and
        deadlocked (PostgreSQL breaks a deadlock after a second). With a shared transaction's runs locked
        first, in one statement, one transaction may hold thousands of runs (a group of heartbeat batches),
        and the executors' other reports wait behind it; docs/performance.md has what that measured."""
        if kind in _SHARED:
            [result] = self._writes_of(kind).submit([work])
        else:
            result = run_write(self._engine, work)
        if notice is not None:
            self._notify(notice)
        return cast(R, result)

    def _writes_of(self, kind: str) -> GroupCommit[Callable[[Connection], object], object]:
        with self._writes_lock:
            writes = self._writes.get(kind)
            if writes is None:
                writes = self._writes[kind] = GroupCommit(
                    self._write_together, max_items=WRITES_PER_TRANSACTION, alone=_own_failure
                )
            return writes

    def _write_together(self, works: Sequence[Callable[[Connection], object]]) -> list[object]:
        return run_write(self._engine, lambda connection: [work(connection) for work in works])

    # Maintenance -------------------------------------------------------------------------------------------

    @translate_errors
    def maintain_partitions(self, now: datetime) -> None:
        if self.dialect != "postgresql":
            return  # SQLite keeps one plain table
        sql_partitions.maintain(
            self._engine, now, retention_days=self._retention_days, ahead_days=self._partition_ahead_days
        )

    def close(self) -> None:
        with self._listeners_lock:
            listener, self._listener = self._listener, None
            self._listeners.clear()
        if listener is not None:
            listener.close()
        self._engine.dispose()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


if TYPE_CHECKING:
    # mypy proves SqlStore implements both ports
    _conforms: type[Store] = SqlStore
    _conforms_pipeline: type[PipelineStore] = SqlStore
