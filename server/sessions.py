"""The executor streams this server process holds, and cancel routing to them.

A cancel is persisted first (by the caller). Then it is pushed over the stream of the executor that holds the
run when this process holds it; otherwise published on the signal bus so that the replica holding it pushes
it; and always left as a cancel key with a TTL that an executor whose stream is down polls. Heartbeat answers
re-send the cancel of any held attempt still CANCELLING, so a cancel survives the loss of every channel but
the database (invariant 6).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from datetime import timedelta

from jobmesh.core.ports.signals import AttemptKey, CancelNotice, SignalBus, SignalsUnavailable, Subscription
from jobmesh.v1 import executor_control_pb2 as pb

log = logging.getLogger(__name__)

CANCEL_KEY_TTL = timedelta(minutes=10)


def cancel_message(attempts: Sequence[AttemptKey], reason: str) -> pb.ConnectResponse:
    return pb.ConnectResponse(
        cancels=pb.CancelBatch(
            attempts=[pb.AttemptRef(run=key.run, attempt=key.attempt) for key in attempts], reason=reason
        )
    )


class Outbox:
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
        self._outboxes: dict[str, Outbox] = {}
        self._subscription: Subscription | None = None

    def start(self) -> None:
        self._subscription = self._signals.subscribe_cancels(self._deliver_notice)

    def close(self) -> None:
        if self._subscription is not None:
            self._subscription.close()

    def register(self, executor_id: str, outbox: Outbox) -> None:
        with self._lock:
            self._outboxes[executor_id] = outbox

    def unregister(self, executor_id: str, outbox: Outbox) -> None:
        with self._lock:
            if self._outboxes.get(executor_id) is outbox:
                del self._outboxes[executor_id]

    def _push(self, notice: CancelNotice) -> bool:
        with self._lock:
            outbox = self._outboxes.get(notice.executor_id)
        if outbox is None:
            return False
        outbox.put(cancel_message(notice.attempts, notice.reason))
        return True

    def _deliver_notice(self, notice: CancelNotice) -> None:
        self._push(notice)

    def route_cancel(self, notice: CancelNotice) -> None:
        """Pushes a persisted cancel towards its executor by every channel there is: its stream first (here,
        or through the bus to the replica holding it), then a cancel key for an executor whose stream is down.
        """
        if not self._push(notice):
            try:
                self._signals.publish_cancel(notice)
            except SignalsUnavailable as error:
                log.warning("cancel not published (heartbeat answers will carry it): %s", error)
        try:
            self._signals.set_cancel_keys(notice.attempts, CANCEL_KEY_TTL)
        except SignalsUnavailable as error:
            log.warning("cancel keys not set (the stream and heartbeats carry it): %s", error)
