"""The window scans of the shards a watcher holds: what is due within the window waits in the timer.

A full load reads every run of the held shards due within the window. After it, a scan reads only:
- the runs changed or created since the scan before, from the change feed (its cursor taken before the full
  load, so nothing committed meanwhile is missed; a run read twice is held once);
- the slice of time the window gained since the scan before, `(previous end, new end]`, where runs that did
  not change enter the window.
A shard taken from another watcher is loaded at once, up to the window's current end (the slices and the
feed go on from there), and every `reconcile_interval` a full load starts over from the database, which
repairs anything a bug or an operator's hand may have left out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from datetime import datetime, timedelta

from jobmesh.core.attempts import Dispatchable
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.ports.store import FeedCursor
from jobmesh.watcher.releaser import Releaser

log = logging.getLogger(__name__)
SCAN_LIMIT = 50_000
CHANGES_PER_READ = 5_000
_JUST_BEFORE = timedelta(microseconds=1)


class WindowScans:
    """Runs in one thread at a time (the watcher's scan loop); `take` may be called from any."""

    def __init__(
        self,
        store: SchedulerStore,
        releaser: Releaser,
        clock: Callable[[], datetime],
        *,
        window: timedelta,
        reconcile_interval: timedelta,
    ) -> None:
        self._store = store
        self._releaser = releaser
        self._clock = clock
        self._window = window
        self._reconcile_interval = reconcile_interval.total_seconds()
        self._cursor: FeedCursor | None = None
        self._until: datetime | None = None  # where the window ends, as far as the held shards are read
        self._loaded_at = 0.0
        self._taken: set[int] = set()
        self._lock = threading.Lock()

    def take(self, shards: Collection[int]) -> None:
        """Shards just taken: loaded at the next scan (wake the scan loop to do it at once)."""
        with self._lock:
            self._taken.update(shards)

    def scan(self, held: frozenset[int]) -> int:
        """Holds what the held shards have due within the window; returns how many runs were new."""
        with self._lock:
            taken, self._taken = self._taken & held, set()
        if not held:
            self._cursor = self._until = None  # nothing to follow: the next shard starts with a full load
            return 0
        if self._cursor is None or self._until is None or self._reconcile_due():
            return self._full_load(held)
        added = self._load(taken, self._until) if taken else 0
        return added + self._follow(held, self._cursor, self._until)

    def _reconcile_due(self) -> bool:
        return time.monotonic() - self._loaded_at >= self._reconcile_interval

    def _full_load(self, held: frozenset[int]) -> int:
        cursor = self._store.feed_cursor()  # before the load: what commits during it is read next time
        until = self._clock() + self._window
        due = self._store.due_runs(until, limit=SCAN_LIMIT, shards=held)
        self._cursor, self._until = cursor, _read_up_to(due, until)
        self._loaded_at = time.monotonic()
        return self._releaser.hold(due)

    def _load(self, shards: Collection[int], until: datetime) -> int:
        due = self._store.due_runs(until, limit=SCAN_LIMIT, shards=shards)
        if len(due) == SCAN_LIMIT:
            log.warning(
                "shards %s have more than %d runs due in the window: reloading all", shards, SCAN_LIMIT
            )
            self._cursor = None
        return self._releaser.hold(due)

    def _follow(self, held: frozenset[int], cursor: FeedCursor, since: datetime) -> int:
        """The window's new slice, then the feed's changes."""
        until = self._clock() + self._window
        entering = self._store.due_runs(until, limit=SCAN_LIMIT, shards=held, after=since)
        until = _read_up_to(entering, until)
        added = self._releaser.hold(entering)
        while True:
            changed = self._store.due_runs_changed(cursor, until, shards=held, limit=CHANGES_PER_READ)
            added += self._releaser.hold(changed.runs)
            cursor = changed.cursor
            if changed.complete:
                break
        self._cursor, self._until = cursor, until
        return added


def _read_up_to(due: list[Dispatchable], until: datetime) -> datetime:
    """Where a read of at most SCAN_LIMIT runs, earliest first, really ended: before the last one's due time
    when it was cut short (runs due at that instant may have been left out; read again next time)."""
    if len(due) < SCAN_LIMIT:
        return until
    return due[-1].run.due_time - _JUST_BEFORE
