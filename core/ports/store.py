"""The store port: what the business logic needs from a database, and nothing about which one.

Adapters (SQL over PostgreSQL or SQLite) implement `Store` and raise only the project's errors
(`jobmesh.core.errors`): `NotFound`, `EtagMismatch`, `StoreUnavailable`, `InvalidArgument` for a bad page
token. Every method is synchronous and safe to call from several threads.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from jobmesh.core.audit import AuditEvent
from jobmesh.core.filters import ListQuery
from jobmesh.core.ports.subscription import Subscription
from jobmesh.core.records import JobRecord, LogRecord, RunRecord, RunState, Withdrawal
from jobmesh.core.run_counts import RunCounts

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_page_token: str


class CreateStatus(enum.Enum):
    CREATED = "created"
    # The same request_id was seen before with the same request hash: `job`/`run` is the earlier result.
    REPLAYED = "replayed"
    # The same request_id was seen before with a different request hash.
    REQUEST_ID_REUSED = "request_id_reused"
    # The job id is taken (by another request).
    ID_TAKEN = "id_taken"


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job to insert, with the run that is due at once (immediate or within the threshold), if any, and the
    audit event its creation writes."""

    job: JobRecord
    first_run: RunRecord | None = None
    audit: AuditEvent | None = None


@dataclass(frozen=True, slots=True)
class CreateJobOutcome:
    status: CreateStatus
    job: JobRecord | None = None
    first_run: RunRecord | None = None


@dataclass(frozen=True, slots=True)
class CreateRunOutcome:
    status: CreateStatus
    run: RunRecord | None = None


@dataclass(frozen=True, slots=True, order=True)
class FeedCursor:
    """A place in the change feed: just after the change of run (job_id, run_id) at `position`."""

    position: int
    job_id: str = ""
    run_id: str = ""


@dataclass(frozen=True, slots=True)
class RunChange:
    """A run as a change left it, with its job's labels (a filter may name them), and where it lies."""

    run: RunRecord
    labels: Mapping[str, str]
    cursor: FeedCursor


@dataclass(frozen=True, slots=True)
class ChangePage:
    changes: list[RunChange]
    cursor: FeedCursor  # where to read on from: after the last change, or past all there is to read now
    complete: bool  # nothing more is readable now


# What a change notice is about.
RUNS_CHANGED, LOGS_CHANGED = "runs", "logs"


@dataclass(frozen=True, slots=True)
class NamespaceUsage:
    """What a namespace holds: its jobs (deleted ones aside), and those on a cron schedule not completed."""

    jobs: int
    cron_jobs: int


