"""The pipeline benchmark's handler: records each real start, and does nothing else.

    jobmesh executor --handlers benchmarks.handlers:HANDLERS   (with the repository root on PYTHONPATH)

`bench.stamp` appends `run attempt start_ns` (the wall clock when the handler began) to the file named by
`JOBMESH_BENCH_STARTS` (one file per executor process). Lines are buffered in memory and written by a daemon
thread every `FLUSH_INTERVAL` seconds and at exit, so a start costs a list append on the executor's loop.
Without the variable the handler records nothing.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from typing import TextIO

from jobmesh.executor.handlers import Handler, HandlerContext

STARTS_VARIABLE = "JOBMESH_BENCH_STARTS"
FLUSH_INTERVAL = 0.25


class StartLog:
    """Lines appended from any thread, written out by one daemon thread and at exit."""

    def __init__(self, path: str) -> None:
        self._file: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed at exit
        self._pending: list[str] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._flush_loop, name="bench-starts", daemon=True).start()
        atexit.register(self.close)

    def add(self, line: str) -> None:
        self._pending.append(line)  # list.append is atomic; the swap below takes the list under the lock

    def flush(self) -> None:
        with self._lock:
            if self._closed:
                return
            pending, self._pending = self._pending, []
            if pending:
                self._file.write("".join(pending))
                self._file.flush()

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._closed = True
            self._file.close()

    def _flush_loop(self) -> None:
        while not self._closed:
            time.sleep(FLUSH_INTERVAL)
            self.flush()


_log: StartLog | None = None
_log_lock = threading.Lock()


def _start_log() -> StartLog | None:
    global _log  # noqa: PLW0603 - one log per executor process, opened on first use
    path = os.environ.get(STARTS_VARIABLE)
    if not path:
        return None
    with _log_lock:
        if _log is None:
            _log = StartLog(path)
    return _log


async def stamp(context: HandlerContext) -> None:
    """Async, so that it runs on the executor's loop without a thread per start."""
    started = time.time_ns()
    log = _log or _start_log()
    if log is not None:
        log.add(f"{context.run} {context.attempt} {started}\n")


HANDLERS: dict[str, Handler] = {"bench.stamp": stamp}
