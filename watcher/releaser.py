"""Releasing runs from the timer to the queue at their instant (minus the lead), in batches.

Cron runs honour their job's catch-up window and overlap policy here, when they are about to start: one later
than the window is skipped; one due while an earlier run is going is skipped, buffered (one or all), started
after cancelling the other, or started beside it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta

from jobmesh.core.attempts import AttemptRef, Dispatchable
from jobmesh.core.cancels import CancelRouter
from jobmesh.core.dispatch import Dispatcher
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.metrics import CRON_SKIPPED
from jobmesh.core.occurrences import catchup_window_of
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.records import PENDING_RUN_STATES, RunRecord, RunTrigger
from jobmesh.core.shards import shard_of
from jobmesh.v1 import job_pb2
from jobmesh.watcher.timer import Timer

log = logging.getLogger(__name__)

RETRY_DELAY = timedelta(seconds=1)
HOLD_DELAY = timedelta(milliseconds=500)
# A scan that read a run just before its release marked it QUEUED must not hold it again.
RECENT = timedelta(minutes=1)


class Releaser:
    def __init__(
        self,
        store: SchedulerStore,
        dispatcher: Dispatcher,
        cancels: CancelRouter,
        timer: Timer,
        clock: Callable[[], datetime],
        *,
        lead: timedelta,
        batch: int,
        held: Callable[[], frozenset[int]],
    ) -> None:
        """`held`: the shards this watcher holds now; runs of other shards are neither held nor released."""
        self._store = store
        self._dispatcher = dispatcher
        self._cancels = cancels
        self._timer = timer
        self._clock = clock
        self._lead = lead
        self._batch = batch
        self._held = held
        self._recent: set[AttemptRef] = set()
        self._recent_batches: deque[tuple[datetime, list[AttemptRef]]] = deque()
        self._lock = threading.Lock()

    def hold(self, items: Sequence[Dispatchable]) -> int:
        """Puts runs in the timer (each once); returns how many were new."""
        added = 0
        with self._lock:
            recent = set(self._recent)
        held = self._held()
        for item in items:
            ref = AttemptRef.of(item.run)
            if ref not in recent and shard_of(item.run.job_id) in held:
                added += self._timer.add(ref, item, item.run.due_time - self._lead)
        return added

    def release_due(self) -> int:
        """Hands every run whose instant has come to the queue; returns how many went out."""
        now = self._clock()
        held = self._held()
        # A shard lost since its runs were held: the watcher that took it loaded them.
        due = [
            (ref, item) for ref, item in self._timer.pop_due(now, self._batch) if shard_of(ref.job_id) in held
        ]
        if not due:
            return 0
        self._remember([ref for ref, _ in due], now)
        items = [item for _, item in due]
        ready = self._apply_overlap(self._within_catchup(items, now))
        if not self._dispatcher.dispatch(ready):
            retry_at = self._clock() + RETRY_DELAY
            for item in ready:
                self._timer.add(AttemptRef.of(item.run), item, retry_at)
            return 0
        return len(ready)

    def drop(self, shards: Collection[int]) -> int:
        """Lets go of the held runs of these shards (lost to another watcher); returns how many."""
        lost = frozenset(shards)
        return self._timer.drop(lambda item: shard_of(item.run.job_id) in lost)

    def _remember(self, refs: Sequence[AttemptRef], now: datetime) -> None:
        with self._lock:
            while self._recent_batches and self._recent_batches[0][0] < now - RECENT:
                self._recent.difference_update(self._recent_batches.popleft()[1])
            self._recent_batches.append((now, list(refs)))
            self._recent.update(refs)

    def _within_catchup(self, items: list[Dispatchable], now: datetime) -> list[Dispatchable]:
        """Skips the cron occurrences later than their job's catch-up window (kept from going out while the
        queue was away, say), as the materializer skips those it makes too late."""
        kept = []
        for item in items:
            cron = _cron(item)
            window = catchup_window_of(cron) if cron is not None else None
            if window is None or item.run.due_time >= now - window:
                kept.append(item)
                continue
            due = item.run.due_time.isoformat(timespec="seconds")
            try:
                self._skip(
                    item,
                    f"missed: due at {due}, later than the job's catch-up window ({window})",
                    cause="catchup",
                )
            except StoreUnavailable:
                kept.append(item)  # degraded: start it rather than hold it (AP), as below
        return kept

    def _apply_overlap(self, items: list[Dispatchable]) -> list[Dispatchable]:
        policies = {
            id(item): schedule.overlap_policy for item in items if (schedule := _cron(item)) is not None
        }
        bound = [item for item in items if policies.get(id(item), _ALLOW) != _ALLOW]
        if not bound:
            return items
        try:
            active = self._store.active_runs(sorted({item.run.job_id for item in bound}))
        except StoreUnavailable:
            return items  # degraded: start them rather than hold them (AP)
        held_jobs: set[str] = set()
        ready = []
        for item in items:
            others = [run for run in active.get(item.run.job_id, []) if run.run_id != item.run.run_id]
            policy = policies.get(id(item), _ALLOW)
            if policy == _ALLOW or not others:
                ready.append(item)
                continue
            if policy == job_pb2.OVERLAP_POLICY_CANCEL_OTHER:
                self._cancel_others(item, others)
                ready.append(item)
            elif policy in (job_pb2.OVERLAP_POLICY_BUFFER_ALL, job_pb2.OVERLAP_POLICY_BUFFER_ONE):
                if policy == job_pb2.OVERLAP_POLICY_BUFFER_ONE and item.run.job_id in held_jobs:
                    self._skip(item, "an earlier occurrence is already waiting")
                else:
                    held_jobs.add(item.run.job_id)
                    self._hold_back(item)
            elif all(run.state in PENDING_RUN_STATES for run in others):
                # Earlier occurrences that have not started (a backlog, after the queue was away) are not
                # going yet: this one waits until they have started (then it is skipped) or ended.
                self._hold_back(item)
            else:
                going = sum(run.state not in PENDING_RUN_STATES for run in others)
                self._skip(item, f"{going} earlier run(s) still going")
        return ready

    def _hold_back(self, item: Dispatchable) -> None:
        ref = AttemptRef.of(item.run)
        self._timer.add(ref, item, self._clock() + HOLD_DELAY)

    def _skip(self, item: Dispatchable, why: str, *, cause: str = "overlap") -> None:
        """`cause`: the label it is counted under (`jobmesh_cron_occurrences_skipped_total`)."""
        self._store.cancel_run(item.run.job_id, item.run.run_id, reason=f"skipped: {why}", now=self._clock())
        CRON_SKIPPED(cause).inc()

    def _cancel_others(self, item: Dispatchable, others: Sequence[RunRecord]) -> None:
        now = self._clock()
        for other in others:
            run = self._store.cancel_run(
                item.run.job_id, other.run_id, reason="cancelled by a newer occurrence", now=now
            )
            self._cancels.route_run(run, "overlap")


_ALLOW = job_pb2.OVERLAP_POLICY_ALLOW_ALL


def _cron(item: Dispatchable) -> job_pb2.Schedule.Cron | None:
    """The cron schedule a run of the schedule's stands for; None for a run made by hand or by a backfill."""
    schedule = item.job.schedule
    if item.run.trigger is not RunTrigger.SCHEDULE or not schedule.HasField("cron"):
        return None
    return schedule.cron