class Store(Protocol):
    """Every write that takes an `audit` event writes it in the transaction of its change, and only when
    something changed."""

    # Jobs ------------------------------------------------------------------------------------------------

    def create_jobs(self, items: Sequence[NewJob]) -> list[CreateJobOutcome]:
        """Inserts jobs (and their first runs) in one transaction; one outcome per item, in order.

        A request id is unique within the job's namespace. An item whose `request_id` was used before there
        is not inserted: REPLAYED when its `request_hash` matches
        (the earlier job and its first run are returned), REQUEST_ID_REUSED otherwise. An item whose job id is
        taken is ID_TAKEN. Other items are CREATED whatever happens to their neighbours.
        """
        ...

    def get_job(self, job_id: str, *, include_deleted: bool = False) -> JobRecord:
        """Raises NotFound (`jobs/{job_id}`) when missing, or deleted and not `include_deleted`."""
        ...

    def update_job(
        self,
        job: JobRecord,
        *,
        expected_version: int | None,
        audit: AuditEvent | None = None,
        withdraw: Withdrawal | None = None,
    ) -> JobRecord:
        """Replaces the job's writable columns (spec, display_name, labels, schedule_kind, priority, queue,
        state, next_run_time) and sets update_time; bumps version by one. With `withdraw`, in the same
        transaction, the job's SCHEDULED and QUEUED runs of its triggers but its spared ones become CANCELLED
        (end_time = update_time, error type `Cancelled`, message = its reason); running ones go on.

        Raises NotFound when missing or deleted; EtagMismatch when `expected_version` is given and differs;
        TransitionRefused when `core.states` allows no transition from the stored state to `job.state`
        (nothing is written). Returns the stored record.
        """
        ...

    def delete_job(
        self,
        job_id: str,
        *,
        expected_version: int | None,
        now: datetime,
        audit: AuditEvent | None = None,
        spared: frozenset[str] = frozenset(),
    ) -> tuple[JobRecord, int]:
        """Marks the job DELETED (next_run_time cleared, version bumped) and, in the same transaction,
        cancels its runs: SCHEDULED and QUEUED become CANCELLED (end_time = now) but for the runs of `spared`
        (run ids claimed on their fences: `Withdrawal.spared`), RUNNING becomes CANCELLING (error type
        `Cancelled`, message `job deleted` on both).

        Returns the deleted job and how many runs were cancelled or set cancelling. NotFound / EtagMismatch as
        in update_job.
        """
        ...

    def list_jobs(self, query: ListQuery, *, show_deleted: bool) -> Page[JobRecord]:
        """A page of jobs matching `query.comparisons`, in `query.order_by` order (ties broken by job id).

        `page_token` is the previous page's `next_page_token`; a token that does not decode, or was made for
        another filter or order, raises InvalidArgument on field `page_token`.
        """
        ...

    def namespace_usage(self, namespace: str) -> NamespaceUsage:
        """How many jobs the namespace holds, for its quotas."""
        ...

    def record_audit(self, events: Sequence[AuditEvent]) -> None:
        """Writes audit events of their own (a refused call's), in a transaction of their own."""
        ...

    # Runs ------------------------------------------------------------------------------------------------

    def create_run(self, run: RunRecord, *, audit: AuditEvent | None = None) -> CreateRunOutcome:
        """Inserts a run (RunJobNow, ReplayRun), idempotent on (job_id, request_id) like create_jobs.

        Raises NotFound when the job is missing or deleted.
        """
        ...

    def create_runs(self, runs: Sequence[RunRecord], *, audit: AuditEvent | None = None) -> CreateRunOutcome:
        """Inserts runs of one job in one transaction (a backfill), idempotent on the first run's request id
        as create_run is: the outcome is the first run's, and the others are inserted only when it was.

        Raises NotFound when the job is missing or deleted.
        """
        ...

    def get_run(self, job_id: str, run_id: str) -> RunRecord:
        """The run with its previous attempts. Raises NotFound (`jobs/{job_id}/runs/{run_id}`)."""
        ...

    def list_runs(self, job_id: str | None, query: ListQuery) -> Page[RunRecord]:
        """A page of runs of one job (or of every job when `job_id` is None), filtered and ordered as in
        list_jobs (ties broken by run id). The `labels` comparisons apply to the run's job's labels.
        `previous_attempts` may be left empty in list results."""
        ...

    def cancel_run(
        self,
        job_id: str,
        run_id: str,
        *,
        reason: str,
        now: datetime,
        audit: Callable[[RunRecord], AuditEvent | None] | None = None,
    ) -> RunRecord:
        """SCHEDULED or QUEUED becomes CANCELLED (end_time = now, error type `Cancelled`, message = reason);
        RUNNING becomes CANCELLING, with the same error type and message (the attempt's end keeps them). A run
        already CANCELLING or terminal is returned unchanged. The run is read once, under its lock: `audit`
        is called with it before it changes, may refuse the cancel by raising (nothing is written), and
        returns the audit event recorded with the change (none when nothing changes). Raises NotFound."""
        ...

    def cancel_runs(
        self, runs: Sequence[tuple[str, str, AuditEvent]], *, reason: str, now: datetime
    ) -> list[RunRecord | None]:
        """Cancels each `(job_id, run_id, audit)` as cancel_run does (writing the audit events of those that
        changed), all in one transaction and in a few statements rather than a few per run; one result per
        item, in order: the run (its `previous_attempts` may be left empty), or None for a run that is not
        there."""
        ...

    # The audit trail ---------------------------------------------------------------------------------------

    def list_audit_events(self, query: ListQuery) -> Page[AuditEvent]:
        """A page of audit events, filtered, scoped and ordered as in list_jobs (ties broken by event id)."""
        ...

    # Logs ------------------------------------------------------------------------------------------------

    def append_logs(self, records: Sequence[LogRecord]) -> None:
        """Stores log lines; each (job_id, run_id, sequence) once (a repeated one is ignored)."""
        ...

    def list_logs(self, job_id: str, run_id: str, *, after_sequence: int, limit: int) -> list[LogRecord]:
        """Lines of a run with sequence > after_sequence, in sequence order, at most `limit`."""
        ...

    def count_runs(self, now: datetime) -> RunCounts:
        """The runs per namespace, queue and state, `SCHEDULED` ones not yet due at `now` counted apart
        (`core.run_counts`). Cheap: it reads kept counts, never counts the runs."""
        ...

    # The change feed --------------------------------------------------------------------------------------

    def feed_cursor(self) -> FeedCursor:
        """Where the feed stands now: every change committed from now on lies after it."""
        ...

    def changes_after(
        self, cursor: FeedCursor, *, limit: int, states: frozenset[RunState] | None = None
    ) -> ChangePage:
        """Runs whose latest visible change (their update_time changed) lies after `cursor`, in feed order.
        Never skips a change: one whose transaction may still commit before others is left for a later read.
        With `states`, only the changes that left a run in one of them, and the page's cursor still passes
        every change read (a reader that wants a few changes does not pay for all).
        """
        ...

    def watch_changes(self, callback: Callable[[str], None]) -> Subscription:
        """Calls `callback(RUNS_CHANGED)` or `callback(LOGS_CHANGED)`, from any thread, when runs or logs may
        have changed, by this process or, where the database can tell (PostgreSQL), by another."""
        ...

    @property
    def notices_from_other_processes(self) -> bool:
        """False when changes made by other processes send no notice (SQLite): a feed polls then."""
        ...

    # Maintenance -------------------------------------------------------------------------------------------

    def check_reachable(self) -> None:
        """Returns when the database answers (a readiness probe); raises StoreUnavailable when it does not."""
        ...

    def maintain_partitions(self, now: datetime) -> None:
        """Creates the run partitions the coming days need and drops those past retention. A no-op on
        stores without partitions."""
        ...

    def close(self) -> None: ...
