"""The server's gauges, sampled every SAMPLE_INTERVAL from what it measures already: executors connected
(its sessions), its event loop's lag and its claims' lag (the overload guard's own measures) and the jobs in
creation. One task per server process; a worker of `jobmesh server --workers N` writes its own values, which
the scrape combines (`core.metrics`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from jobmesh.core.metrics import CLAIM_LAG, EXECUTORS_CONNECTED, LOOP_LAG, PENDING_CREATES
from jobmesh.server.loop_lag import LoopLag
from jobmesh.server.stream_lag import StreamLag

SAMPLE_INTERVAL = 1.0  # seconds


class ServerGauges:
    def __init__(
        self,
        *,
        executors: Callable[[], int],
        loop_lag: LoopLag,
        stream_lag: StreamLag,
        pending_creates: Callable[[], int],
    ) -> None:
        self._executors = executors
        self._loop_lag = loop_lag
        self._stream_lag = stream_lag
        self._pending_creates = pending_creates
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        EXECUTORS_CONNECTED.set(self._executors())
        LOOP_LAG.set(self._loop_lag.current().total_seconds())
        CLAIM_LAG.set(self._stream_lag.current().total_seconds())
        PENDING_CREATES.set(self._pending_creates())

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="jobmesh-gauges")

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(SAMPLE_INTERVAL)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        EXECUTORS_CONNECTED.set(0)
