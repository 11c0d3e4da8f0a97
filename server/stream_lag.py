"""How long the claims of executors' streams take in this server, from their arrival to their answer: the
wait for a thread and the store's time. It is the sign that the server, or the database behind it, does more
than it can: a server whose creates take all its time leaves claims waiting, a database out of CPU answers
them late, and either way the runs already accepted start late. Past a limit, creates are refused
(`Workers.creating`) until the claims are answered in time again.
"""

from __future__ import annotations

import itertools
import threading
import time
from datetime import timedelta

WINDOW = timedelta(seconds=1)


class StreamLag:
    """From any thread. The lag is the longest wait of a message handled in the last window or so, or of
    one still waiting, whichever is longer (a server that handles nothing at all is lagging too)."""

    def __init__(self, window: timedelta = WINDOW) -> None:
        self._window = window.total_seconds()
        self._lock = threading.Lock()
        self._tokens = itertools.count()
        self._waiting: dict[int, float] = {}  # token -> when it arrived (monotonic)
        self._bucket_start = time.monotonic()
        self._bucket_peak = 0.0
        self._previous_peak = 0.0

    def arrived(self) -> int:
        """A message came; its token is given to `answered` (or `abandoned`)."""
        with self._lock:
            token = next(self._tokens)
            self._waiting[token] = time.monotonic()
            return token

    def answered(self, token: int) -> None:
        now = time.monotonic()
        with self._lock:
            arrived = self._waiting.pop(token, None)
            if arrived is not None:
                self._roll(now)
                self._bucket_peak = max(self._bucket_peak, now - arrived)

    def abandoned(self, token: int) -> None:
        with self._lock:
            self._waiting.pop(token, None)

    def current(self) -> timedelta:
        now = time.monotonic()
        with self._lock:
            self._roll(now)
            oldest = min(self._waiting.values(), default=now)
            return timedelta(seconds=max(self._bucket_peak, self._previous_peak, now - oldest))

    def _roll(self, now: float) -> None:
        elapsed = now - self._bucket_start
        if elapsed >= self._window:
            self._previous_peak = self._bucket_peak if elapsed < 2 * self._window else 0.0
            self._bucket_peak = 0.0
            self._bucket_start = now
