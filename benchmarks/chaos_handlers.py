"""The chaos run's handler: records each real start and end of an attempt, at once.

    jobmesh executor --handlers benchmarks.chaos_handlers:HANDLERS   (with the repository root on PYTHONPATH)

`chaos.stamp` appends `S RUN ATTEMPT NS` when it begins and `E RUN ATTEMPT NS` when it ends (NS: the wall
clock, epoch nanoseconds) to the file named by `JOBMESH_CHAOS_STARTS`, one file per executor. Each line is
one `write` on a file opened with O_APPEND, not a buffer flushed later: an executor SIGKILLed a moment after
a start has written it (the page cache keeps it), so no start is missing from the counts. The payload, when
not empty, is a number of seconds to wait before ending.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time

from jobmesh.executor.handlers import Handler, HandlerContext

STARTS_VARIABLE = "JOBMESH_CHAOS_STARTS"

_fd: int | None = None
_lock = threading.Lock()


def _record(line: str) -> None:
    global _fd  # noqa: PLW0603 - one file per executor process, opened on first use
    if _fd is None:
        path = os.environ.get(STARTS_VARIABLE)
        if not path:
            return
        with _lock:
            if _fd is None:
                _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_fd, line.encode())


async def stamp(context: HandlerContext) -> None:
    """Async, so that it runs on the executor's loop without a thread per start."""
    _record(f"S {context.run} {context.attempt} {time.time_ns()}\n")
    seconds = float(context.payload.decode() or 0) if context.payload else 0.0
    if seconds > 0:
        await asyncio.sleep(seconds)
    _record(f"E {context.run} {context.attempt} {time.time_ns()}\n")


HANDLERS: dict[str, Handler] = {"chaos.stamp": stamp}
