"""The signal bus port. Adapters: Redis (`redis.py`) and in-process (`memory.py`), chosen in `factory.py`.

Nothing here is the truth: the database holds every cancel and heartbeat that matters. Losing the bus loses
only the fallback (invariant 8).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol


class SignalsUnavailable(Exception):
    """The bus could not be reached."""


@dataclass(frozen=True, slots=True, order=True)
class AttemptKey:
    """One attempt of one run: `jobs/{job}/runs/{run}` and the attempt number."""

    run: str
    attempt: int


@dataclass(frozen=True, slots=True)
class CancelNotice:
    """Stop these attempts, which the executor `executor_id` holds."""

    executor_id: str
    attempts: tuple[AttemptKey, ...]
    reason: str


class Subscription(Protocol):
    def close(self) -> None: ...


class SignalBus(Protocol):
    def publish_cancel(self, notice: CancelNotice) -> None:
        """Tells every server replica (the one holding that executor's stream pushes it). Raises
        SignalsUnavailable."""
        ...

    def subscribe_cancels(self, handler: Callable[[CancelNotice], None]) -> Subscription:
        """Calls `handler` (from a background thread) for every notice published from now on, by any
        process. Survives the bus going away and coming back (it resubscribes)."""
        ...

    def set_cancel_keys(self, attempts: Sequence[AttemptKey], ttl: timedelta) -> None:
        """Leaves a key per attempt that an executor whose stream is down polls. Raises SignalsUnavailable."""
        ...

    def cancelled(self, attempts: Sequence[AttemptKey]) -> set[AttemptKey]:
        """Which of these attempts have a cancel key. Raises SignalsUnavailable."""
        ...

    def put_heartbeats(
        self, executor_id: str, attempts: Sequence[AttemptKey], at: datetime, ttl: timedelta
    ) -> None:
        """Records that these attempts were alive at `at` (used while the executor's stream is down)."""
        ...

    def heartbeats(self, attempts: Sequence[AttemptKey]) -> dict[AttemptKey, datetime]:
        """The latest fallback heartbeat of each attempt that has one."""
        ...

    def close(self) -> None: ...
