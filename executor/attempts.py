"""The attempts an executor holds: each waits for its start time (never starting before it), runs, and
reports its result to the outbox. Cancels, fences, timeouts and drains reach a running attempt through its
`Stop`.

Two local guards back the server's claim (invariants 5 and 6): an attempt already held or recently run here
is never started again, and a cancel or fence that arrives before the grant it races with is remembered, so
the grant does not start it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from jobmesh.control.v1 import dispatch_pb2
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.error_types import ErrorType
from jobmesh.core.hooks import NO_HOOKS, RunHooks
from jobmesh.core.limits import MAX_ERROR_MESSAGE, MAX_ERROR_TYPE
from jobmesh.core.metrics import EXECUTOR_SLOTS_IN_USE
from jobmesh.core.states import StopReason
from jobmesh.core.text import storable
from jobmesh.executor.clock import now_ns, seconds_of, sleep_until, timestamp_of_ns, within
from jobmesh.executor.outbox import Outbox
from jobmesh.executor.outcomes import Stop, TargetOutcome, failed, stopped
from jobmesh.executor.runners import RunnerSettings, run_target
from jobmesh.v1 import run_pb2

log = logging.getLogger(__name__)

REMEMBER_RUN = 100_000  # attempts that ran here, kept to refuse a second start
REMEMBER_EARLY_STOP = 300.0  # seconds a cancel or fence for an attempt not (yet) held here is kept


def contact_margin(heartbeat_timeout: float) -> float:
    """How long before its heartbeat timeout an attempt out of contact is killed: room for the kill and for
    clocks that run at slightly different rates, a fifth of the timeout and at least half a second."""
    return max(heartbeat_timeout / 5, 0.5)


@dataclass(slots=True)
class Attempt:
    key: AttemptRef
    run: dispatch_pb2.DispatchedRun
    start_ns: int  # not before this
    # Monotonic: when the latest heartbeat known to have kept it alive (its claim, to begin with) was sent.
    kept_alive_at: float
    stop: Stop = field(default_factory=Stop)
    started_ns: int | None = None
    task: asyncio.Task[None] | None = None


class _AttemptIO:
    """An attempt's logs and progress, into the outbox; nothing once it is fenced."""

    def __init__(self, outbox: Outbox, attempt: Attempt) -> None:
        self._outbox = outbox
        self._attempt = attempt

    def log(self, stream: run_pb2.LogStream.ValueType, text: str) -> None:
        if self._attempt.stop.reason is not StopReason.FENCE:
            self._outbox.log(self._attempt.key, stream, text)

    def progress(self, fraction: float, message: str) -> None:
        if self._attempt.stop.reason is not StopReason.FENCE:
            self._outbox.progress(self._attempt.key, fraction, message)

    def full(self) -> bool:
        return self._outbox.logs.full()

    def spent(self) -> bool:
        return self._outbox.logs.spent(self._attempt.key)

    def count_spent(self, lines: int, size: int) -> None:
        self._outbox.logs.count_spent(self._attempt.key, lines, size)

    async def room(self) -> None:
        await self._outbox.logs.room()


