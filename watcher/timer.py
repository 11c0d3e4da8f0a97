"""The in-memory timer: runs waiting for their release instant, earliest first, each once."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from jobmesh.core.attempts import AttemptRef, Dispatchable


@dataclass(order=True)
class _TimerEntry:
    release_at: datetime
    order: int
    item: Dispatchable = field(compare=False)
    ref: AttemptRef = field(compare=False)


class Timer:
    """Thread-safe: the scan adds while the release takes, each from a worker thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heap: list[_TimerEntry] = []
        self._held: set[AttemptRef] = set()
        self._order = itertools.count()

    def __len__(self) -> int:
        with self._lock:
            return len(self._heap)

    def add(self, ref: AttemptRef, item: Dispatchable, release_at: datetime) -> bool:
        """Holds the run until `release_at`; False when it is held already."""
        with self._lock:
            if ref in self._held:
                return False
            self._held.add(ref)
            heapq.heappush(self._heap, _TimerEntry(release_at, next(self._order), item, ref))
            return True

    def next_release(self) -> datetime | None:
        with self._lock:
            return self._heap[0].release_at if self._heap else None

    def pop_due(self, now: datetime, limit: int) -> list[tuple[AttemptRef, Dispatchable]]:
        """Takes up to `limit` runs whose release instant has come, earliest first."""
        due: list[tuple[AttemptRef, Dispatchable]] = []
        with self._lock:
            while self._heap and self._heap[0].release_at <= now and len(due) < limit:
                entry = heapq.heappop(self._heap)
                self._held.discard(entry.ref)
                due.append((entry.ref, entry.item))
        return due

    def drop(self, unwanted: Callable[[Dispatchable], bool]) -> int:
        """Lets go of the runs `unwanted` picks (a shard's, when the shard is lost); returns how many."""
        with self._lock:
            kept = [entry for entry in self._heap if not unwanted(entry.item)]
            dropped = len(self._heap) - len(kept)
            if dropped:
                heapq.heapify(kept)
                self._heap = kept
                self._held = {entry.ref for entry in kept}
            return dropped

    def clear(self) -> None:
        with self._lock:
            self._heap.clear()
            self._held.clear()
