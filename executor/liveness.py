"""Keeping held attempts alive and cancellable: heartbeats over the stream while it is up; while it is down,
heartbeats written to the signal bus and the bus polled for cancel keys (docs/design.md, "Flows"), so that
a cancel still stops an attempt within about a second. A bus that is down too is logged and tolerated for a
while; an attempt that nothing has kept alive for nearly its heartbeat timeout is killed, because the server
may declare it lost and retry it elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.signals import SignalBus, SignalsUnavailable
from jobmesh.executor.attempts import Attempts
from jobmesh.executor.clock import within
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.outbox import Outbox
from jobmesh.executor.stream import ControlStream, StreamDown

log = logging.getLogger(__name__)

T = TypeVar("T")


CONTACT_CHECK = 0.25  # seconds between looks for attempts out of contact


class HeartbeatLedger:
    """When the heartbeat batches the server has not answered yet were sent (monotonic), oldest first. The
    server answers each batch that names attempts once; an answer is taken to be the oldest batch's, which
    is never later than the one it really answers, so an attempt is never thought alive for longer than it is.
    """

    def __init__(self) -> None:
        self._sent: deque[float] = deque()

    def sent(self, at: float) -> None:
        self._sent.append(at)

    def answered(self) -> float | None:
        return self._sent.popleft() if self._sent else None

    def forget(self) -> None:
        """The stream the batches went out on is gone: their answers will never come."""
        self._sent.clear()


async def heartbeat_over_stream(
    stream: ControlStream, attempts: Attempts, outbox: Outbox, ledger: HeartbeatLedger
) -> None:
    """One message naming every attempt held (even none: an empty one still says the executor is alive) at
    once on connecting, then every heartbeat interval (the server's, from its welcome, or shorter for an
    attempt with a short timeout, looked at as soon as it is held). An attempt whose result the server has
    not acknowledged yet is still held: under load a result may wait longer than the heartbeat timeout, and
    the attempt must not be declared lost meanwhile."""
    sent_at = -math.inf
    while True:
        await stream.wait_connected()
        if time.monotonic() - sent_at >= _interval(stream, attempts):
            with contextlib.suppress(StreamDown):
                refs = [key.to_proto() for key in dict.fromkeys([*attempts, *outbox.awaiting_ack()])]
                sent_at = time.monotonic()
                received = stream.take_cancels_received()
                batch = pb.HeartbeatBatch(attempts=refs, cancels_received=received)
                stream.send(pb.ConnectRequest(heartbeats=batch))
                if refs:
                    ledger.sent(sent_at)
        if await within(stream.wait_disconnected(), CONTACT_CHECK):
            sent_at = -math.inf  # a reconnect beats at once


def _interval(stream: ControlStream, attempts: Attempts) -> float:
    """The server's heartbeat interval, shorter when an attempt's heartbeat timeout is short: a few answers
    must fit in its timeout less the margin (`Attempts.stop_out_of_contact`)."""
    shortest = attempts.shortest_heartbeat_timeout()
    return stream.heartbeat_interval if shortest is None else min(stream.heartbeat_interval, shortest / 4)


async def stop_attempts_out_of_contact(attempts: Attempts) -> None:
    """Kills, for the executor's life, the attempts that neither the server nor the signal bus has kept alive
    for nearly their heartbeat timeout (docs/design.md, "At least once")."""
    while True:
        attempts.stop_out_of_contact(time.monotonic())
        await asyncio.sleep(CONTACT_CHECK)


class Fallback:
    """Runs for the executor's life; active only while the stream is down."""

    def __init__(
        self,
        config: ExecutorConfig,
        bus: SignalBus,
        stream: ControlStream,
        attempts: Attempts,
        outbox: Outbox,
    ) -> None:
        self._config = config
        self._bus = bus
        self._stream = stream
        self._attempts = attempts
        self._outbox = outbox
        self._bus_down = False

    async def run(self) -> None:
        while True:
            await self._stream.wait_disconnected()
            await self._while_down()
            await self._stream.wait_connected()

    async def _while_down(self) -> None:
        next_heartbeat = 0.0
        while not self._stream.connected:
            keys = self._attempts.keys()
            # An attempt whose result waits for its acknowledgement is kept alive too: the sweeper would
            # otherwise end it lost, and retry work that succeeded.
            running = set(keys)
            finished = [key for key in self._outbox.awaiting_ack() if key not in running]
            if (keys or finished) and time.monotonic() >= next_heartbeat:
                next_heartbeat = time.monotonic() + self._stream.heartbeat_interval
                await self._put_heartbeats(keys, finished)
            if keys:
                for key in await self._cancelled(keys):
                    if self._attempts.holds(key):
                        self._attempts.cancel(key, "cancelled (found on the signal bus)")
            await within(self._stream.wait_connected(), self._config.fallback_poll_interval.total_seconds())

    async def _put_heartbeats(self, keys: list[AttemptRef], finished: list[AttemptRef]) -> None:
        """Leaves the attempts' heartbeats on the bus, where the sweeper looks before it declares one lost:
        those running (`keys`), and those `finished` whose result the server has not acknowledged."""
        ttl = self._config.fallback_heartbeat_ttl
        at, sent_at = datetime.now(UTC), time.monotonic()

        def put() -> bool:
            self._bus.put_heartbeats(self._config.executor_id, [*keys, *finished], at, ttl)
            return True

        if await self._call(put):
            self._attempts.kept_alive(keys, sent_at)

    async def _cancelled(self, keys: list[AttemptRef]) -> set[AttemptRef]:
        return await self._call(self._bus.cancelled, keys) or set()

    async def _call(self, function: Callable[..., T], *args: object) -> T | None:
        """Calls the bus on a thread (Redis blocks); a bus that is down is logged once per outage."""
        try:
            result = await asyncio.to_thread(function, *args)
        except SignalsUnavailable as exc:
            if not self._bus_down:
                log.warning("signal bus unavailable while the stream is down too: %s", exc)
            self._bus_down = True
            return None
        except Exception:
            log.exception("signal bus call failed")
            return None
        if self._bus_down:
            log.info("signal bus reachable again")
        self._bus_down = False
        return result
