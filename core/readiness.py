"""Whether a process can do its work now, and whether it is alive at all.

Readiness is the state of the dependencies a process reaches (the store, the queue, the signal bus, an
executor's stream, a watcher's scans): each is reported up or down, with why. The process is ready when every
dependency it expects is up; one not reported yet counts as down. Liveness is a beat of the process's event
loop: a loop that has not beaten for a while is stuck, and the process should be restarted.

The server serves readiness as gRPC health; every process serves both over HTTP (`/livez`, `/readyz`,
`processes/health_endpoint.py`). A dependency logs one line when it goes away and one when it returns, never
one per failed retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

log = logging.getLogger(__name__)
NOT_CHECKED = "not checked yet"
PROBE_INTERVAL = timedelta(seconds=1)
# Longer than a reachable dependency takes to answer on a loaded host; shorter than the 5 s in which an
# operator's probe should see a dependency go.
PROBE_TIMEOUT = timedelta(seconds=2)
# A loop that has not beaten for this long is stuck (a beat is due every PROBE_INTERVAL).
LIVE_WITHIN = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class DependencyState:
    name: str
    up: bool
    detail: str
    since: float  # time.time() of the last change


class Readiness:
    """The dependencies of one process, reported from any thread."""

    def __init__(self, process: str, expected: tuple[str, ...] = ()) -> None:
        self.process = process
        self._lock = threading.Lock()
        now = time.time()
        self._states = {name: DependencyState(name, False, NOT_CHECKED, now) for name in expected}
        self._listeners: list[Callable[[bool], None]] = []
        self._beat = time.monotonic()

    def expect(self, name: str) -> None:
        """`name` counts from now on, down until it is first reported."""
        with self._lock:
            self._states.setdefault(name, DependencyState(name, False, NOT_CHECKED, time.time()))

    def report(self, name: str, up: bool, detail: str = "") -> None:
        """The latest word on `name`: logged, and passed to the listeners, only when it changes."""
        with self._lock:
            before = self._states.get(name)
            first = before is None or before.detail == NOT_CHECKED
            if before is not None and before.up == up and not first:
                if detail != before.detail:  # the latest word ("leading" once "standing by"), since unchanged
                    self._states[name] = replace(before, detail=detail)
                return
            was_ready = self._ready_locked()
            self._states[name] = DependencyState(name, up, detail, time.time())
            now_ready = self._ready_locked()
            listeners = list(self._listeners) if now_ready != was_ready else []
        _log_change(self.process, name, up, detail, first=first)
        for listener in listeners:
            listener(now_ready)

    def listen(self, on_change: Callable[[bool], None]) -> None:
        """`on_change(ready)` is called whenever the process becomes ready or stops being so."""
        with self._lock:
            self._listeners.append(on_change)

    def ready(self) -> bool:
        with self._lock:
            return self._ready_locked()

    def states(self) -> list[DependencyState]:
        with self._lock:
            return sorted(self._states.values(), key=lambda state: state.name)

    def beat(self) -> None:
        self._beat = time.monotonic()

    def live(self, within: timedelta = LIVE_WITHIN) -> bool:
        return time.monotonic() - self._beat <= within.total_seconds()

    def _ready_locked(self) -> bool:
        return all(state.up for state in self._states.values())


def _log_change(process: str, name: str, up: bool, detail: str, *, first: bool) -> None:
    fields = {"dependency": name, "reachable": up, "detail": detail}  # `process` is a LogRecord attribute
    if up:
        log.log(logging.DEBUG if first else logging.INFO, "%s: %s is reachable", process, name, extra=fields)
    else:
        log.warning("%s: %s is unreachable: %s", process, name, detail, extra=fields)


async def probe_forever(
    readiness: Readiness,
    name: str,
    check: Callable[[], None],
    stop: asyncio.Event,
    *,
    interval: timedelta = PROBE_INTERVAL,
    timeout: timedelta = PROBE_TIMEOUT,
) -> None:
    """Calls `check` (which raises when `name` cannot be reached) every `interval`, in a thread of its own so
    that a busy pool delays no probe, and reports the answer. A check that hangs (a frozen peer) reports down
    after `timeout` and is not started again until it returns; a stop ends the probe at once, even then."""
    readiness.expect(name)
    thread = ThreadPoolExecutor(1, thread_name_prefix=f"probe-{name}")
    loop = asyncio.get_running_loop()
    pending: asyncio.Future[None] | None = None
    stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())  # ends the wait for a check that hangs
    try:
        while not stop.is_set():
            if pending is None:
                pending = loop.run_in_executor(thread, check)
            await asyncio.wait(
                [pending, stopping], timeout=timeout.total_seconds(), return_when=asyncio.FIRST_COMPLETED
            )
            if pending.done():
                error = pending.exception()
                readiness.report(name, error is None, _reason(error))
                pending = None
            elif not stop.is_set():
                readiness.report(name, False, f"no answer within {timeout.total_seconds():g} s")
            await asyncio.wait([stopping], timeout=interval.total_seconds())
    finally:
        stopping.cancel()
        if pending is not None:
            pending.cancel()  # its answer, should it come, is nobody's
        thread.shutdown(wait=False, cancel_futures=True)  # never waits for a check that hangs


async def beat_forever(
    readiness: Readiness, stop: asyncio.Event, interval: timedelta = PROBE_INTERVAL
) -> None:
    """The event loop's beat, for liveness: it stops when the loop is stuck."""
    while not stop.is_set():
        readiness.beat()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval.total_seconds())


def _reason(error: BaseException | None) -> str:
    if error is None:
        return ""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


class Probes:
    """The probes of one process's dependencies (name → check), and its loop's beat, from `start()` on the
    running loop until `stop()`."""

    def __init__(self, readiness: Readiness, checks: dict[str, Callable[[], None]]) -> None:
        self._readiness = readiness
        self._checks = checks
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        for name in checks:
            readiness.expect(name)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(beat_forever(self._readiness, self._stop), name="beat")]
        self._tasks += [
            asyncio.create_task(probe_forever(self._readiness, name, check, self._stop), name=f"probe-{name}")
            for name, check in self._checks.items()
        ]

    async def first_answers(self, timeout: timedelta = PROBE_TIMEOUT) -> None:
        """Returns once every dependency has been checked once, or after `timeout`."""
        deadline = time.monotonic() + timeout.total_seconds()
        while time.monotonic() < deadline and any(
            state.name in self._checks and state.detail == NOT_CHECKED for state in self._readiness.states()
        ):
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