class Attempts:
    def __init__(
        self, *, settings: RunnerSettings, outbox: Outbox, capacity: int, hooks: RunHooks = NO_HOOKS
    ) -> None:
        self._settings = settings
        self._hooks = hooks
        self._outbox = outbox
        self._capacity = capacity
        self._held: dict[AttemptRef, Attempt] = {}
        self._ran: OrderedDict[AttemptRef, None] = OrderedDict()
        self._early_stops: dict[AttemptRef, tuple[StopReason, str, float]] = {}
        self._freed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[AttemptRef]:
        return iter(list(self._held))

    def keys(self) -> list[AttemptRef]:
        return list(self._held)

    def free(self) -> int:
        return max(self._capacity - len(self._held), 0)

    def holds(self, key: AttemptRef) -> bool:
        return key in self._held

    def start(self, run: dispatch_pb2.DispatchedRun, start_ns: int, claimed_at: float) -> bool:
        """Holds a granted attempt: it starts at `start_ns` or at once if that has passed. False when it
        is already held or ran here, or was cancelled or fenced before its grant arrived. `claimed_at` is
        when its claim was sent (monotonic): the grant kept it alive from then."""
        key = AttemptRef.from_proto(run.attempt)  # the queue's codec refuses a malformed one
        if key in self._held or key in self._ran:
            log.warning("attempt %s is already held or ran here: not started again", key)
            return False
        self._remember_ran(key)
        attempt = Attempt(key, run, start_ns, claimed_at)
        if (early := self._early_stops.pop(key, None)) is not None:
            reason, message, _ = early
            attempt.stop.request(reason, 0.0, message)
            self._report_unstarted(attempt)
            return False
        self._held[key] = attempt
        EXECUTOR_SLOTS_IN_USE.inc()
        attempt.task = asyncio.create_task(self._run(attempt), name=f"jobmesh-attempt:{key}")
        return True

    def cancel(self, key: AttemptRef, message: str) -> None:
        self._stop(key, StopReason.CANCEL, self._settings.cancel_grace, message)

    def fence(self, key: AttemptRef) -> None:
        """Kill at once and report nothing more: the server has given the attempt up."""
        self._stop(key, StopReason.FENCE, 0.0, "fenced by the server")
        self._outbox.forget(key)

    def shortest_heartbeat_timeout(self) -> float | None:
        """Seconds, over the attempts held (None when none has one)."""
        timeouts = [seconds_of(a.run.heartbeat_timeout) for a in self._held.values()]
        return min((timeout for timeout in timeouts if timeout > 0), default=None)

    def kept_alive(self, keys: Iterable[AttemptRef], sent_at: float) -> None:
        """A heartbeat sent at `sent_at` (monotonic) kept these attempts alive."""
        for key in keys:
            if (attempt := self._held.get(key)) is not None:
                attempt.kept_alive_at = max(attempt.kept_alive_at, sent_at)

    def stop_out_of_contact(self, now: float) -> list[AttemptRef]:
        """Kills the attempts nothing has kept alive for nearly their heartbeat timeout: past it, the server
        may retry them elsewhere (docs/design.md, "At least once"). Returns them."""
        stopped = []
        for attempt in list(self._held.values()):
            timeout = seconds_of(attempt.run.heartbeat_timeout)
            silent = now - attempt.kept_alive_at
            if timeout > 0 and silent >= timeout - contact_margin(timeout) and not attempt.stop.requested:
                message = (
                    f"no heartbeat was known to reach the server for {silent:.1f} s (timeout {timeout:g} s)"
                )
                log.warning("stopping %s: %s", attempt.key, message)
                attempt.stop.request(StopReason.CONTACT_LOST, 0.0, message)
                stopped.append(attempt.key)
        return stopped

    def stop_all(self, reason: StopReason, message: str) -> None:
        for attempt in list(self._held.values()):
            attempt.stop.request(reason, self._settings.cancel_grace, message)

    async def wait_free(self) -> None:
        while len(self._held) >= self._capacity:
            self._freed.clear()
            await self._freed.wait()

    async def wait_empty(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._held:
            self._freed.clear()
            if not await within(self._freed.wait(), deadline - time.monotonic()):
                return not self._held
        return True

    async def abort(self) -> None:
        """Last resort at exit: cancels whatever is left (its runner kills its process group)."""
        tasks = [attempt.task for attempt in self._held.values() if attempt.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _stop(self, key: AttemptRef, reason: StopReason, grace: float, message: str) -> None:
        attempt = self._held.get(key)
        if attempt is not None:
            log.info("stopping %s: %s", key, message or reason.value)
            attempt.stop.request(reason, grace, message)
            return
        if key in self._ran:
            return  # it has ended; its result says how
        now = time.monotonic()
        self._early_stops = {k: v for k, v in self._early_stops.items() if v[2] > now}
        self._early_stops[key] = (reason, message, now + REMEMBER_EARLY_STOP)

    def _remember_ran(self, key: AttemptRef) -> None:
        self._ran[key] = None
        while len(self._ran) > REMEMBER_RUN:
            self._ran.popitem(last=False)

    async def _run(self, attempt: Attempt) -> None:
        try:
            if not await self._wait_start(attempt):
                self._report_unstarted(attempt)
                return
            attempt.started_ns = now_ns()
            self._hooks.start(attempt.run)
            try:
                outcome = await run_target(
                    attempt.run, _AttemptIO(self._outbox, attempt), attempt.stop, self._settings
                )
            except Exception as exc:
                log.exception("attempt %s failed inside the executor", attempt.key)
                outcome = failed(ErrorType.EXECUTOR_ERROR, f"{type(exc).__name__}: {exc}")
            self._report(attempt, outcome)
        finally:
            del self._held[attempt.key]
            EXECUTOR_SLOTS_IN_USE.dec()
            self._freed.set()

    async def _wait_start(self, attempt: Attempt) -> bool:
        """Waits until the start time; False when stopped first."""
        if attempt.start_ns > now_ns():
            waiter = asyncio.create_task(sleep_until(attempt.start_ns))
            stopper = asyncio.create_task(attempt.stop.wait())
            try:
                await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                stopper.cancel()
        return not attempt.stop.requested

    def _report_unstarted(self, attempt: Attempt) -> None:
        reason = attempt.stop.reason
        # An attempt that never started cannot have run out of time; a fence reports nothing.
        if reason is None or reason is StopReason.TIMEOUT:
            return
        if (outcome := stopped(reason, attempt.stop.message)) is not None:
            self._report(attempt, outcome)

    def _report(self, attempt: Attempt, outcome: TargetOutcome) -> None:
        if attempt.stop.reason is StopReason.FENCE:
            self._hooks.report(attempt.run, None)
            return
        result = pb.AttemptResult(
            attempt=attempt.key.to_proto(), state=outcome.state, end_time=timestamp_of_ns(now_ns())
        )
        if outcome.exit_code is not None:
            result.exit_code = outcome.exit_code
        if outcome.error_type:
            result.error.type = storable(outcome.error_type, MAX_ERROR_TYPE)
            result.error.message = storable(outcome.error_message, MAX_ERROR_MESSAGE)
        if attempt.started_ns is not None:
            result.start_time.CopyFrom(timestamp_of_ns(attempt.started_ns))
        result.result = outcome.result
        self._hooks.report(attempt.run, result)
        self._outbox.result(attempt.key, result)
