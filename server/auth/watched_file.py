"""A file read again when it changes: the token file and a JWKS file are replaced in place by operators, and
the server picks the new one up without a restart."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")
# A file is looked at (one stat) at most this often, so that a busy server does not stat it on every call.
CHECK_INTERVAL = 1.0


class WatchedFile(Generic[T]):
    """`parse`d content of `path`, parsed again once its modification time, size or inode changes. The
    first read fails loudly (the server must not start on a bad file). A later version that cannot be read
    (gone, unreadable, or not parsing) is logged once, and then either the last good one is kept, or, with
    `fail_closed` (a value and what it means), that value is in force until the file is fixed."""

    def __init__(
        self, path: Path, parse: Callable[[bytes], T], *, fail_closed: tuple[T, str] | None = None
    ) -> None:
        self._path = path
        self._parse = parse
        self._fail_closed = fail_closed
        self._lock = threading.Lock()
        self._signature: tuple[int, int, int] | None = self._stat()
        self._value = parse(path.read_bytes())
        self._checked = time.monotonic()

    @property
    def path(self) -> Path:
        return self._path

    def current(self) -> T:
        now = time.monotonic()
        if now - self._checked >= CHECK_INTERVAL:
            with self._lock:
                if now - self._checked >= CHECK_INTERVAL:
                    self._checked = now
                    self._reload_if_changed()
        return self._value

    def _stat(self) -> tuple[int, int, int]:
        stat = os.stat(self._path)
        return stat.st_mtime_ns, stat.st_size, stat.st_ino

    def _reload_if_changed(self) -> None:
        try:
            signature = self._stat()
        except OSError as error:
            if self._signature is not None:  # reported once, until the file is back
                self._signature = None
                self._failed(error)
            return
        if signature == self._signature:
            return
        self._signature = signature  # a bad version is reported once, not at every check
        try:
            value = self._parse(self._path.read_bytes())
        except (OSError, ValueError) as error:
            self._failed(error)
            return
        self._value = value
        log.info("%s changed: read again", self._path, extra={"path": str(self._path)})

    def _failed(self, error: Exception) -> None:
        if self._fail_closed is None:
            consequence = "the last good version stays in force"
        else:
            self._value, meaning = self._fail_closed
            consequence = f"{meaning} until it is fixed"
        log.error(
            "%s could not be read again; %s: %s",
            self._path,
            consequence,
            error,
            extra={"path": str(self._path)},
        )
