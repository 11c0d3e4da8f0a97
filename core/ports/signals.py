"""The signal bus port. Its adapters (Redis, in-process) are in `jobmesh.adapters.signals`, chosen by URL.

Nothing here is the truth: the database holds every cancel and heartbeat that matters. Losing the bus loses
only the fallback (invariant 8).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.subscription import Subscription


class SignalsUnavailable(Exception):
    """The bus could not be reached."""


@dataclass(frozen=True, slots=True)
class CancelNotice:
    """Stop these attempts, which the executor `executor_id` holds."""

    executor_id: str
    attempts: tuple[AttemptRef, ...]
    reason: str


class SignalBus(Protocol):
    def publish_cancel(self, notice: CancelNotice) -> None:
        """Tells every server replica (the one holding that executor's stream pushes it). Raises
        SignalsUnavailable."""
        ...

    def subscribe_cancels(self, handler: Callable[[CancelNotice], None]) -> Subscription:
        """Calls `handler` (from a background thread) for every notice published from now on, by any
        process. Survives the bus going away and coming back (it resubscribes)."""
        ...

    def set_cancel_keys(self, attempts: Sequence[AttemptRef], ttl: timedelta) -> None:
        """Leaves a key per attempt that an executor whose stream is down polls. Raises SignalsUnavailable."""
        ...

    def cancelled(self, attempts: Sequence[AttemptRef]) -> set[AttemptRef]:
        """Which of these attempts have a cancel key. Raises SignalsUnavailable."""
        ...

    def put_heartbeats(
        self, executor_id: str, attempts: Sequence[AttemptRef], at: datetime, ttl: timedelta
    ) -> None:
        """Records that these attempts were alive at `at` (used while the executor's stream is down)."""
        ...

    def heartbeats(self, attempts: Sequence[AttemptRef]) -> dict[AttemptRef, datetime]:
        """The latest fallback heartbeat of each attempt that has one."""
        ...

    def fence_attempts(self, attempts: Sequence[AttemptRef], owner: str, ttl: timedelta) -> set[AttemptRef]:
        """Takes the start of each attempt for `owner` (an executor) unless another owner holds it, for
        `ttl`: a claim granted while the database is away is fenced here (docs/design.md, "Claims while the
        database is away"). Returns the attempts `owner` holds now. Raises SignalsUnavailable."""
        ...

    def fence_owners(self, attempts: Sequence[AttemptRef]) -> dict[AttemptRef, str]:
        """Who holds the fence of each of these attempts that has one. Raises SignalsUnavailable."""
        ...

    def check_reachable(self) -> None:
        """Returns when the bus answers (a readiness probe); raises SignalsUnavailable when it does not."""
        ...

    def close(self) -> None: ...
