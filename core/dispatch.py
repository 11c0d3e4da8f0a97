"""Handing due runs to the queue: the message an executor needs, then QUEUED in the database.

The database is written first (the run exists SCHEDULED); the queue second; QUEUED last. A publish that fails
leaves the run SCHEDULED for the watcher, and a crash between publish and QUEUED only means a second message,
which the claim refuses. Nothing is lost either way (invariants 1 and 4).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.attempts import AttemptRef, Dispatchable
from jobmesh.core.hooks import NO_HOOKS, RunHooks
from jobmesh.core.metrics import RUNS_DISPATCHED
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.ports.pipeline_store import PipelineStore
from jobmesh.core.ports.queue import QueueUnavailable, RunQueue
from jobmesh.core.timestamps import set_timestamp, to_duration
from jobmesh.core.wire_enums import PRIORITY_TO_WIRE

log = logging.getLogger(__name__)


def message_of(item: Dispatchable, now: datetime) -> dispatch_pb2.DispatchedRun:
    job = item.job
    run = item.run
    message = dispatch_pb2.DispatchedRun(
        attempt=AttemptRef.of(run).to_proto(),
        target=job.target,
        priority=PRIORITY_TO_WIRE[run.priority],
        queue=run.queue,
        namespace=run.namespace,
    )
    set_timestamp(message.due_time, run.due_time)
    set_timestamp(message.dispatch_time, now)
    if job.HasField("execution_timeout"):
        message.execution_timeout.CopyFrom(job.execution_timeout)
    message.heartbeat_timeout.CopyFrom(to_duration(run.heartbeat_timeout))
    return message


class Dispatcher:
    def __init__(
        self,
        store: PipelineStore,
        queue: RunQueue,
        clock: Callable[[], datetime],
        hooks: RunHooks = NO_HOOKS,
    ) -> None:
        self._store = store
        self._hooks = hooks
        self._queue = queue
        self._clock = clock
        self._publishing = OutageLog(log, "publishing runs to the queue")

    def dispatch(self, items: Sequence[Dispatchable]) -> bool:
        """Publishes the runs and marks them QUEUED. False when the queue is down (they stay SCHEDULED)."""
        if not items:
            return True
        now = self._clock()
        messages = [message_of(item, now) for item in items]
        self._hooks.dispatch(messages)
        try:
            self._queue.publish(messages)
        except QueueUnavailable as error:
            self._publishing.failed(f"{len(items)} runs left for the watcher: {error}")
            return False
        self._publishing.succeeded()
        RUNS_DISPATCHED.inc(len(items))
        self._store.mark_queued([AttemptRef.of(item.run) for item in items], now)
        return True


def send_dead_letters(queue: RunQueue, items: Sequence[Dispatchable], now: datetime) -> None:
    """Copies runs whose retries are spent to the dead-letter topic. The database already has them as
    DEAD_LETTERED; the topic is a copy for whoever consumes dead letters, so a queue outage only logs."""
    if not items:
        return
    try:
        queue.publish_dead_letters([message_of(item, now) for item in items])
    except QueueUnavailable as error:
        log.warning("dead-letter topic unavailable for %d runs: %s", len(items), error)


class Handoff(Protocol):
    """What hands runs to the queue: a `Dispatcher`, or the server's batching bypass in front of one."""

    def dispatch(self, items: Sequence[Dispatchable]) -> bool: ...


def due_within(items: Sequence[Dispatchable], now: datetime, threshold: timedelta) -> list[Dispatchable]:
    """The runs to hand to the queue at once, off the watcher: those due within `threshold` of `now` (a
    create's, a retry's). The watcher sends the others when their window comes."""
    horizon = now + threshold
    return [item for item in items if item.run.due_time <= horizon]
