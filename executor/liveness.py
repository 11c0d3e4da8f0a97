"""Keeping held attempts alive and cancellable: heartbeats over the stream while it is up; while it is down,
heartbeats written to the signal bus and the bus polled for cancel keys (docs/design.md, "Flows"), so that
a cancel still stops an attempt within about a second. A bus that is down too is logged and tolerated: the
attempts keep running, and the server's sweeper decides their fate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.signals import SignalBus, SignalsUnavailable
from jobmesh.executor.attempts import Attempts
from jobmesh.executor.clock import within
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.outbox import Outbox
from jobmesh.executor.stream import ControlStream, StreamDown
from jobmesh.v1 import executor_control_pb2 as pb

log = logging.getLogger(__name__)

T = TypeVar("T")


async def heartbeat_over_stream(stream: ControlStream, attempts: Attempts, outbox: Outbox) -> None:
    """One message naming every attempt held (even none: an empty one still says the executor is alive) at
    once on connecting, then every heartbeat interval (the server's, from its welcome). An attempt whose
    result the server has not acknowledged yet is still held: under load a result may wait longer than the
    heartbeat timeout, and the attempt must not be declared lost meanwhile."""
    while True:
        await stream.wait_connected()
        with contextlib.suppress(StreamDown):
            refs = [key.to_proto() for key in dict.fromkeys([*attempts, *outbox.awaiting_ack()])]
            stream.send(pb.ConnectRequest(heartbeats=pb.HeartbeatBatch(attempts=refs)))
        await within(stream.wait_disconnected(), stream.heartbeat_interval)  # a reconnect beats at once


class Fallback:
    """Runs for the executor's life; active only while the stream is down."""

    def __init__(
        self, config: ExecutorConfig, bus: SignalBus, stream: ControlStream, attempts: Attempts
    ) -> None:
        self._config = config
        self._bus = bus
        self._stream = stream
        self._attempts = attempts
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
            if keys:
                if time.monotonic() >= next_heartbeat:
                    next_heartbeat = time.monotonic() + self._stream.heartbeat_interval
                    await self._put_heartbeats(keys)
                for key in await self._cancelled(keys):
                    if self._attempts.holds(key):
                        self._attempts.cancel(key, "cancelled (found on the signal bus)")
            await within(self._stream.wait_connected(), self._config.fallback_poll_interval.total_seconds())

    async def _put_heartbeats(self, keys: list[AttemptRef]) -> None:
        ttl = self._config.fallback_heartbeat_ttl
        at = datetime.now(UTC)
        await self._call(self._bus.put_heartbeats, self._config.executor_id, keys, at, ttl)

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
