"""The outbox: what the executor owes the server (log lines, progress, results), batched and kept across
stream outages.

Results stay until the server acknowledges them and are sent again after every reconnect (the server
records a result once per attempt, so a resend is harmless). Log lines are sent once, from a bounded buffer
with a budget per attempt (`log_buffer`). Progress is coalesced to the latest value per attempt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.limits import MAX_PROGRESS_MESSAGE
from jobmesh.core.text import storable
from jobmesh.executor.clock import within
from jobmesh.executor.log_buffer import LogBuffer
from jobmesh.v1 import run_pb2

log = logging.getLogger(__name__)

MAX_RESULTS_PER_MESSAGE = 1000


@dataclass(slots=True)
class _Result:
    result: pb.AttemptResult
    sent: bool = False


class Outbox:
    """Used from the event loop only. `due` is set when a flush should not wait for the next interval."""

    def __init__(
        self,
        *,
        flush_lines: int = 500,
        max_log_bytes: int = 4 << 20,
        attempt_log_bytes: int = 10 << 20,
        attempt_log_lines: int = 100_000,
        max_results: int = 10_000,
    ) -> None:
        self.due = asyncio.Event()
        self.logs = LogBuffer(
            max_bytes=max_log_bytes,
            attempt_bytes=attempt_log_bytes,
            attempt_lines=attempt_log_lines,
            batch_lines=flush_lines,
        )
        self._max_results = max_results
        self._progress: dict[AttemptRef, pb.ProgressUpdate] = {}
        self._results: dict[AttemptRef, _Result] = {}
        self._acked = asyncio.Event()
        self._acked.set()

    def log(self, key: AttemptRef, stream: run_pb2.LogStream.ValueType, text: str) -> None:
        if self.logs.add(key, stream, text):
            self.due.set()

    def progress(self, key: AttemptRef, fraction: float, message: str) -> None:
        message = storable(message, MAX_PROGRESS_MESSAGE)
        self._progress[key] = pb.ProgressUpdate(attempt=key.to_proto(), progress=fraction, message=message)

    def result(self, key: AttemptRef, result: pb.AttemptResult) -> None:
        self.logs.finish(key)  # its last line (a marker, if it printed past its budget) before its result
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
        elif not any(entry.sent for entry in self._results.values()):
            self.due.set()  # the next batch of results may go now

    def forget(self, key: AttemptRef) -> None:
        """A fenced attempt: nothing more of it is reported."""
        self._results.pop(key, None)
        self._progress.pop(key, None)
        self.logs.forget(key)
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

    def take(self, *, log_batches: int = 2**31) -> list[pb.ConnectRequest]:
        """What is not yet sent, as requests in sending order: up to `log_batches` batches of log lines (an
        attempt's last lines come before its result), progress, then the results of the attempts whose lines
        have all gone, unless results sent earlier still wait for their acknowledgement. A server writes a
        stream's results one batch at a time: sending a batch per flush while it is slow would queue them in
        the stream ahead of its heartbeats and claims, where one larger batch costs it a single write."""
        self.due.clear()
        requests = self.logs.take(log_batches)
        if self.logs:
            self.due.set()  # more lines wait: the next flush need not wait for the interval
        if self._progress:
            updates = list(self._progress.values())
            self._progress.clear()
            requests.append(pb.ConnectRequest(progress=pb.ProgressBatch(updates=updates)))
        if any(entry.sent for entry in self._results.values()):
            return requests  # a batch of results in flight: what ends meanwhile goes in the next, at its ack
        unsent = [
            entry for key, entry in self._results.items() if not entry.sent and not self.logs.waiting(key)
        ]
        for start in range(0, len(unsent), MAX_RESULTS_PER_MESSAGE):
            chunk = unsent[start : start + MAX_RESULTS_PER_MESSAGE]
            for entry in chunk:
                entry.sent = True
            results = [entry.result for entry in chunk]
            requests.append(pb.ConnectRequest(results=pb.ResultBatch(results=results)))
        return requests

    def put_back(self, requests: Iterable[pb.ConnectRequest]) -> None:
        """Requests that could not be sent (the stream went down): their logs and results wait again."""
        for request in requests:
            kind = request.WhichOneof("message")
            if kind == "logs":
                self.logs.put_back(request.logs.chunks)
            elif kind == "results":
                for result in request.results.results:
                    if (entry := self._results.get(AttemptRef.from_proto(result.attempt))) is not None:
                        entry.sent = False
            elif kind == "progress":
                for update in request.progress.updates:
                    self._progress.setdefault(AttemptRef.from_proto(update.attempt), update)
