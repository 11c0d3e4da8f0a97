"""What an executor's log lines may be, checked where they arrive, whatever the executor says of itself:

- An attempt leaves at most its namespace's `attempt_log_bytes` of lines in its run's log (the quota: the
  server's default, or the namespace's own); past it, its lines are dropped and one line says so. An
  attempt's namespace is read from the store once, and only when some namespace has a cap of its own. The
  executor keeps its own smaller budget (executor/log_buffer.py); this is the server's, for an executor that
  does not. It is counted per server process, for the most recent REMEMBERED attempts: an attempt whose
  stream moves to another replica may leave up to one more cap there.
- A line's time lies no later than now (a clock far ahead, or a forged time, would date it in the future).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.timestamps import set_timestamp
from jobmesh.v1 import run_pb2

__all__ = ["AttemptLogCaps", "NamespacesOf"]

REMEMBERED = 100_000  # attempts whose count is kept
CLOCK_SKEW = timedelta(seconds=5)  # how far ahead of the server's clock a line's time may be

# The namespaces of attempts (those the store knows), read in one go.
NamespacesOf = Callable[[Sequence[AttemptRef]], Mapping[AttemptRef, str]]


class AttemptLogCaps:
    """Applies the cap and the clamp to the chunks of a log batch (thread-safe: the stream's threads call
    it)."""

    def __init__(
        self,
        limit: int,
        clock: Callable[[], datetime],
        *,
        namespace_limits: Mapping[str, int] | None = None,
        namespaces_of: NamespacesOf | None = None,
    ) -> None:
        """`limit`: the default cap (0: none); `namespace_limits`: the namespaces' own, whose attempts
        `namespaces_of` finds."""
        self._limit = limit
        self._clock = clock
        self._own = {ns: cap for ns, cap in (namespace_limits or {}).items() if cap != limit}
        if self._own and namespaces_of is None:
            raise ValueError("caps of namespaces' own need the attempts' namespaces")
        self._namespaces_of = namespaces_of
        self._lock = threading.Lock()
        self._used: OrderedDict[tuple[str, int], tuple[int, int]] = OrderedDict()  # key → (used, cap)

    def admit(self, chunks: Sequence[pb.LogChunk]) -> list[pb.LogChunk]:
        now = self._clock()
        caps = self._caps_of_new(chunks)
        admitted = []
        with self._lock:
            for chunk in chunks:
                kept = self._within_cap(chunk, now, caps)
                if kept.lines:
                    admitted.append(kept)
        return admitted

    def _caps_of_new(self, chunks: Sequence[pb.LogChunk]) -> dict[tuple[str, int], int]:
        """The caps of the attempts first seen here, when some namespace has a cap of its own (one store
        read, outside the lock)."""
        if not self._own or self._namespaces_of is None:
            return {}
        refs = {(c.attempt.run, c.attempt.attempt): AttemptRef.from_proto_or_none(c.attempt) for c in chunks}
        with self._lock:
            new = {key: ref for key, ref in refs.items() if ref is not None and key not in self._used}
        if not new:
            return {}
        namespaces = self._namespaces_of(list(new.values()))
        return {
            key: self._own.get(namespaces[ref], self._limit) for key, ref in new.items() if ref in namespaces
        }

    def _within_cap(
        self, chunk: pb.LogChunk, now: datetime, caps: Mapping[tuple[str, int], int]
    ) -> pb.LogChunk:
        key = (chunk.attempt.run, chunk.attempt.attempt)
        used, cap = self._used.pop(key, (0, caps.get(key, self._limit)))
        kept = pb.LogChunk(attempt=chunk.attempt)
        for line in chunk.lines:
            if cap and used > cap:  # past the cap, and said so
                break
            size = len(line.text.encode())
            if cap and used + size > cap:
                kept.lines.append(self._marker(now, cap))
                used = cap + 1  # the marker is said once: nothing more is kept
                break
            used += size
            kept.lines.append(line)
            if line.HasField("time") and line.time.seconds > now.timestamp() + CLOCK_SKEW.total_seconds():
                set_timestamp(kept.lines[-1].time, now)
        self._used[key] = (used, cap)
        while len(self._used) > REMEMBERED:
            self._used.popitem(last=False)
        return kept

    @staticmethod
    def _marker(now: datetime, cap: int) -> run_pb2.LogLine:
        line = run_pb2.LogLine(
            stream=run_pb2.LOG_STREAM_SYSTEM,
            text=f"jobmesh: the server's log cap of {cap:,} bytes per attempt is reached:"
            " further lines are dropped",
        )
        set_timestamp(line.time, now)
        return line
