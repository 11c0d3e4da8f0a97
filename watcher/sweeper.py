"""Recovering attempts whose executor went silent, and runs whose queue message may be lost.

An attempt past its heartbeat deadline is failed with a reason and retried per its job's policy, unless the
executor kept heartbeating through the signal bus while its stream was down. Its executor's late reports are
then refused (the attempt is fenced). A CANCELLING attempt whose executor vanished ends CANCELLED.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from jobmesh.core.dispatch import Dispatcher, ref_of, retried, send_dead_letters
from jobmesh.core.ports.pipeline_store import AttemptEnd, Dispatchable, Heartbeat, SchedulerStore
from jobmesh.core.ports.queue import RunQueue
from jobmesh.core.ports.signals import AttemptKey, SignalBus, SignalsUnavailable
from jobmesh.core.records import RunState
from jobmesh.core.retries import Outcome, decide
from jobmesh.v1 import job_pb2

log = logging.getLogger(__name__)
BATCH = 1000


class Sweeper:
    def __init__(
        self,
        *,
        store: SchedulerStore,
        queue: RunQueue,
        signals: SignalBus,
        dispatcher: Dispatcher,
        clock: Callable[[], datetime],
        rng: random.Random,
    ) -> None:
        self._store = store
        self._queue = queue
        self._signals = signals
        self._dispatcher = dispatcher
        self._clock = clock
        self._rng = rng

    def sweep_lost(self) -> list[Dispatchable]:
        """Fails attempts past their heartbeat deadline; returns the runs retried (for the timer)."""
        now = self._clock()
        lost = self._still_lost(self._store.lost_attempts(now, limit=BATCH), now)
        if not lost:
            return []
        ends = [self._end(item, now) for item in lost]
        applied = set(self._store.finish_attempts(ends))
        for end in ends:
            if end.ref in applied:
                log.warning("%s attempt %d lost: %s", end.ref.run_name, end.ref.attempt, end.error_message)
        spent = [
            item
            for item, end in zip(lost, ends, strict=True)
            if end.ref in applied and end.run_state is RunState.DEAD_LETTERED
        ]
        send_dead_letters(self._queue, spent, now)
        return retried(ends, applied, {ref_of(item.run): item for item in lost})

    def _still_lost(self, items: Sequence[Dispatchable], now: datetime) -> list[Dispatchable]:
        """Drops attempts that heartbeat through the signal bus (stream down); extends their deadline."""
        if not items:
            return []
        keys = {AttemptKey(f"jobs/{i.run.job_id}/runs/{i.run.run_id}", i.run.attempt): i for i in items}
        try:
            beats = self._signals.heartbeats(list(keys))
        except SignalsUnavailable:
            return list(items)
        lost = []
        for key, item in keys.items():
            beat = beats.get(key)
            if beat is not None and beat + item.run.heartbeat_timeout > now and item.run.executor:
                self._store.heartbeat(
                    item.run.executor, [Heartbeat(ref_of(item.run), beat + item.run.heartbeat_timeout)], now
                )
            else:
                lost.append(item)
        return lost

    def _end(self, item: Dispatchable, now: datetime) -> AttemptEnd:
        run = item.run
        silent = run.last_heartbeat_time.isoformat() if run.last_heartbeat_time else "its start"
        if run.state is RunState.CANCELLING:
            outcome = Outcome(
                RunState.CANCELLED, now, run.start_time, None, "Cancelled", run.error_message or "cancelled"
            )
        else:
            message = f"no heartbeat from executor {run.executor} since {silent}"
            outcome = Outcome(RunState.FAILED, now, run.start_time, None, "HeartbeatLost", message)
        policy = job_pb2.Job.FromString(item.spec).retry_policy
        return decide(ref_of(run), outcome, policy, rng=self._rng, executor=None)

    def requeue_stale(self, after: timedelta) -> int:
        """Sends again the QUEUED runs nobody claimed for `after` (a wiped queue loses no run)."""
        stale = self._store.stale_queued(self._clock() - after, limit=BATCH)
        if stale and self._dispatcher.dispatch(stale):
            log.warning("sent %d unclaimed runs again", len(stale))
            return len(stale)
        return 0
