"""The executor streams this server process holds: a queue of outgoing messages per executor, by executor id,
and the cancels pushed over them (from this process, from other replicas through the signal bus, and from
runs the change feed shows `CANCELLING`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Sequence

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.cancels import cancel_notice_of
from jobmesh.core.ports.signals import CancelNotice, SignalBus
from jobmesh.core.ports.store import RunChange
from jobmesh.core.ports.subscription import Subscription
from jobmesh.v1 import executor_control_pb2 as pb

FEED_CANCEL_REASON = "cancelled"


def cancel_message(attempts: Sequence[AttemptRef], reason: str) -> pb.ConnectResponse:
    return pb.ConnectResponse(
        cancels=pb.CancelBatch(attempts=[ref.to_proto() for ref in attempts], reason=reason)
    )


class SessionQueue:
    """Messages for one executor's stream; any thread may put, the stream's task takes."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[pb.ConnectResponse] = asyncio.Queue()

    def put(self, message: pb.ConnectResponse) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, message)

    async def get(self) -> pb.ConnectResponse:
        return await self._queue.get()


class Sessions:
    """Live executor streams of this process, by executor id."""

    def __init__(self, signals: SignalBus) -> None:
        self._signals = signals
        self._lock = threading.Lock()
        self._queues: dict[str, SessionQueue] = {}
        self._subscription: Subscription | None = None

    def start(self) -> None:
        """Cancels that other replicas publish for executors whose streams this process holds are pushed."""
        self._subscription = self._signals.subscribe_cancels(self._deliver)

    def close(self) -> None:
        if self._subscription is not None:
            self._subscription.close()

    def register(self, executor_id: str, queue: SessionQueue) -> None:
        with self._lock:
            self._queues[executor_id] = queue

    def unregister(self, executor_id: str, queue: SessionQueue) -> None:
        with self._lock:
            if self._queues.get(executor_id) is queue:
                del self._queues[executor_id]

    def executor_ids(self) -> list[str]:
        with self._lock:
            return list(self._queues)

    def _deliver(self, notice: CancelNotice) -> None:
        self.push(notice)

    def push_cancelling(self, changes: Iterable[RunChange]) -> None:
        """The cancels of the runs a change left CANCELLING, over the streams this process holds (what
        another replica cancels reaches its executor this way too, with the signal bus down)."""
        for change in changes:
            if (notice := cancel_notice_of(change.run, FEED_CANCEL_REASON)) is not None:
                self.push(notice)

    def push(self, notice: CancelNotice) -> bool:
        """Sends the cancel over the executor's stream; False when this process does not hold it."""
        with self._lock:
            queue = self._queues.get(notice.executor_id)
        if queue is None:
            return False
        queue.put(cancel_message(notice.attempts, notice.reason))
        return True
