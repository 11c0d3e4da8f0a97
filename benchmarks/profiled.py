"""Runs the `jobmesh` command under cProfile, every Python thread included, timing CPU rather than wall time.

    python -m benchmarks.profiled OUT.prof server --listen 127.0.0.1:50051

cProfile sees one thread; the server and watcher do their database work on `asyncio.to_thread` workers, and
the executor polls Kafka on a thread of its own. So each thread gets a profiler of its own (started by
`threading.setprofile` as the thread begins) timed by `time.thread_time` (CPU time of that thread: waiting on
a socket costs nothing), and at exit they are merged into OUT.prof (`python -m pstats OUT.prof`).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import threading
import time
from types import FrameType
from typing import Any

from jobmesh.processes import command as cli

_profiles: list[cProfile.Profile] = []
_lock = threading.Lock()


def _new_profile() -> cProfile.Profile:
    profile = cProfile.Profile(time.thread_time)
    with _lock:
        _profiles.append(profile)
    return profile


def _thread_start(frame: FrameType, event: str, arg: Any) -> None:
    """Called once in each new thread as its first profile event: replaces itself by a profiler."""
    _new_profile().enable()


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m benchmarks.profiled OUT.prof JOBMESH-ARGS...", file=sys.stderr)
        return 2
    output, args = argv[0], argv[1:]
    threading.setprofile(_thread_start)
    profile = _new_profile()
    profile.enable()
    try:
        return cli.main(args)
    finally:
        profile.disable()
        threading.setprofile(None)
        with _lock:
            profiles = list(_profiles)
        stats: pstats.Stats | None = None
        for each in profiles:
            each.create_stats()
            if not getattr(each, "stats", None):
                continue
            if stats is None:
                stats = pstats.Stats(each)
            else:
                stats.add(each)
        if stats is not None:
            stats.dump_stats(output)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
