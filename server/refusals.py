"""Refused calls in the audit trail: a call refused `UNAUTHENTICATED` (a credential missing or bad) or
`PERMISSION_DENIED` (a role too low) leaves an `AuditEvent` of action REFUSED, whose actor is the caller's
subject (`anonymous` without a valid credential), whose resource is the method refused, and whose namespace
is the refusal's (empty for an unauthenticated call: only callers who view every namespace
list those).

A flood of refusals must not become a flood of writes: at most `rate` events a second are written (`burst`
at once); the rest are counted and the count logged. The writes go to a thread of the trail's own, never
waiting on the call, and the server's stop waits for the one under way (`close`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from datetime import datetime

from jobmesh.core.audit import AuditAction, AuditEvent
from jobmesh.core.errors import JobmeshError, PermissionDenied, Unauthenticated
from jobmesh.core.ids import new_run_id
from jobmesh.core.ports.store import Store
from jobmesh.server.workers import close_pools

__all__ = ["RefusalTrail", "note_refusal", "noting_refusals"]

log = logging.getLogger(__name__)
RATE, BURST = 50.0, 200  # refusal events written a second, and at once

_current: ContextVar[Callable[[JobmeshError], None] | None] = ContextVar("jobmesh_refusals", default=None)


class RefusalTrail:
    def __init__(
        self, store: Store, clock: Callable[[], datetime], rate: float = RATE, burst: int = BURST
    ) -> None:
        self._store = store
        self._clock = clock
        self._rate, self._burst = rate, burst
        self._tokens, self._then = float(burst), time.monotonic()
        self._dropped = 0
        self._lock = threading.Lock()
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="jobmesh-refusal")

    def close(self) -> None:
        close_pools(self._writes)

    def note(self, actor: str, method: str, error: JobmeshError) -> None:
        if not isinstance(error, PermissionDenied | Unauthenticated) or not self._admitted():
            return
        now = self._clock()
        event = AuditEvent(
            event_id=new_run_id(now),
            time=now,
            actor=actor,
            action=AuditAction.REFUSED,
            resource=method,
            job_id="",
            namespace=error.metadata.get("namespace", ""),
        )
        try:
            self._writes.submit(self._write, event)
        except RuntimeError:  # a call refused while the server stops: its record is lost, the refusal stands
            log.warning("a refused call was not written to the audit trail: the server is stopping")

    def _admitted(self) -> bool:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(float(self._burst), self._tokens + (now - self._then) * self._rate)
            self._then = now
            if self._tokens < 1:
                self._dropped += 1
                if self._dropped in (1, 100) or self._dropped % 10_000 == 0:
                    log.warning(
                        "%d refused calls past %g a second were not written to the audit trail",
                        self._dropped,
                        self._rate,
                    )
                return False
            self._tokens -= 1
            return True

    def _write(self, event: AuditEvent) -> None:
        try:
            self._store.record_audit([event])
        except Exception:  # the refusal stands; only its record is lost
            log.exception("a refused call could not be written to the audit trail")


@contextlib.contextmanager
def noting_refusals(note: Callable[[JobmeshError], None]) -> Iterator[None]:
    """`note` hears of every refusal the call being served ends with (status.py's abort calls it)."""
    token = _current.set(note)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # a stream closed in another context: as in principals.py
            _current.reset(token)


def note_refusal(error: JobmeshError) -> None:
    note = _current.get()
    if note is not None:
        note(error)
