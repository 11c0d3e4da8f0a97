"""The executor's log lines on their way to the server: a bounded buffer, and a budget per attempt.

- An attempt leaves at most its budget in the run's log (bytes of UTF-8, and lines); past it, lines are
  counted and not kept, and when the attempt ends one marker line says how many there were and why.
- The buffer holds at most `max_bytes` (each line counted with its overhead). While it is full a command's
  pipes are read no further (`full`, `room`): a job that prints faster than the server takes its lines is
  slowed, not cut. Output that cannot wait (a handler's) is kept up to twice that, then counted, and a marker
  says so.
Memory stays flat however much a job prints: lines wait as plain records and become protobuf in a batch only.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.limits import MAX_LOG_LINE_CHARS
from jobmesh.core.text import storable
from jobmesh.executor.clock import NANOS, now_ns, timestamp_of_ns
from jobmesh.v1 import run_pb2

BATCH_BYTES = 1024 * 1024  # a log batch stays well under the gRPC message limit
LINE_OVERHEAD = 200  # what a waiting line costs in memory beyond its text (measured: its record and key)


@dataclass(slots=True)
class _Line:
    key: AttemptRef
    stream: run_pb2.LogStream.ValueType
    time_ns: int
    text: str
    size: int


@dataclass(slots=True)
class _Budget:
    bytes_left: int
    lines_left: int
    over_lines: int = 0
    over_bytes: int = 0
    unbuffered_lines: int = 0  # not kept because the buffer was full
    unbuffered_bytes: int = 0


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


class LogBuffer:
    """Used from the event loop only."""

    def __init__(self, *, max_bytes: int, attempt_bytes: int, attempt_lines: int, batch_lines: int) -> None:
        self._max_bytes = max_bytes
        self._attempt_bytes = attempt_bytes
        self._attempt_lines = attempt_lines
        self._batch_lines = batch_lines
        self._lines: deque[_Line] = deque()
        self._bytes = 0
        self._budgets: dict[AttemptRef, _Budget] = {}
        self._waiting: dict[AttemptRef, int] = {}  # lines in the buffer, by attempt
        self._room = asyncio.Event()
        self._room.set()

    def __len__(self) -> int:
        return len(self._lines)

    def add(self, key: AttemptRef, stream: run_pb2.LogStream.ValueType, text: str) -> bool:
        """Keeps the text's lines (split at MAX_LOG_LINE_CHARS) within budget; True when a batch is due."""
        budget = self._budgets.setdefault(key, _Budget(self._attempt_bytes, self._attempt_lines))
        at = now_ns()
        for start in range(0, max(len(text), 1), MAX_LOG_LINE_CHARS):
            piece = storable(text[start : start + MAX_LOG_LINE_CHARS], MAX_LOG_LINE_CHARS)
            encoded = len(piece.encode())
            if budget.lines_left <= 0 or budget.bytes_left < encoded:
                budget.over_lines += 1
                budget.over_bytes += encoded
            elif self._bytes >= 2 * self._max_bytes:
                budget.unbuffered_lines += 1
                budget.unbuffered_bytes += encoded
            else:
                budget.lines_left -= 1
                budget.bytes_left -= encoded
                self._append(_Line(key, stream, at, piece, encoded + LINE_OVERHEAD))
        return len(self._lines) >= self._batch_lines

    def spent(self, key: AttemptRef) -> bool:
        """True once a line of the attempt was not kept for its budget: what follows is only counted."""
        budget = self._budgets.get(key)
        return budget is not None and budget.over_lines > 0

    def count_spent(self, key: AttemptRef, lines: int, size: int) -> None:
        """Output past the budget, counted in bulk (a command's pipe, read but not split into lines)."""
        budget = self._budgets.setdefault(key, _Budget(self._attempt_bytes, self._attempt_lines))
        budget.over_lines += lines
        budget.over_bytes += size

    def waiting(self, key: AttemptRef) -> bool:
        return key in self._waiting

    def full(self) -> bool:
        return self._bytes >= self._max_bytes

    async def room(self) -> None:
        """Returns once the buffer is down to half its size."""
        await self._room.wait()

    def finish(self, key: AttemptRef) -> None:
        """The attempt has ended: its marker, if it printed past its budget, and its budget goes."""
        budget = self._budgets.pop(key, None)
        if budget is not None and budget.over_lines:
            limits = f"{_mib(self._attempt_bytes)} or {self._attempt_lines:,} lines"
            self._marker(
                key,
                f"jobmesh: this attempt's log budget ({limits}) was spent: {budget.over_lines:,} more lines "
                f"({_mib(budget.over_bytes)}) were not kept",
            )
        if budget is not None:
            self._unbuffered_marker(key, budget)

    def forget(self, key: AttemptRef) -> None:
        """A fenced attempt: none of its lines is sent."""
        self._budgets.pop(key, None)
        if self._waiting.pop(key, 0):
            self._lines = deque(line for line in self._lines if line.key != key)
            self._bytes = sum(line.size for line in self._lines)
            self._update_room()

    def take(self, batches: int) -> list[pb.ConnectRequest]:
        """Up to `batches` batches of waiting lines, each of at most `batch_lines` lines and BATCH_BYTES (the
        rest waits here, as plain records, rather than as protobuf in the stream's queue)."""
        for key, budget in self._budgets.items():
            self._unbuffered_marker(key, budget)
        requests: list[pb.ConnectRequest] = []
        while self._lines and len(requests) < batches:
            chunks: dict[AttemptRef, list[run_pb2.LogLine]] = {}
            size = count = 0
            while self._lines and size < BATCH_BYTES and count < self._batch_lines:
                line = self._lines.popleft()
                self._count(line.key, -1)
                proto = run_pb2.LogLine(
                    attempt=line.key.attempt,
                    time=timestamp_of_ns(line.time_ns),
                    stream=line.stream,
                    text=line.text,
                )
                chunks.setdefault(line.key, []).append(proto)
                size += line.size
                count += 1
            self._bytes -= size
            batch = pb.LogBatch(
                chunks=[pb.LogChunk(attempt=k.to_proto(), lines=v) for k, v in chunks.items()]
            )
            requests.append(pb.ConnectRequest(logs=batch))
        self._update_room()
        return requests

    def put_back(self, chunks: Iterable[pb.LogChunk]) -> None:
        """Lines that could not be sent (the stream went down) wait again, first."""
        lines = [
            _Line(
                AttemptRef.from_proto(chunk.attempt),
                line.stream,
                line.time.seconds * NANOS + line.time.nanos,
                line.text,
                len(line.text.encode()) + LINE_OVERHEAD,
            )
            for chunk in chunks
            for line in chunk.lines
        ]
        self._lines.extendleft(reversed(lines))
        self._bytes += sum(line.size for line in lines)
        for line in lines:
            self._count(line.key, 1)
        self._update_room()

    def _unbuffered_marker(self, key: AttemptRef, budget: _Budget) -> None:
        if budget.unbuffered_lines:
            self._marker(
                key,
                f"jobmesh: {budget.unbuffered_lines:,} lines ({_mib(budget.unbuffered_bytes)}) were not "
                f"kept: the executor's log buffer ({_mib(2 * self._max_bytes)}) was full, the server being "
                "unreachable or slower than this attempt's output",
            )
            budget.unbuffered_lines = budget.unbuffered_bytes = 0

    def _marker(self, key: AttemptRef, text: str) -> None:
        """A line of jobmesh's own: outside the budget and the buffer's limit."""
        self._append(_Line(key, run_pb2.LOG_STREAM_SYSTEM, now_ns(), text, len(text) + LINE_OVERHEAD))

    def _append(self, line: _Line) -> None:
        self._lines.append(line)
        self._bytes += line.size
        self._count(line.key, 1)
        self._update_room()

    def _count(self, key: AttemptRef, change: int) -> None:
        left = self._waiting.get(key, 0) + change
        if left > 0:
            self._waiting[key] = left
        else:
            self._waiting.pop(key, None)

    def _update_room(self) -> None:
        if self._bytes >= self._max_bytes:
            self._room.clear()
        elif self._bytes <= self._max_bytes // 2:
            self._room.set()
