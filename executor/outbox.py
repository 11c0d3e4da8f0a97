"""The outbox: what the executor owes the server (log lines, progress, results), batched and kept across
stream outages.

Results stay until the server acknowledges them and are sent again after every reconnect (the server
records a result once per attempt, so a resend is harmless). Log lines are sent once; while the stream is
down they wait in a bounded buffer, and lines beyond it are counted and reported as dropped. Progress is
coalesced to the latest value per attempt.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.limits import MAX_LOG_LINE_CHARS, MAX_PROGRESS_MESSAGE
from jobmesh.core.text import storable
from jobmesh.executor.clock import now_ns, timestamp_of_ns, within
from jobmesh.v1 import executor_control_pb2 as pb
from jobmesh.v1 import run_pb2

log = logging.getLogger(__name__)

BATCH_BYTES = 1024 * 1024  # a log batch stays well under the gRPC message limit
MAX_RESULTS_PER_MESSAGE = 1000
LINE_OVERHEAD = 48  # what a LogLine costs beyond its text, roughly


@dataclass(slots=True)
class _Line:
    key: AttemptRef
    line: run_pb2.LogLine
    size: int


@dataclass(slots=True)
class _Result:
    result: pb.AttemptResult
    sent: bool = False


class Outbox:
    """Used from the event loop only. `due` is set when a flush should not wait for the next interval."""

    def __init__(
        self, *, flush_lines: int = 500, max_log_bytes: int = 8 << 20, max_results: int = 10_000
    ) -> None:
        self.due = asyncio.Event()
        self._flush_lines = flush_lines
        self._max_log_bytes = max_log_bytes
        self._max_results = max_results
        self._lines: deque[_Line] = deque()
        self._log_bytes = 0
        self._dropped: dict[AttemptRef, int] = {}
        self._progress: dict[AttemptRef, pb.ProgressUpdate] = {}
        self._results: dict[AttemptRef, _Result] = {}
        self._acked = asyncio.Event()
        self._acked.set()

    def log(self, key: AttemptRef, stream: run_pb2.LogStream.ValueType, text: str) -> None:
        at = timestamp_of_ns(now_ns())
        for start in range(0, max(len(text), 1), MAX_LOG_LINE_CHARS):
            piece = storable(text[start : start + MAX_LOG_LINE_CHARS], MAX_LOG_LINE_CHARS)
            size = len(piece) + LINE_OVERHEAD
            if self._log_bytes + size > self._max_log_bytes:
                self._dropped[key] = self._dropped.get(key, 0) + 1
                continue
            line = run_pb2.LogLine(attempt=key.attempt, time=at, stream=stream, text=piece)
            self._lines.append(_Line(key, line, size))
            self._log_bytes += size
        if len(self._lines) >= self._flush_lines:
            self.due.set()

    def progress(self, key: AttemptRef, fraction: float, message: str) -> None:
        message = storable(message, MAX_PROGRESS_MESSAGE)
        self._progress[key] = pb.ProgressUpdate(attempt=key.to_proto(), progress=fraction, message=message)

    def result(self, key: AttemptRef, result: pb.AttemptResult) -> None:
        self._results.pop(key, None)
        if len(self._results) >= self._max_results:
            oldest = next(iter(self._results))
            log.error(
                "result buffer full: dropping the result of %s (the server's sweeper will retry it)", oldest
            )
            del self._results[oldest]
        self._results[key] = _Result(result)
        self._acked.clear()
        self.due.set()

    def acknowledge(self, refs: Iterable[pb.AttemptRef]) -> None:
        for ref in refs:
            if (key := AttemptRef.from_proto_or_none(ref)) is not None:
                self._results.pop(key, None)
        if not self._results:
            self._acked.set()

    def forget(self, key: AttemptRef) -> None:
        """A fenced attempt: nothing more of it is reported."""
        self._results.pop(key, None)
        self._progress.pop(key, None)
        self._dropped.pop(key, None)
        if any(entry.key == key for entry in self._lines):
            kept = [entry for entry in self._lines if entry.key != key]
            self._lines = deque(kept)
            self._log_bytes = sum(entry.size for entry in kept)
        if not self._results:
            self._acked.set()

    def unsend_all(self) -> None:
        """After a reconnect: every unacknowledged result goes again."""
        for entry in self._results.values():
            entry.sent = False
        if self._results:
            self.due.set()

    def awaiting_ack(self) -> list[AttemptRef]:
        """Attempts whose result the server has not acknowledged: still ours to keep alive."""
        return list(self._results)

    @property
    def unacknowledged(self) -> int:
        return len(self._results)

    async def wait_acknowledged(self, timeout: float) -> bool:
        return await within(self._acked.wait(), timeout)

    def take(self) -> list[pb.ConnectRequest]:
        """Everything not yet sent, as requests in sending order: logs (so that an attempt's last lines come
        before its result), progress, then results."""
        self.due.clear()
        requests = self._take_logs()
        if self._progress:
            updates = list(self._progress.values())
            self._progress.clear()
            requests.append(pb.ConnectRequest(progress=pb.ProgressBatch(updates=updates)))
        unsent = [entry for entry in self._results.values() if not entry.sent]
        for start in range(0, len(unsent), MAX_RESULTS_PER_MESSAGE):
            chunk = unsent[start : start + MAX_RESULTS_PER_MESSAGE]
            for entry in chunk:
                entry.sent = True
            results = [entry.result for entry in chunk]
            requests.append(pb.ConnectRequest(results=pb.ResultBatch(results=results)))
        return requests

    def put_back(self, requests: Iterable[pb.ConnectRequest]) -> None:
        """Requests that could not be sent (the stream went down): their logs and results wait again."""
        lines: list[_Line] = []
        for request in requests:
            kind = request.WhichOneof("message")
            if kind == "logs":
                for chunk in request.logs.chunks:
                    key = AttemptRef.from_proto(chunk.attempt)
                    lines += [_Line(key, line, len(line.text) + LINE_OVERHEAD) for line in chunk.lines]
            elif kind == "results":
                for result in request.results.results:
                    if (entry := self._results.get(AttemptRef.from_proto(result.attempt))) is not None:
                        entry.sent = False
            elif kind == "progress":
                for update in request.progress.updates:
                    self._progress.setdefault(AttemptRef.from_proto(update.attempt), update)
        self._lines.extendleft(reversed(lines))
        self._log_bytes += sum(entry.size for entry in lines)

    def _take_logs(self) -> list[pb.ConnectRequest]:
        for key, count in self._dropped.items():
            text = f"jobmesh: {count} log lines dropped (buffer full while the server was unreachable)"
            line = run_pb2.LogLine(
                attempt=key.attempt,
                time=timestamp_of_ns(now_ns()),
                stream=run_pb2.LOG_STREAM_SYSTEM,
                text=text,
            )
            self._lines.append(_Line(key, line, len(text) + LINE_OVERHEAD))
            self._log_bytes += len(text) + LINE_OVERHEAD
        self._dropped.clear()
        requests: list[pb.ConnectRequest] = []
        while self._lines:
            chunks: dict[AttemptRef, list[run_pb2.LogLine]] = {}
            size = count = 0
            while self._lines and size < BATCH_BYTES and count < self._flush_lines:
                entry = self._lines.popleft()
                chunks.setdefault(entry.key, []).append(entry.line)
                size += entry.size
                count += 1
            self._log_bytes -= size
            batch = pb.LogBatch(
                chunks=[pb.LogChunk(attempt=k.to_proto(), lines=v) for k, v in chunks.items()]
            )
            requests.append(pb.ConnectRequest(logs=batch))
        return requests
