"""The peers' no-op job: it records its start instant, and does nothing else. Runs in the peers venv.

`record(n)` appends `n pid start_ns` (the wall clock when the job began) to `starts-PID.txt` in the folder
named by `JOBMESH_PEERS_STARTS`: one file per worker process, opened on first use (after any fork), each line
written at once with one O_APPEND write, so nothing is lost when a worker is stopped. Standard library only.
"""

from __future__ import annotations

import os
import time

STARTS_VARIABLE = "JOBMESH_PEERS_STARTS"
# Where every peer module finds its broker (a Redis URL or a libpq conninfo) and its queue's name.
BROKER_VARIABLE = "JOBMESH_PEERS_BROKER_URL"
QUEUE_VARIABLE = "JOBMESH_PEERS_QUEUE"

_file: tuple[int, int] | None = None  # (pid, fd): a forked child opens a file of its own


def _starts_fd() -> int:
    global _file  # noqa: PLW0603 - one file per worker process, opened on first use
    pid = os.getpid()
    if _file is None or _file[0] != pid:
        path = os.path.join(os.environ[STARTS_VARIABLE], f"starts-{pid}.txt")
        _file = (pid, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    return _file[1]


def record(n: int) -> None:
    started = time.time_ns()
    os.write(_starts_fd(), f"{n} {os.getpid()} {started}\n".encode())


def setting(name: str) -> str:
    """A variable the benchmark sets for the peer's processes; a clear error when one is run by hand."""
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run this through `python -m benchmarks.peers`")
    return value
