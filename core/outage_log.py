"""Logging an operation that keeps failing while a dependency is away: one WARNING when it starts failing,
DEBUG while it goes on failing (it is retried every second or so), one INFO when it succeeds again. An
outage of a minute writes two lines, not sixty (the process's readiness says what is away meanwhile,
`core/readiness.py`)."""

from __future__ import annotations

import logging
import threading


class OutageLog:
    """The log of one operation (`what`), used from any thread."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self._log = logger
        self._what = what
        self._lock = threading.Lock()
        self._failures = 0

    @property
    def failing(self) -> bool:
        return self._failures > 0

    def failed(self, error: BaseException | str) -> None:
        with self._lock:
            self._failures += 1
            first = self._failures == 1
        level = logging.WARNING if first else logging.DEBUG
        self._log.log(level, "%s failed, will retry: %s", self._what, error)

    def succeeded(self) -> None:
        with self._lock:
            failures, self._failures = self._failures, 0
        if failures:
            self._log.info("%s works again (after %d failed tries)", self._what, failures)
