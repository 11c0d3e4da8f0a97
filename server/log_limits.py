"""What an executor's log lines may be, checked where they arrive, whatever the executor says of itself:

- An attempt leaves at most `limit` bytes of lines in its run's log (the namespace quota
  `quota_attempt_log_bytes`); past it, its lines are dropped and one line says so. The executor keeps its own
  smaller budget (executor/log_buffer.py); this is the server's, for an executor that does not. It is counted
  per server process, for the most recent REMEMBERED attempts: an attempt whose stream moves to another
  replica may leave up to one more cap there.
- A line's time lies no later than now (a clock far ahead, or a forged time, would date it in the future).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.timestamps import to_timestamp
from jobmesh.v1 import run_pb2

__all__ = ["AttemptLogCaps"]

REMEMBERED = 100_000  # attempts whose count is kept
CLOCK_SKEW = timedelta(seconds=5)  # how far ahead of the server's clock a line's time may be


class AttemptLogCaps:
    """Applies the cap and the clamp to the chunks of a log batch (thread-safe: the stream's threads call
    it)."""

    def __init__(self, limit: int, clock: Callable[[], datetime]) -> None:
        self._limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._used: OrderedDict[tuple[str, int], int] = OrderedDict()

    def admit(self, chunks: Sequence[pb.LogChunk]) -> list[pb.LogChunk]:
        now = self._clock()
        admitted = []
        with self._lock:
            for chunk in chunks:
                kept = self._within_cap(chunk, now)
                if kept.lines:
                    admitted.append(kept)
        return admitted

    def _within_cap(self, chunk: pb.LogChunk, now: datetime) -> pb.LogChunk:
        key = (chunk.attempt.run, chunk.attempt.attempt)
        used = self._used.pop(key, 0)
        kept = pb.LogChunk(attempt=chunk.attempt)
        for line in chunk.lines:
            if self._limit and used > self._limit:  # past the cap, and said so
                break
            size = len(line.text.encode())
            if self._limit and used + size > self._limit:
                kept.lines.append(self._marker(now))
                used = self._limit + 1  # the marker is said once: nothing more is kept
                break
            used += size
            kept.lines.append(line)
            if line.HasField("time") and line.time.seconds > now.timestamp() + CLOCK_SKEW.total_seconds():
                kept.lines[-1].time.CopyFrom(to_timestamp(now))
        self._used[key] = used
        while len(self._used) > REMEMBERED:
            self._used.popitem(last=False)
        return kept

    def _marker(self, now: datetime) -> run_pb2.LogLine:
        line = run_pb2.LogLine(
            stream=run_pb2.LOG_STREAM_SYSTEM,
            text=f"jobmesh: the server's log cap of {self._limit:,} bytes per attempt is reached:"
            " further lines are dropped",
        )
        line.time.CopyFrom(to_timestamp(now))
        return line
