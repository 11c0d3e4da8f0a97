"""What the runners share: how a target ended (`TargetOutcome`), how it is told to stop (`Stop`), and where
it writes its logs and progress (`AttemptIO`)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Protocol

from jobmesh.core.states import RUN_STATE_TO_WIRE, STOP_OUTCOMES, StopReason
from jobmesh.v1 import run_pb2


@dataclass(frozen=True, slots=True)
class TargetOutcome:
    state: run_pb2.RunState.ValueType
    exit_code: int | None = None
    error_type: str = ""
    error_message: str = ""
    result: str = ""  # a handler's return value, as JSON text


SUCCEEDED = TargetOutcome(run_pb2.RUN_STATE_SUCCEEDED)


def failed(error_type: str, message: str, exit_code: int | None = None) -> TargetOutcome:
    return TargetOutcome(run_pb2.RUN_STATE_FAILED, exit_code, error_type, message)


def stopped(reason: StopReason, message: str, exit_code: int | None = None) -> TargetOutcome | None:
    """How a stop for `reason` ends the attempt (core.states' STOP_OUTCOMES); None for a fence, which is
    never reported."""
    if reason not in STOP_OUTCOMES:
        return None
    state, error_type = STOP_OUTCOMES[reason]
    return TargetOutcome(RUN_STATE_TO_WIRE[state], exit_code, error_type, message)


class Stop:
    """A request to stop one attempt. The first reason is kept, except that a fence overrides any other (a
    fenced attempt must not be reported). `kill_at` (monotonic) is when a polite stop turns into SIGKILL; a
    later, harsher request moves it earlier and sets `changed`."""

    def __init__(self) -> None:
        self.reason: StopReason | None = None
        self.message = ""
        self.kill_at = float("inf")
        self._requested = asyncio.Event()
        self.changed = asyncio.Event()

    def request(self, reason: StopReason, grace: float, message: str = "") -> None:
        if self.reason is None or reason is StopReason.FENCE:
            self.reason = reason
            self.message = message or self.message
        kill_at = time.monotonic() + max(grace, 0.0)
        if kill_at < self.kill_at:
            self.kill_at = kill_at
            self.changed.set()
        self._requested.set()

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    async def wait(self) -> None:
        await self._requested.wait()


class AttemptIO(Protocol):
    """Where a running attempt reports; called on the event loop's thread only."""

    def log(self, stream: run_pb2.LogStream.ValueType, text: str) -> None: ...

    def progress(self, fraction: float, message: str) -> None: ...

    def full(self) -> bool:
        """The log buffer is full: output that can wait (a command's pipe) should, until `room`."""
        ...

    def spent(self) -> bool:
        """The attempt's log budget is spent: its output is only counted (`count_spent`) from now on."""
        ...

    def count_spent(self, lines: int, size: int) -> None: ...

    async def room(self) -> None: ...
