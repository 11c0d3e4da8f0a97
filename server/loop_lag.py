"""How late the server's event loop runs what is due on it: the first sign that the process is out of CPU.

Every request, stream message and answer of the process passes through its one event loop; when the loop
runs late, all of them wait, and a create refused only then is refused late too. A probe asks to wake every
`PROBE_INTERVAL` and records how much later it woke; past a limit, creates are refused (`Workers.creating`)
while the loop can still answer quickly.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from datetime import timedelta

PROBE_INTERVAL = 0.05  # seconds
WINDOW = 1.0  # seconds of probes the lag is the peak of
# How long a stall (a lag longer than WINDOW) still counts once probes run on time again: long enough for the
# requests that waited through it to be answered as late, short of the window.
STALL_AFTERMATH = 0.2  # seconds


class LoopLag:
    """Started on the loop it measures; read from any thread (a deque's appends and reads are atomic)."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, float]] = deque(maxlen=round(WINDOW / PROBE_INTERVAL) + 1)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._probe(), name="jobmesh-loop-lag")

    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop measured (once started)."""
        if self._task is None:
            raise RuntimeError("LoopLag.start() was not called")
        return self._task.get_loop()

    def current(self) -> timedelta:
        """The longest lag of the last second's probes, or of the probe overdue now (a loop that runs
        nothing at all is the latest of all). A lag longer than the window itself, a stall, counts only
        while it is the latest probe's or younger than STALL_AFTERMATH: after a pause of the whole process
        (SIGSTOP, a frozen VM) the loop is on time again at its next probes, and creates are not refused for
        the second after it for the pause it has left behind. A loop that keeps stalling keeps its latest
        stall, and is refused."""
        samples = list(self._samples)
        now = time.monotonic()
        latest = len(samples) - 1
        recent = [
            lag
            for index, (at, lag) in enumerate(samples)
            if now - at <= WINDOW and (lag <= WINDOW or index == latest or now - at <= STALL_AFTERMATH)
        ]
        overdue = now - samples[-1][0] - PROBE_INTERVAL if samples else 0.0
        return timedelta(seconds=max([*recent, overdue, 0.0]))

    async def _probe(self) -> None:
        while True:
            asked = time.monotonic()
            await asyncio.sleep(PROBE_INTERVAL)
            woke = time.monotonic()
            self._samples.append((woke, woke - asked - PROBE_INTERVAL))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
