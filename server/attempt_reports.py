"""What executors report about their attempts, turned into store writes and answers.

Knows the store, the retry rules and the dead-letter topic; not gRPC streams (see api/executor_control).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from jobmesh.core.dispatch import BackgroundDispatcher, Dispatcher, retried, send_dead_letters
from jobmesh.core.ports.pipeline_store import (
    AttemptEnd,
    AttemptRef,
    ClaimStatus,
    Dispatchable,
    Heartbeat,
    PipelineStore,
    ProgressReport,
)
from jobmesh.core.ports.queue import RunQueue
from jobmesh.core.ports.signals import AttemptKey
from jobmesh.core.records import LogRecord, RunState
from jobmesh.core.retries import Outcome, decide
from jobmesh.core.timestamps import to_datetime, to_timestamp
from jobmesh.server.sessions import cancel_message
from jobmesh.server.validation import parse_run_name
from jobmesh.v1 import executor_control_pb2 as pb
from jobmesh.v1 import job_pb2, run_pb2

log = logging.getLogger(__name__)

_CLAIM_OUTCOMES = {
    ClaimStatus.GRANTED: pb.CLAIM_OUTCOME_GRANTED,
    ClaimStatus.DUPLICATE: pb.CLAIM_OUTCOME_DUPLICATE,
    ClaimStatus.CANCELLED: pb.CLAIM_OUTCOME_CANCELLED,
    ClaimStatus.STALE: pb.CLAIM_OUTCOME_STALE,
    ClaimStatus.NOT_FOUND: pb.CLAIM_OUTCOME_NOT_FOUND,
}
_FINAL_STATES = {
    run_pb2.RUN_STATE_SUCCEEDED: RunState.SUCCEEDED,
    run_pb2.RUN_STATE_FAILED: RunState.FAILED,
    run_pb2.RUN_STATE_TIMED_OUT: RunState.TIMED_OUT,
    run_pb2.RUN_STATE_CANCELLED: RunState.CANCELLED,
}
_STREAMS = {
    run_pb2.LOG_STREAM_STDOUT: "STDOUT",
    run_pb2.LOG_STREAM_STDERR: "STDERR",
    run_pb2.LOG_STREAM_SYSTEM: "SYSTEM",
}
MAX_LOG_LINE = 16 * 1024


def parse_ref(ref: pb.AttemptRef) -> AttemptRef | None:
    """An AttemptRef from the wire, or None for a malformed one (ignored, never an error to the stream)."""
    try:
        job_id, run_id = parse_run_name(ref.run)
    except Exception:
        return None
    return AttemptRef(job_id, run_id, ref.attempt)


def wire_ref(ref: AttemptRef) -> pb.AttemptRef:
    return pb.AttemptRef(run=ref.run_name, attempt=ref.attempt)


def _refs(wire: Iterable[pb.AttemptRef]) -> list[AttemptRef]:
    return [ref for ref in (parse_ref(item) for item in wire) if ref is not None]


class AttemptReports:
    def __init__(
        self,
        store: PipelineStore,
        queue: RunQueue,
        clock: Callable[[], datetime],
        *,
        dispatcher: Dispatcher | BackgroundDispatcher | None = None,
        immediate_threshold: timedelta = timedelta(minutes=1),
        rng: random.Random | None = None,
    ) -> None:
        """`dispatcher` sends retries due within `immediate_threshold` at once (else the watcher does)."""
        self._store = store
        self._queue = queue
        self._clock = clock
        self._dispatcher = dispatcher
        self._threshold = immediate_threshold
        self._rng = rng or random.Random()

    def claims(self, executor: str, wire: Sequence[pb.AttemptRef]) -> list[pb.ConnectResponse]:
        parsed = [parse_ref(item) for item in wire]
        valid = [ref for ref in parsed if ref is not None]
        claims = iter(self._store.claim(valid, executor, self._clock()) if valid else [])
        results = []
        for item, ref in zip(wire, parsed, strict=True):
            result = pb.ClaimResult(attempt=item, outcome=pb.CLAIM_OUTCOME_NOT_FOUND)
            if ref is not None:
                claim = next(claims)
                result.outcome = _CLAIM_OUTCOMES[claim.status]
                if claim.run is not None:
                    result.start_time.CopyFrom(to_timestamp(max(claim.run.due_time, self._clock())))
            results.append(result)
        return [pb.ConnectResponse(claim_results=pb.ClaimResultBatch(results=results))]

    def heartbeats(self, executor: str, wire: Sequence[pb.AttemptRef]) -> list[pb.ConnectResponse]:
        """Extends the held attempts' deadlines; answers with the fenced ones and re-sends pending cancels."""
        refs = _refs(wire)
        if not refs:
            return []
        now = self._clock()
        current = self._store.attempts(refs)
        beats = [Heartbeat(ref, now + current[ref].run.heartbeat_timeout) for ref in refs if ref in current]
        fenced = set(self._store.heartbeat(executor, beats, now)) | {
            ref for ref in refs if ref not in current
        }
        cancelling = [
            AttemptKey(ref.run_name, ref.attempt)
            for ref in refs
            if ref in current and current[ref].run.state is RunState.CANCELLING and ref not in fenced
        ]
        answers = []
        if cancelling:
            answers.append(cancel_message(cancelling, "cancelled"))
        if fenced:
            answers.append(
                pb.ConnectResponse(acks=pb.AckBatch(fenced=[wire_ref(ref) for ref in sorted(fenced)]))
            )
        return answers

    def progress(self, executor: str, updates: Sequence[pb.ProgressUpdate]) -> list[pb.ConnectResponse]:
        reports = []
        for update in updates:
            ref = parse_ref(update.attempt)
            if ref is not None and 0.0 <= update.progress <= 1.0:
                reports.append(ProgressReport(ref, executor, update.progress, update.message[:1024]))
        if reports:
            self._store.report_progress(reports, self._clock())
        return []

    def logs(self, executor: str, chunks: Sequence[pb.LogChunk]) -> list[pb.ConnectResponse]:
        records = []
        for chunk in chunks:
            ref = parse_ref(chunk.attempt)
            if ref is None:
                continue
            for line in chunk.lines:
                records.append(
                    LogRecord(
                        job_id=ref.job_id,
                        run_id=ref.run_id,
                        sequence=0,
                        attempt=ref.attempt,
                        time=to_datetime(line.time) if line.HasField("time") else self._clock(),
                        stream=_STREAMS.get(line.stream, "STDOUT"),
                        text=line.text[:MAX_LOG_LINE].replace("\x00", ""),
                    )
                )
        if records:
            self._store.append_attempt_logs(records)
        return []

    def results(self, executor: str, results: Sequence[pb.AttemptResult]) -> list[pb.ConnectResponse]:
        outcomes = {}
        for result in results:
            ref = parse_ref(result.attempt)
            if ref is not None and result.state in _FINAL_STATES:
                outcomes[ref] = _outcome(result, self._clock())
        current = self._store.attempts(list(outcomes)) if outcomes else {}
        ends = [
            self._decide(ref, outcome, current[ref], executor)
            for ref, outcome in outcomes.items()
            if ref in current
        ]
        applied = set(self._store.finish_attempts(ends)) if ends else set()
        spent = [current[e.ref] for e in ends if e.ref in applied and e.run_state is RunState.DEAD_LETTERED]
        send_dead_letters(self._queue, spent, self._clock())
        soon = self._clock() + self._threshold
        again = [item for item in retried(ends, applied, current) if item.run.due_time <= soon]
        if again and self._dispatcher is not None:
            self._dispatcher.dispatch(again)
        wire = [result.attempt for result in results]
        acks = pb.AckBatch(
            recorded=[item for item in wire if parse_ref(item) in applied],
            fenced=[item for item in wire if parse_ref(item) not in applied],
        )
        return [pb.ConnectResponse(acks=acks)]

    def _decide(
        self, ref: AttemptRef, outcome: Outcome, current: Dispatchable, executor: str | None
    ) -> AttemptEnd:
        policy = job_pb2.Job.FromString(current.spec).retry_policy
        if current.run.state is RunState.CANCELLING and outcome.state is not RunState.SUCCEEDED:
            outcome = Outcome(
                RunState.CANCELLED,
                outcome.end_time,
                outcome.start_time,
                outcome.exit_code,
                "Cancelled",
                current.run.error_message or "cancelled",
            )
        return decide(ref, outcome, policy, rng=self._rng, executor=executor)


def _outcome(result: pb.AttemptResult, now: datetime) -> Outcome:
    return Outcome(
        state=_FINAL_STATES[result.state],
        end_time=to_datetime(result.end_time) if result.HasField("end_time") else now,
        start_time=to_datetime(result.start_time) if result.HasField("start_time") else None,
        exit_code=result.exit_code if result.HasField("exit_code") else None,
        error_type=result.error.type[:256] or None,
        error_message=result.error.message[:4096] or None,
    )
