"""A log line that may come thousands of times a second (a refusal under overload) written at most once per
interval per key, with how many like it were left out since: an operator sees that it happens and how
often, and the log does not become the load."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

__all__ = ["ThrottledLog"]


class ThrottledLog:
    """`log(key, ...)` writes through `logger` at `level` at most once per `every` for each key; the line
    after a quiet spell says how many were left out (`left_out` in its `extra`)."""

    def __init__(
        self,
        logger: logging.Logger,
        every: timedelta,
        *,
        level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._every = every.total_seconds()
        self._level = level
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def log(self, key: str, message: str, *args: object, extra: dict[str, Any] | None = None) -> bool:
        """True when the line was written."""
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self._every:
                self._left_out[key] = self._left_out.get(key, 0) + 1
                return False
            self._last[key] = now
            left_out = self._left_out.pop(key, 0)
        if left_out:
            message += " (and %d more like it since the last line)"
            args = (*args, left_out)
        self._logger.log(self._level, message, *args, extra={**(extra or {}), "left_out": left_out})
        return True
