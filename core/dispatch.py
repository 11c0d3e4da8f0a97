"""Handing due runs to the queue: the message an executor needs, then QUEUED in the database.

The database is written first (the run exists SCHEDULED); the queue second; QUEUED last. A publish that fails
leaves the run SCHEDULED for the watcher, and a crash between publish and QUEUED only means a second message,
which the claim refuses. Nothing is lost either way (invariants 1 and 4).
"""

from __future__ import annotations

import dataclasses
import logging
import queue as queue_module
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from jobmesh.core.ports.pipeline_store import AttemptEnd, AttemptRef, Dispatchable, PipelineStore
from jobmesh.core.ports.queue import QueueUnavailable, RunQueue
from jobmesh.core.records import Priority, RunRecord, RunState
from jobmesh.core.timestamps import to_duration, to_timestamp
from jobmesh.server.api.resources import run_name
from jobmesh.v1 import dispatch_pb2, executor_control_pb2, job_pb2

log = logging.getLogger(__name__)

_PRIORITIES = {
    Priority.HIGH: job_pb2.PRIORITY_HIGH,
    Priority.NORMAL: job_pb2.PRIORITY_NORMAL,
    Priority.LOW: job_pb2.PRIORITY_LOW,
}


def ref_of(run: RunRecord) -> AttemptRef:
    return AttemptRef(run.job_id, run.run_id, run.attempt)


def message_of(item: Dispatchable, now: datetime) -> dispatch_pb2.DispatchedRun:
    job = job_pb2.Job.FromString(item.spec)
    run = item.run
    message = dispatch_pb2.DispatchedRun(
        attempt=executor_control_pb2.AttemptRef(run=run_name(run.job_id, run.run_id), attempt=run.attempt),
        target=job.target,
        priority=_PRIORITIES[run.priority],
        queue=run.queue,
    )
    message.due_time.CopyFrom(to_timestamp(run.due_time))
    message.dispatch_time.CopyFrom(to_timestamp(now))
    if job.HasField("execution_timeout"):
        message.execution_timeout.CopyFrom(job.execution_timeout)
    message.heartbeat_timeout.CopyFrom(to_duration(run.heartbeat_timeout))
    return message


class Dispatcher:
    def __init__(self, store: PipelineStore, queue: RunQueue, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock

    def dispatch(self, items: Sequence[Dispatchable]) -> bool:
        """Publishes the runs and marks them QUEUED. False when the queue is down (they stay SCHEDULED)."""
        if not items:
            return True
        now = self._clock()
        try:
            self._queue.publish([message_of(item, now) for item in items])
        except QueueUnavailable as error:
            log.warning("queue unavailable, %d runs left for the watcher: %s", len(items), error)
            return False
        self._store.mark_queued([ref_of(item.run) for item in items], now)
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


class BackgroundDispatcher:
    """The server's immediate bypass, off the request path: creates return once the database has the runs,
    and one thread publishes whatever accumulated meanwhile in one batch (a group commit for the queue).

    A batch the queue refuses is dropped: its runs are SCHEDULED in the database and the watcher sends them.
    """

    def __init__(self, dispatcher: Dispatcher, max_batch: int = 5000) -> None:
        self._dispatcher = dispatcher
        self._max_batch = max_batch
        self._pending: queue_module.SimpleQueue[Dispatchable | None] = queue_module.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="jobmesh-dispatch", daemon=True)
        self._thread.start()

    def dispatch(self, items: Sequence[Dispatchable]) -> bool:
        for item in items:
            self._pending.put(item)
        return True

    def close(self, timeout: float = 10.0) -> None:
        self._pending.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            first = self._pending.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self._max_batch:
                try:
                    item = self._pending.get_nowait()
                except queue_module.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            try:
                self._dispatcher.dispatch(batch)
            except Exception:  # the watcher covers these runs; the thread must live on
                log.exception("immediate dispatch of %d runs failed; the watcher will send them", len(batch))
            if stop:
                return


def retried(
    ends: Sequence[AttemptEnd], applied: set[AttemptRef], current: Mapping[AttemptRef, Dispatchable]
) -> list[Dispatchable]:
    """The runs that applied ends scheduled for another attempt, as they are now (for the timer or queue)."""
    out = []
    for end in ends:
        if end.ref in applied and end.run_state is RunState.SCHEDULED and end.retry_due_time is not None:
            item = current[end.ref]
            run = dataclasses.replace(
                item.run, attempt=end.ref.attempt + 1, state=RunState.SCHEDULED, due_time=end.retry_due_time
            )
            out.append(Dispatchable(run, item.spec))
    return out
