"""The executor streams this server process holds: a queue of outgoing messages per executor, by executor id,
and the cancels pushed over them (from this process, from other replicas through the signal bus, and from
runs the change feed shows `CANCELLING`).

A cancel goes over a stream once, whichever of those routes brings it first, and again only while its
executor has not acknowledged it (`HeartbeatBatch.cancels_received`) a resend interval after it was sent
(`CancelsSent`).

One stream per executor name: a second connection under the name of a live stream is refused
`ALREADY_EXISTS` (reason `EXECUTOR_NAME_IN_USE`). A stream counts as live while its executor has sent anything
within the quiet limit (three heartbeat intervals: an executor heartbeats every interval, idle or not). After
that it is taken for a connection that dropped without the server noticing, and a new connection under its
name ends it and takes its place: a reconnecting executor is locked out for at most that long. Across server
processes (workers, replicas) the name is held in the database the same way
(`server/executors/session_renewals.py`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.cancels import cancel_notice_of
from jobmesh.core.errors import AlreadyExists
from jobmesh.core.ports.signals import CancelNotice, SignalBus
from jobmesh.core.ports.store import RunChange
from jobmesh.core.ports.subscription import Subscription

FEED_CANCEL_REASON = "cancelled"
EXECUTOR_NAME_IN_USE = "EXECUTOR_NAME_IN_USE"
# Heartbeat intervals without a message after which a stream no longer holds its executor's name (see above).
QUIET_INTERVALS = 3
DEFAULT_QUIET_LIMIT = 9.0  # seconds: QUIET_INTERVALS of the default heartbeat interval
DEFAULT_RESEND = 3.0  # seconds: a cancel unacknowledged for a heartbeat interval (the default) is sent again


def quiet_limit_of(heartbeat_interval: timedelta) -> timedelta:
    return QUIET_INTERVALS * heartbeat_interval


class ExecutorNameInUse(AlreadyExists):
    """A live stream holds the executor name that a new connection asks for."""

    reason = EXECUTOR_NAME_IN_USE

    def __init__(self, executor_id: str) -> None:
        super().__init__(
            f"an executor named {executor_id!r} is connected: one stream per executor name",
            metadata={"executor": executor_id},
        )


def cancel_message(attempts: Sequence[AttemptRef], reason: str) -> pb.ConnectResponse:
    return pb.ConnectResponse(
        cancels=pb.CancelBatch(attempts=[ref.to_proto() for ref in attempts], reason=reason)
    )


class CancelsSent:
    """The cancels sent over one stream, until the attempts leave it: each goes once, and again only when
    its executor has not acknowledged it `resend_after` seconds after it was sent. Any thread may call."""

    _ACKNOWLEDGED = -1.0

    def __init__(self, resend_after: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._resend_after = resend_after
        self._clock = clock
        self._lock = threading.Lock()
        self._sent: dict[AttemptRef, float] = {}  # when last sent, or _ACKNOWLEDGED

    def unsent(self, attempts: Iterable[AttemptRef]) -> list[AttemptRef]:
        """The attempts never sent a cancel over this stream, now taken as sent."""
        return self._take(attempts, resending=False)

    def due(self, attempts: Iterable[AttemptRef]) -> list[AttemptRef]:
        """The attempts never sent a cancel, or sent one that went unacknowledged for the resend interval;
        now taken as sent."""
        return self._take(attempts, resending=True)

    def acknowledged(self, attempts: Iterable[AttemptRef]) -> None:
        with self._lock:
            for ref in attempts:
                if ref in self._sent:
                    self._sent[ref] = self._ACKNOWLEDGED

    def keep_only(self, held: Iterable[AttemptRef]) -> None:
        """Forgets the attempts the stream no longer holds (ended or fenced). A cancel sent within the resend
        interval is kept: it may be of a grant the heartbeat batch was sent too early to name."""
        kept = set(held)
        now = self._clock()
        with self._lock:
            for ref, sent in list(self._sent.items()):
                if ref not in kept and (sent == self._ACKNOWLEDGED or now - sent >= self._resend_after):
                    del self._sent[ref]

    def _take(self, attempts: Iterable[AttemptRef], *, resending: bool) -> list[AttemptRef]:
        now = self._clock()
        taken = []
        with self._lock:
            for ref in attempts:
                sent = self._sent.get(ref)
                unacknowledged = sent is not None and sent != self._ACKNOWLEDGED
                if sent is None or (resending and unacknowledged and now - sent >= self._resend_after):
                    self._sent[ref] = now
                    taken.append(ref)
        return taken


class SessionQueue:
    """Messages for one executor's stream; any thread may put, the stream's task takes."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, *, resend_cancels_after: float = DEFAULT_RESEND
    ) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[pb.ConnectResponse | None] = asyncio.Queue()
        self._heard = time.monotonic()
        self.holds_name = False  # in the store too, across server processes (`Sessions.hold`)
        self.cancels = CancelsSent(resend_cancels_after)

    def put(self, message: pb.ConnectResponse) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, message)

    def end(self) -> None:
        """Ends the stream: its writer gets None, after the messages already put."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, None)

    async def get(self) -> pb.ConnectResponse | None:
        return await self._queue.get()

    def heard(self) -> None:
        """The executor sent something: its stream is live."""
        self._heard = time.monotonic()

    def quiet_for(self) -> float:
        return time.monotonic() - self._heard


class Sessions:
    """Live executor streams of this process, by executor id."""

    def __init__(self, signals: SignalBus) -> None:
        self._signals = signals
        self._lock = threading.Lock()
        self._queues: dict[str, SessionQueue] = {}
        self._quiet_limits: dict[str, float] = {}
        self._subscription: Subscription | None = None

    def start(self) -> None:
        """Cancels that other replicas publish for executors whose streams this process holds are pushed."""
        self._subscription = self._signals.subscribe_cancels(self._deliver)

    def close(self) -> None:
        if self._subscription is not None:
            self._subscription.close()

    def register(
        self, executor_id: str, queue: SessionQueue, *, quiet_limit: float = DEFAULT_QUIET_LIMIT
    ) -> None:
        """Makes `queue` the stream of `executor_id`. ExecutorNameInUse (ALREADY_EXISTS) while another live
        stream holds the name; one quiet for longer than `quiet_limit` is ended and replaced."""
        with self._lock:
            held = self._queues.get(executor_id)
            if held is not None and held.quiet_for() < quiet_limit:
                raise ExecutorNameInUse(executor_id)
            self._queues[executor_id] = queue
            self._quiet_limits[executor_id] = quiet_limit
        if held is not None:
            held.end()

    def hold(self, queue: SessionQueue) -> None:
        """`queue`'s stream took its name's session in the store (`SessionRenewals.take`): renewals keep it
        from now on. A renewal that read the streams before then judges the store as it was before the take,
        and must neither renew nor end it."""
        with self._lock:
            queue.holds_name = True

    def unregister(self, executor_id: str, queue: SessionQueue) -> bool:
        """False when `queue` no longer held the name (a newer connection took it)."""
        with self._lock:
            if self._queues.get(executor_id) is not queue:
                return False
            del self._queues[executor_id]
            del self._quiet_limits[executor_id]
            return True

    def executor_ids(self) -> list[str]:
        with self._lock:
            return list(self._queues)

    def held_streams(self) -> dict[str, SessionQueue]:
        """The streams whose names this process holds in the store, by executor id."""
        with self._lock:
            return {executor_id: queue for executor_id, queue in self._queues.items() if queue.holds_name}

    def live_executor_ids(self) -> list[str]:
        """The executors whose streams were heard from within their quiet limit."""
        with self._lock:
            return [
                executor_id
                for executor_id, queue in self._queues.items()
                if queue.quiet_for() < self._quiet_limits[executor_id]
            ]

    def end(self, queues: Iterable[SessionQueue]) -> None:
        """Ends these streams (their own cleanup unregisters them); a newer one of the same name lives on."""
        for queue in queues:
            queue.end()

    def _deliver(self, notice: CancelNotice) -> None:
        self.push(notice)

    def push_cancelling(self, changes: Iterable[RunChange]) -> None:
        """The cancels of the runs a change left CANCELLING, over the streams this process holds (what
        another replica cancels reaches its executor this way too, with the signal bus down)."""
        for change in changes:
            if (notice := cancel_notice_of(change.run, FEED_CANCEL_REASON)) is not None:
                self.push(notice)

    def push(self, notice: CancelNotice) -> bool:
        """Sends the cancel over the executor's stream, unless it went there already; False when this process
        does not hold that stream."""
        with self._lock:
            queue = self._queues.get(notice.executor_id)
        if queue is None:
            return False
        if unsent := queue.cancels.unsent(notice.attempts):
            queue.put(cancel_message(unsent, notice.reason))
        return True
