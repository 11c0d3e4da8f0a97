"""Recovering attempts whose executor went silent, and runs whose queue message may be lost.

An attempt past its heartbeat deadline is ended as `HeartbeatLost` through the attempt lifecycle (retried per
its job's policy; a `CANCELLING` one ends `CANCELLED`), unless its executor is still known alive: a server
renewed its stream's session within the heartbeat timeout, or it heartbeat through the signal bus while its
stream was down. Its executor's late reports are then refused: the attempt is fenced.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from jobmesh.core.attempts import AttemptOutcome, AttemptRef, Dispatchable
from jobmesh.core.dispatch import Dispatcher
from jobmesh.core.error_types import ErrorType
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.lifecycle import AttemptLifecycle, EndReport
from jobmesh.core.metrics import HEARTBEATS_LOST, RUNS_REQUEUED
from jobmesh.core.ports.pipeline_store import Heartbeat, SchedulerStore
from jobmesh.core.ports.signals import SignalBus, SignalsUnavailable
from jobmesh.core.records import RunRecord, RunState

log = logging.getLogger(__name__)
SWEEP_BATCH = 1000


class Sweeper:
    def __init__(
        self,
        *,
        store: SchedulerStore,
        lifecycle: AttemptLifecycle,
        signals: SignalBus,
        dispatcher: Dispatcher,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._lifecycle = lifecycle
        self._signals = signals
        self._dispatcher = dispatcher
        self._clock = clock
        self._reachable_since: datetime | None = None  # the start of the sweeps' unbroken success

    def sweep_lost(self) -> list[Dispatchable]:
        """Ends attempts past their heartbeat deadline; returns the runs retried (for the timer)."""
        now = self._clock()
        try:
            found = self._judgeable(self._store.lost_attempts(now, limit=SWEEP_BATCH), now)
            lost = self._still_lost(found, now)
            if not lost:
                return []
            outcome = functools.partial(_heartbeat_lost, now)
            settled = self._lifecycle.end(
                [EndReport(AttemptRef.of(item.run), outcome, None) for item in lost]
            )
        except StoreUnavailable:
            self._reachable_since = None
            raise
        for item in lost:
            if (ref := AttemptRef.of(item.run)) in settled.applied:
                HEARTBEATS_LOST.inc()
                log.warning("%s lost: %s", ref, _silence(item.run))
        return list(settled.retried)

    def forget_reachability(self) -> None:
        """Whether the database was reachable before now is unknown (a watcher that just took the lead did
        not sweep): the next sweeps judge as after an outage."""
        self._reachable_since = None

    def _judgeable(self, items: Sequence[Dispatchable], now: datetime) -> list[Dispatchable]:
        """The attempts whose whole heartbeat timeout the database could record. While it was away, the
        heartbeats and session renewals of live executors were not written, and their attempts (those that
        finished too, their results waiting) look silent: they are judged only once the database has been
        reachable for a heartbeat timeout, time for the executors to beat and the results to land."""
        if self._reachable_since is None:
            self._reachable_since = now
        return [item for item in items if now - self._reachable_since >= item.run.heartbeat_timeout]

    def _still_lost(self, items: Sequence[Dispatchable], now: datetime) -> list[Dispatchable]:
        """Drops the attempts still known alive, and moves their deadline on: those of an executor whose
        stream a server renewed within the heartbeat timeout, and those that heartbeat through the signal bus
        (stream down)."""
        if not items:
            return []
        by_ref = {AttemptRef.of(item.run): item for item in items}
        renewed = self._store.session_renewals([item.run.executor for item in items if item.run.executor])
        try:
            beats = self._signals.heartbeats(list(by_ref))
        except SignalsUnavailable:
            beats = {}
        lost = []
        alive: dict[str, list[Heartbeat]] = {}
        for ref, item in by_ref.items():
            run = item.run
            signs = [moment for moment in (renewed.get(run.executor or ""), beats.get(ref)) if moment]
            latest = max(signs, default=None)
            if latest is not None and latest + run.heartbeat_timeout > now and run.executor:
                alive.setdefault(run.executor, []).append(Heartbeat(ref, latest + run.heartbeat_timeout))
            else:
                lost.append(item)
        for executor, heartbeats in alive.items():
            self._store.heartbeat(executor, heartbeats, now)
        return lost

    def requeue_stale(self, after: timedelta) -> int:
        """Sends again the QUEUED runs nobody claimed for `after` (a wiped queue loses no run)."""
        return self.requeue_queued_before(self._clock() - after)

    def requeue_queued_before(self, moment: datetime) -> int:
        """Sends again (up to a batch of) the QUEUED runs dispatched before `moment` that nobody claimed."""
        stale = self._store.stale_queued(moment, limit=SWEEP_BATCH)
        if stale and self._dispatcher.dispatch(stale):
            RUNS_REQUEUED.inc(len(stale))
            log.warning("sent %d unclaimed runs again", len(stale))
            return len(stale)
        return 0


def _heartbeat_lost(now: datetime, run: RunRecord) -> AttemptOutcome | None:
    """HeartbeatLost, unless a heartbeat moved the deadline on since the sweep read the run. The attempt
    ends when its executor was last heard (its last heartbeat, else its start), not when the sweep noticed."""
    if run.heartbeat_deadline is not None and run.heartbeat_deadline > now:
        return None
    heard = [moment for moment in (run.start_time, run.last_heartbeat_time) if moment is not None]
    ended = min(max(heard, default=now), now)
    return AttemptOutcome(
        RunState.FAILED, ended, run.start_time, None, ErrorType.HEARTBEAT_LOST, _silence(run)
    )


def _silence(run: RunRecord) -> str:
    silent = run.last_heartbeat_time.isoformat() if run.last_heartbeat_time else "its start"
    return f"no heartbeat from executor {run.executor} since {silent}"
