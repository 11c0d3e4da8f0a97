"""The pipeline's store port: what the watcher and the executors' streams need from the database.

Every method is one transaction and batches its rows: 10,000 runs a second pass through `claim`,
`heartbeat` and `finish_attempts`. An attempt is named by `AttemptRef`; a write about an attempt applies only
while the run is still on that attempt and in the expected state (the fence), so a late report from an
executor declared lost, or a duplicate message, changes nothing (invariants 4 and 5).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.flow_control import NO_PACING, NO_QUEUE_LIMITS, Pacing
from jobmesh.core.ports.store import FeedCursor, Store
from jobmesh.core.records import JobRecord, LogRecord, RunRecord
from jobmesh.core.shards import ALL_SHARDS


class ClaimStatus(enum.Enum):
    GRANTED = "granted"  # SCHEDULED or QUEUED on this attempt: now RUNNING on this executor
    DUPLICATE = "duplicate"  # already RUNNING (or ended) on this attempt: a duplicate delivery
    CANCELLED = "cancelled"  # cancelled before it started
    STALE = "stale"  # the run is on another attempt
    NOT_FOUND = "not_found"
    DEFERRED = "deferred"  # held back by flow control: still pending, to be claimed again at its retry time


@dataclass(frozen=True, slots=True)
class Claim:
    ref: AttemptRef
    status: ClaimStatus
    # For GRANTED: the run as it is now (RUNNING), whose due_time the executor must not start before.
    run: RunRecord | None = None
    # For DEFERRED: when to claim it again (`core.flow_control`).
    retry_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    ref: AttemptRef
    # The attempt is declared lost when no heartbeat comes before this.
    deadline: datetime


@dataclass(frozen=True, slots=True)
class ProgressReport:
    ref: AttemptRef
    executor: str
    progress: float
    message: str


@dataclass(frozen=True, slots=True)
class Lease:
    holder: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class DueChanges:
    runs: list[Dispatchable]
    cursor: FeedCursor  # where the next read starts
    complete: bool  # nothing more is readable now
    read: int  # the changed runs of these shards read, whatever their due time


class PipelineStore(Protocol):
    # The watcher ------------------------------------------------------------------------------------------

    def due_runs(
        self,
        until: datetime,
        *,
        limit: int,
        shards: Collection[int] = ALL_SHARDS,
        after: datetime | None = None,
    ) -> list[Dispatchable]:
        """SCHEDULED runs of these shards with `due_time <= until` (and `> after` when given: the slice a
        moving window gains), earliest first."""
        ...

    def due_runs_changed(
        self, cursor: FeedCursor, until: datetime, *, shards: Collection[int], limit: int
    ) -> DueChanges:
        """The runs of these shards that the change feed shows SCHEDULED with `due_time <= until`, of the
        runs changed (or created) after `cursor`, from one page of at most `limit` changes."""
        ...

    def mark_queued(self, refs: Sequence[AttemptRef], now: datetime) -> list[AttemptRef]:
        """SCHEDULED → QUEUED with `dispatch_time = now`, for those still SCHEDULED on that attempt.
        Returns the ones changed."""
        ...

    def backlog(self, now: datetime) -> dict[str, tuple[int, datetime]]:
        """By queue, the runs due and not started (SCHEDULED due by `now`, or QUEUED) and the oldest one's due
        time: one grouped read, for the backlog metrics."""
        ...

    def stale_queued(self, dispatched_before: datetime, *, limit: int) -> list[Dispatchable]:
        """QUEUED runs dispatched before the given time and never claimed: their message may be lost (Kafka
        wiped), so the watcher sends them again (a duplicate is refused at claim)."""
        ...

    def cron_jobs_due(
        self, until: datetime, *, limit: int, shards: Collection[int] = ALL_SHARDS
    ) -> list[JobRecord]:
        """ACTIVE cron jobs of these shards whose `next_run_time <= until`, earliest first."""
        ...

    def materialize(
        self,
        job_id: str,
        *,
        expected_next_run_time: datetime,
        runs: Sequence[RunRecord],
        next_run_time: datetime | None,
        completed: bool,
    ) -> list[RunRecord]:
        """Under the job row's lock: when the job is still ACTIVE with `next_run_time ==
        expected_next_run_time`, inserts the runs whose (job, SCHEDULE trigger, schedule_time) does not exist
        yet, and sets `next_run_time` (and COMPLETED when `completed`) without bumping the version (the etag
        is the user's, not the scheduler's). Returns the runs inserted; [] when another watcher got there
        first. Invariant 7: an occurrence exists once per (job, schedule time)."""
        ...

    def active_runs(self, job_ids: Sequence[str]) -> Mapping[str, list[RunRecord]]:
        """The QUEUED, RUNNING and CANCELLING runs of each job (for overlap policies)."""
        ...

    def lost_attempts(self, now: datetime, *, limit: int) -> list[Dispatchable]:
        """RUNNING or CANCELLING runs whose heartbeat deadline has passed."""
        ...

    def attempts_held_by(self, executor: str) -> list[Dispatchable]:
        """RUNNING or CANCELLING runs whose attempt `executor` claimed."""
        ...

    # The executors' streams -------------------------------------------------------------------------------

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
        """One claim per ref, in order. GRANTED sets RUNNING, executor, start_time = last_heartbeat_time =
        now, first_start_time when unset, and the heartbeat deadline = now + the run's heartbeat timeout. A
        claim succeeds once per attempt. A pending run whose job is paused (a scheduled run) or deleted is
        refused CANCELLED and ends so (`REFUSED_CLAIMS`), unless `on_fence`: claims granted on their fences
        while the database was away, recorded now, whose runs started then whatever the job's state is now.
        Flow control (`core.flow_control`): a claim over its job's concurrency key's limit, its queue's
        concurrency limit in `queue_limits` (runs RUNNING or CANCELLING, across the mesh) or its queue's
        rate in `queue_rates`, is DEFERRED and its run left pending; a paced one may start after its due time.
        Claims on their fences are not held back (their runs started). A run flow control admits starts no
        earlier than `clock` read once the running runs are counted (else `now`): a run of its key that had
        just ended ended before it, whenever the caller read `now`."""
        ...

    def heartbeat(self, executor: str, beats: Sequence[Heartbeat], now: datetime) -> list[AttemptRef]:
        """Sets last_heartbeat_time = now and the deadline for attempts this executor still holds (RUNNING
        or CANCELLING on that attempt). Returns the refs that are NOT held any more (fenced)."""
        ...

    def attempts(self, refs: Sequence[AttemptRef]) -> Mapping[AttemptRef, Dispatchable]:
        """The runs currently on these attempts (whatever their state), with their jobs' definitions."""
        ...

    def finish_attempts(
        self, refs: Sequence[AttemptRef], decide: Callable[[Dispatchable], AttemptEnd | None]
    ) -> list[tuple[Dispatchable, AttemptEnd]]:
        """Ends the attempts, each decided on its run as it is under the transaction's lock: for each run
        still RUNNING or CANCELLING on that attempt, `decide` gets the run (with its job's spec) and returns
        its end, or None to leave it running. An end applies when the run is held by the end's `executor`
        (any holder when None): the attempt goes into the history, then the run takes its new state (a retry:
        attempt + 1, SCHEDULED, due at `retry_due_time`, execution fields cleared). Returns the ends applied,
        with their runs as they were, in the order of `refs` (a ref repeated counts once). An end whose run
        state `core.states` allows from the run's state on no transition raises TransitionRefused, another
        that makes no sense ValueError; either writes nothing."""
        ...

    def report_progress(self, reports: Sequence[ProgressReport], now: datetime) -> None:
        """Sets progress and its message on attempts the executor holds; others are ignored."""
        ...

    def append_attempt_logs(self, lines: Sequence[LogRecord]) -> list[LogRecord]:
        """Stores log lines, assigning each run's next sequence numbers in the given order (the `sequence`
        given is ignored). Returns the stored lines."""
        ...

    # Leadership -------------------------------------------------------------------------------------------

    def try_lease(self, name: str, holder: str, ttl: timedelta, now: datetime) -> bool:
        """Takes or renews the lease `name` for `holder` until now + ttl, unless another holder's lease is
        still valid. True when `holder` holds it."""
        ...

    def try_leases(self, names: Sequence[str], holder: str, ttl: timedelta, now: datetime) -> frozenset[str]:
        """`try_lease` of many names at once; returns those `holder` holds."""
        ...

    def release_lease(self, name: str, holder: str) -> None: ...

    def leases(self, prefix: str) -> Mapping[str, Lease]:
        """Every lease whose name starts with `prefix`, expired or not."""
        ...

    # Executor sessions ------------------------------------------------------------------------------------

    def renew_sessions(
        self, executor_ids: Sequence[str], server_id: str, now: datetime, *, stale_after: timedelta
    ) -> frozenset[str]:
        """Records that `server_id` holds live streams of these executors at `now` (never moving a renewal
        back), and returns those whose sessions it holds: a session that another server renewed within
        `stale_after` stays that server's, one older is taken over. The sweeper keeps alive the attempts of
        an executor renewed within their heartbeat timeout."""
        ...

    def release_session(self, executor_id: str, server_id: str) -> None:
        """`server_id`'s stream of this executor ended: any server may take its session at once."""
        ...

    def release_server_sessions(self, server_id: str) -> frozenset[str]:
        """`server_id`'s process died: any server may take the sessions it held at once (not a quiet limit
        later). Returns their executors."""
        ...

    def session_renewals(self, executor_ids: Sequence[str]) -> Mapping[str, datetime]:
        """When each of these executors' streams was last renewed (executors never renewed are absent)."""
        ...


class SchedulerStore(Store, PipelineStore, Protocol):
    """Both ports: what the SQL store implements and the watcher and server use."""
