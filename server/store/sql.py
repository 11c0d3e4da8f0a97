"""`SqlStore`: the store port over SQLAlchemy Core, for PostgreSQL and SQLite.

Statements live in `sql_jobs`, `sql_runs`, `sql_query` and `sql_partitions`; this class owns the engine,
the transaction around each call and the translation of driver errors (`sql_engine.translate_errors`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from jobmesh.server.filtering import ListQuery
from jobmesh.server.records import JobRecord, LogRecord, RunRecord
from jobmesh.server.store import sql_jobs, sql_partitions, sql_runs
from jobmesh.server.store.port import CreateJobOutcome, CreateRunOutcome, NewJob, Page, Store
from jobmesh.server.store.sql_engine import make_engine, read_connection, translate_errors, write_transaction

DEFAULT_RETENTION_DAYS = 30
DEFAULT_PARTITION_AHEAD_DAYS = 7


class SqlStore:
    """Implements `jobmesh.server.store.port.Store`. Thread-safe: each call takes a pooled connection."""

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

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    @property
    def engine(self) -> Engine:
        """The underlying engine, for tests and tools that look beneath the port."""
        return self._engine

    # Jobs ------------------------------------------------------------------------------------------------

    @translate_errors
    def create_jobs(self, items: Sequence[NewJob]) -> list[CreateJobOutcome]:
        if not items:
            return []
        with write_transaction(self._engine) as connection:
            return sql_jobs.create_jobs(connection, items)

    @translate_errors
    def get_job(self, job_id: str, *, include_deleted: bool = False) -> JobRecord:
        with read_connection(self._engine) as connection:
            return sql_jobs.get_job(connection, job_id, include_deleted=include_deleted)

    @translate_errors
    def update_job(self, job: JobRecord, *, expected_version: int | None) -> JobRecord:
        with write_transaction(self._engine) as connection:
            return sql_jobs.update_job(connection, job, expected_version=expected_version)

    @translate_errors
    def delete_job(
        self, job_id: str, *, expected_version: int | None, now: datetime
    ) -> tuple[JobRecord, int]:
        with write_transaction(self._engine) as connection:
            return sql_jobs.delete_job(connection, job_id, expected_version=expected_version, now=now)

    @translate_errors
    def list_jobs(self, query: ListQuery, *, show_deleted: bool) -> Page[JobRecord]:
        with read_connection(self._engine) as connection:
            return sql_jobs.list_jobs(connection, query, show_deleted=show_deleted)

    # Runs ------------------------------------------------------------------------------------------------

    @translate_errors
    def create_run(self, run: RunRecord) -> CreateRunOutcome:
        with write_transaction(self._engine) as connection:
            return sql_runs.create_run(connection, run)

    @translate_errors
    def get_run(self, job_id: str, run_id: str) -> RunRecord:
        with read_connection(self._engine) as connection:
            return sql_runs.get_run(connection, job_id, run_id)

    @translate_errors
    def list_runs(self, job_id: str | None, query: ListQuery) -> Page[RunRecord]:
        with read_connection(self._engine) as connection:
            return sql_runs.list_runs(connection, job_id, query)

    @translate_errors
    def cancel_run(self, job_id: str, run_id: str, *, reason: str, now: datetime) -> RunRecord:
        with write_transaction(self._engine) as connection:
            return sql_runs.cancel_run(connection, job_id, run_id, reason=reason, now=now)

    # Logs ------------------------------------------------------------------------------------------------

    @translate_errors
    def append_logs(self, records: Sequence[LogRecord]) -> None:
        if not records:
            return
        with write_transaction(self._engine) as connection:
            sql_runs.append_logs(connection, records)

    @translate_errors
    def list_logs(self, job_id: str, run_id: str, *, after_sequence: int, limit: int) -> list[LogRecord]:
        with read_connection(self._engine) as connection:
            return sql_runs.list_logs(connection, job_id, run_id, after_sequence=after_sequence, limit=limit)

    # Maintenance -------------------------------------------------------------------------------------------

    @translate_errors
    def maintain_partitions(self, now: datetime) -> None:
        if self.dialect != "postgresql":
            return  # SQLite keeps one plain table
        sql_partitions.maintain(
            self._engine, now, retention_days=self._retention_days, ahead_days=self._partition_ahead_days
        )

    def close(self) -> None:
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
    _conforms: type[Store] = SqlStore  # mypy proves SqlStore implements the port
