"""The signal bus in one process (`jobmesh dev`, tests): what Redis would hold lives in a `MemoryHub`.

Several `MemorySignalBus` handles may share one hub, as several clients share one Redis: `shared_hub(name)`
gives the process-wide hub of a name, so the server, watcher and executor of `jobmesh dev` meet on it, and
closing one component's handle ends only that component's subscriptions.

Handlers run on a background thread per subscription, in publish order, as with Redis: a publisher is never
slowed or failed by a handler, and a handler may call back into the bus without deadlocking. TTLs are
measured on a monotonic clock (wall-clock jumps neither expire nor revive keys). Nothing here raises
SignalsUnavailable: the hub cannot go away.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from jobmesh.adapters.signals import wire
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.signals import CancelNotice
from jobmesh.core.ports.subscription import Subscription

log = logging.getLogger(__name__)

SWEEP_EVERY_S = 1.0  # expired entries are dropped on reads, and swept at most this often on writes


class MemoryHub:
    """The shared state: cancel keys and heartbeats with their expiry deadlines, and the live subscribers."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.cancel_keys: dict[AttemptRef, float] = {}
        self.heartbeats: dict[AttemptRef, tuple[datetime, float]] = {}
        self.fences: dict[AttemptRef, tuple[str, float]] = {}
        self.subscribers: set[_Mailbox] = set()
        self._next_sweep = clock()

    def sweep(self, now: float) -> None:
        """Drops what has expired, so a long `jobmesh dev` does not grow. Call holding `lock`."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_EVERY_S
        self.cancel_keys = {key: until for key, until in self.cancel_keys.items() if until > now}
        self.heartbeats = {key: entry for key, entry in self.heartbeats.items() if entry[1] > now}
        self.fences = {key: entry for key, entry in self.fences.items() if entry[1] > now}


_named_hubs: dict[str, MemoryHub] = {}
_named_hubs_lock = threading.Lock()


def shared_hub(name: str) -> MemoryHub:
    """The hub of this name in this process, made on first use (the `memory://name` URL)."""
    with _named_hubs_lock:
        return _named_hubs.setdefault(name, MemoryHub())


class MemorySignalBus:
    """A SignalBus handle on a hub (a private one by default). Thread-safe."""

    def __init__(self, hub: MemoryHub | None = None) -> None:
        self._hub = hub if hub is not None else MemoryHub()
        self._lock = threading.Lock()
        self._mailboxes: set[_Mailbox] = set()

    def publish_cancel(self, notice: CancelNotice) -> None:
        with self._hub.lock:
            subscribers = list(self._hub.subscribers)
        for mailbox in subscribers:
            mailbox.post(notice)

    def subscribe_cancels(self, handler: Callable[[CancelNotice], None]) -> Subscription:
        mailbox = _Mailbox(handler, self._forget)
        with self._lock:
            self._mailboxes.add(mailbox)
        with self._hub.lock:
            self._hub.subscribers.add(mailbox)
        return mailbox

    def set_cancel_keys(self, attempts: Sequence[AttemptRef], ttl: timedelta) -> None:
        lifetime = wire.ttl_ms(ttl) / 1000
        with self._hub.lock:
            now = self._hub.clock()
            self._hub.sweep(now)
            for key in attempts:
                self._hub.cancel_keys[key] = now + lifetime

    def cancelled(self, attempts: Sequence[AttemptRef]) -> set[AttemptRef]:
        with self._hub.lock:
            now = self._hub.clock()
            return {key for key in attempts if self._hub.cancel_keys.get(key, -math.inf) > now}

    def put_heartbeats(
        self, executor_id: str, attempts: Sequence[AttemptRef], at: datetime, ttl: timedelta
    ) -> None:
        at = wire.utc(at)  # as Redis returns it, so both adapters answer alike
        lifetime = wire.ttl_ms(ttl) / 1000
        with self._hub.lock:
            now = self._hub.clock()
            self._hub.sweep(now)
            for key in attempts:
                self._hub.heartbeats[key] = (at, now + lifetime)

    def heartbeats(self, attempts: Sequence[AttemptRef]) -> dict[AttemptRef, datetime]:
        with self._hub.lock:
            now = self._hub.clock()
            found = {key: self._hub.heartbeats.get(key) for key in attempts}
        return {key: entry[0] for key, entry in found.items() if entry is not None and entry[1] > now}

    def fence_attempts(self, attempts: Sequence[AttemptRef], owner: str, ttl: timedelta) -> set[AttemptRef]:
        lifetime = wire.ttl_ms(ttl) / 1000
        held = set()
        with self._hub.lock:
            now = self._hub.clock()
            self._hub.sweep(now)
            for key in attempts:
                holder, until = self._hub.fences.get(key, (owner, -math.inf))
                if until <= now:
                    self._hub.fences[key] = (owner, now + lifetime)
                    held.add(key)
                elif holder == owner:
                    held.add(key)
        return held

    def fence_owners(self, attempts: Sequence[AttemptRef]) -> dict[AttemptRef, str]:
        with self._hub.lock:
            now = self._hub.clock()
            found = {key: self._hub.fences.get(key) for key in attempts}
        return {key: entry[0] for key, entry in found.items() if entry is not None and entry[1] > now}

    def check_reachable(self) -> None:
        """In this process's memory: always reachable."""

    def close(self) -> None:
        """Ends this handle's subscriptions; the hub and the other handles on it carry on."""
        with self._lock:
            mailboxes, self._mailboxes = self._mailboxes, set()
        for mailbox in mailboxes:
            mailbox.close()

    def _forget(self, mailbox: _Mailbox) -> None:
        with self._hub.lock:
            self._hub.subscribers.discard(mailbox)
        with self._lock:
            self._mailboxes.discard(mailbox)


class _Mailbox:
    """One subscription: a queue drained by its own daemon thread."""

    def __init__(self, handler: Callable[[CancelNotice], None], on_close: Callable[[_Mailbox], None]) -> None:
        self._handler = handler
        self._on_close = on_close
        self._queue: queue.SimpleQueue[CancelNotice | None] = queue.SimpleQueue()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jobmesh-signals:memory", daemon=True)
        self._thread.start()

    def post(self, notice: CancelNotice) -> None:
        self._queue.put(notice)

    def close(self) -> None:
        self._on_close(self)  # first, so that nothing more is posted
        self._closed.set()
        self._queue.put(None)  # wakes the thread
        if self._thread is not threading.current_thread():
            self._thread.join(wire.SUBSCRIBER_JOIN_TIMEOUT_S)

    def _run(self) -> None:
        while (notice := self._queue.get()) is not None:
            if self._closed.is_set():
                return  # notices still queued at close are dropped: close means no more calls
            try:
                self._handler(notice)
            except Exception:
                log.exception("cancel handler failed for %s", notice)
