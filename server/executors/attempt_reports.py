"""What executors report about their attempts, turned into store writes and answers.

Knows the store, the attempt lifecycle and the wire messages; not gRPC streams (see api/executor_control). A
malformed attempt reference in a report is ignored, never an error to the stream.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptOutcome, AttemptRef, Dispatchable
from jobmesh.core.dispatch import Handoff, due_within
from jobmesh.core.error_types import ErrorType
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.flow_control import NO_PACING, NO_QUEUE_LIMITS, Pacing
from jobmesh.core.lifecycle import AttemptLifecycle, EndReport, Settled
from jobmesh.core.limits import MAX_ERROR_MESSAGE, MAX_ERROR_TYPE, MAX_LOG_LINE_CHARS, MAX_PROGRESS_MESSAGE
from jobmesh.core.ports.pipeline_store import Claim, ClaimStatus, PipelineStore, ProgressReport
from jobmesh.core.records import LogRecord, RunRecord, RunState
from jobmesh.core.results import with_result
from jobmesh.core.states import ATTEMPT_END_FROM_WIRE, HELD_RUN_STATES, PENDING_RUN_STATES
from jobmesh.core.text import storable
from jobmesh.core.timestamps import set_timestamp, to_datetime
from jobmesh.core.wire_enums import DEFAULT_LOG_STREAM, LOG_STREAM_FROM_WIRE
from jobmesh.server.auth.executor_grants import may_claim, restricts_claims
from jobmesh.server.executors.held_attempts import HeldAttempts
from jobmesh.server.executors.outage_journal import JournalEntry
from jobmesh.server.executors.outage_mode import OutageMode
from jobmesh.server.executors.sessions import cancel_message
from jobmesh.server.principals import ExecutorGrant

log = logging.getLogger(__name__)
# How far an executor's clock may differ from the server's before its reported times count as contradicting
# the server's record.
CLOCK_TOLERANCE = timedelta(seconds=1)
# The error type of an attempt that its executor's new stream does not hold (see `AttemptReports.connected`).

_CLAIM_OUTCOMES = {
    ClaimStatus.GRANTED: pb.CLAIM_OUTCOME_GRANTED,
    ClaimStatus.DUPLICATE: pb.CLAIM_OUTCOME_DUPLICATE,
    ClaimStatus.CANCELLED: pb.CLAIM_OUTCOME_CANCELLED,
    ClaimStatus.STALE: pb.CLAIM_OUTCOME_STALE,
    ClaimStatus.NOT_FOUND: pb.CLAIM_OUTCOME_NOT_FOUND,
    ClaimStatus.DEFERRED: pb.CLAIM_OUTCOME_DEFERRED,
}


_parsed = AttemptRef.from_proto_or_none


def _refs(wire: Iterable[pb.AttemptRef]) -> list[AttemptRef]:
    return [ref for ref in map(_parsed, wire) if ref is not None]


def _instant_of(claim: Claim, now: datetime) -> datetime:
    """When a granted claim's run may start, or a deferred one be claimed again (else `now`)."""
    if claim.run is not None and claim.run.start_time is not None:
        return claim.run.start_time
    return claim.retry_time or now


def _holds(run: RunRecord, executor: str) -> bool:
    return run.state in HELD_RUN_STATES and run.executor == executor


class AttemptReports:
    def __init__(
        self,
        store: PipelineStore,
        lifecycle: AttemptLifecycle,
        clock: Callable[[], datetime],
        *,
        dispatcher: Handoff | None = None,
        immediate_threshold: timedelta = timedelta(minutes=1),
        outage: OutageMode | None = None,
        queue_rates: Mapping[str, Pacing] = NO_PACING,
        queue_limits: Mapping[str, int] = NO_QUEUE_LIMITS,
    ) -> None:
        """`dispatcher` sends retries due within `immediate_threshold` at once (else the watcher does).
        `outage`: what takes the reports while the database is away (none: they fail, and the executor
        sends them again). `queue_rates`: the paced queues' rates, and `queue_limits` the queues' concurrency
        limits, which claims keep to."""
        self._store = store
        self._lifecycle = lifecycle
        self._clock = clock
        self._dispatcher = dispatcher
        self._threshold = immediate_threshold
        self._outage = outage
        self._queue_rates = queue_rates
        self._queue_limits = queue_limits
        # By executor: when each attempt recorded as its own was first left out of its heartbeat batches.
        self._unnamed: dict[str, dict[AttemptRef, datetime]] = {}
        self._unnamed_lock = threading.Lock()

    def held_by(self, executor: str) -> HeldAttempts:
        """What one stream of `executor` holds, asked of this store."""
        return HeldAttempts(executor, self._store, trusted_while_away=self._outage is not None)

    def claims(
        self, executor: str, wire: Sequence[pb.AttemptRef], grant: ExecutorGrant | None = None
    ) -> list[pb.ConnectResponse]:
        """Claims the attempts; those of runs the executor's `grant` does not cover (another queue or
        namespace) are answered NOT_FOUND and logged, as if they did not exist."""
        parsed = [_parsed(item) for item in wire]
        valid = [ref for ref in parsed if ref is not None]
        refused = self._not_granted(executor, valid, grant)
        wanted = [ref for ref in valid if ref not in refused]
        now = self._clock()
        try:
            claims = iter(self._claimed(executor, wanted, now))
        except StoreUnavailable:
            if self._outage is None or (grant is not None and restricts_claims(grant)):
                raise
            claims = iter(self._fenced(executor, wanted, now))
        results = []
        for item, ref in zip(wire, parsed, strict=True):
            result = pb.ClaimResult(attempt=item, outcome=pb.CLAIM_OUTCOME_NOT_FOUND)
            if ref is not None and ref not in refused:
                status, start = next(claims)
                result.outcome = _CLAIM_OUTCOMES[status]
                if status is ClaimStatus.GRANTED:
                    set_timestamp(result.start_time, max(start, now))
                elif status is ClaimStatus.DEFERRED:
                    set_timestamp(result.retry_time, start)
            results.append(result)
        return [pb.ConnectResponse(claim_results=pb.ClaimResultBatch(results=results))]

    def _claimed(
        self, executor: str, wanted: Sequence[AttemptRef], now: datetime
    ) -> list[tuple[ClaimStatus, datetime]]:
        """Each claim's status through the store, in order, and the instant a granted one may start (its
        due time, or later for a paced queue), or a deferred one be claimed again. An attempt whose outage
        fence another executor holds is a duplicate, not asked."""
        others = self._outage.fenced_by_others(wanted, executor) if self._outage else set()
        asking = [ref for ref in wanted if ref not in others]
        asked = iter(
            self._store.claim(
                asking,
                executor,
                now,
                queue_rates=self._queue_rates,
                queue_limits=self._queue_limits,
                clock=self._clock,
            )
            if asking
            else []
        )
        statuses = []
        for ref in wanted:
            if ref in others:
                statuses.append((ClaimStatus.DUPLICATE, now))
                continue
            claim = next(asked)
            statuses.append((claim.status, _instant_of(claim, now)))
        return statuses

    def _fenced(
        self, executor: str, wanted: Sequence[AttemptRef], now: datetime
    ) -> list[tuple[ClaimStatus, datetime]]:
        """The claims granted on their outage fences, the database away (`OutageMode.fence`); the executor
        starts each at its due time, which its message carries."""
        assert self._outage is not None
        granted = self._outage.fence(executor, list(dict.fromkeys(wanted)), now)
        statuses, seen = [], set()
        for ref in wanted:
            status = ClaimStatus.GRANTED if ref in granted and ref not in seen else ClaimStatus.DUPLICATE
            seen.add(ref)
            statuses.append((status, now))
        return statuses

    def apply_journaled(self, entry: JournalEntry) -> None:
        """A report journaled while the database was away, applied as of its time (`OutageMode`). Log lines
        and progress are checked against what the executor holds now, as the stream could not then."""
        request, executor, at = entry.request, entry.executor, entry.at
        kind = request.WhichOneof("message")
        if kind == "claims":
            self._apply_fenced_claims(executor, _refs(request.claims.attempts), at)
        elif kind == "results":
            self._claim_fenced_elsewhere(executor, _refs(r.attempt for r in request.results.results), at)
            self.results(executor, request.results.results, at)
        elif kind == "logs":
            chunks = request.logs.chunks
            self._claim_fenced_elsewhere(executor, _refs(c.attempt for c in chunks), at)
            refused = HeldAttempts(executor, self._store).refused(_refs(c.attempt for c in chunks), kind)
            self.logs(executor, [chunk for chunk in chunks if _parsed(chunk.attempt) not in refused], at)
        elif kind == "progress":
            updates = request.progress.updates
            self._claim_fenced_elsewhere(executor, _refs(u.attempt for u in updates), at)
            refused = HeldAttempts(executor, self._store).refused(_refs(u.attempt for u in updates), kind)
            self.progress(executor, [u for u in updates if _parsed(u.attempt) not in refused], at)

    def _claim_fenced_elsewhere(
        self, executor: str, refs: Sequence[AttemptRef], at: datetime
    ) -> list[AttemptRef]:
        """The attempts of a journaled report whose fence `executor` holds, claimed as of the report's time
        if they are not yet: their claim is in another server's journal, not applied yet (the executor's
        stream moved during the outage), and the report would otherwise be refused and lost. Returns them."""
        if self._outage is None or not refs:
            return []
        mine = self._outage.fenced_by(refs, executor)
        current = self._store.attempts(sorted(mine)) if mine else {}
        waiting = [
            ref for ref in sorted(mine) if ref in current and current[ref].run.state in PENDING_RUN_STATES
        ]
        if waiting:
            self._store.claim(waiting, executor, at, on_fence=True)
        return waiting

    def _end_fenced_elsewhere(
        self,
        executor: str,
        refs: Sequence[AttemptRef],
        reported: Mapping[AttemptRef, pb.AttemptResult],
        now: datetime,
    ) -> Settled:
        """Results of attempts granted on their fences while the database was away, come before the journal
        that holds their claim is applied (another server's, or this one's next pass): claimed as of their
        reported start, then ended, rather than refused and lost."""
        claimed = []
        for ref in refs:
            result = reported[ref]
            start = to_datetime(result.start_time) if result.HasField("start_time") else now
            claimed += self._claim_fenced_elsewhere(executor, [ref], min(start, now))
        return self._lifecycle.end(
            [
                EndReport(ref, functools.partial(_outcome, reported[ref], now, executor), executor)
                for ref in claimed
            ]
        )

    def _apply_fenced_claims(self, executor: str, refs: Sequence[AttemptRef], at: datetime) -> None:
        refused = [
            c.ref
            for c in self._store.claim(refs, executor, at, on_fence=True)
            if c.status is not ClaimStatus.GRANTED
        ]
        if refused:
            log.warning(
                "%d claims granted on their fences while the database was away are refused by it now: %s",
                len(refused),
                ", ".join(map(str, refused[:5])),
                extra={"executor": executor},
            )

    @contextlib.contextmanager
    def _journaled_if_away(
        self, executor: str, request: pb.ConnectRequest, at: datetime | None
    ) -> Iterator[None]:
        """What the block writes goes to the journal instead while the database is away, for a report as it
        comes (`at` None); one applied from the journal (`at` its time) raises, and stays journaled."""
        try:
            yield
        except StoreUnavailable:
            if self._outage is None or at is not None:
                raise
            self._outage.journal(executor, request, self._clock())

    def _send_retries(self, retried: Sequence[Dispatchable]) -> None:
        """The retries due within the immediate threshold go out at once; the watcher sends the others."""
        again = due_within(retried, self._clock(), self._threshold)
        if again and self._dispatcher is not None:
            self._dispatcher.dispatch(again)

    def _not_granted(
        self, executor: str, refs: Sequence[AttemptRef], grant: ExecutorGrant | None
    ) -> frozenset[AttemptRef]:
        if grant is None or not restricts_claims(grant) or not refs:
            return frozenset()  # a grant of everything costs no read
        current = self._store.attempts(refs)
        beyond = frozenset(ref for ref in refs if ref in current and not may_claim(grant, current[ref].run))
        if beyond:
            log.warning(
                "executor %s claimed %d runs its credential does not cover (refused): %s",
                executor,
                len(beyond),
                ", ".join(map(str, sorted(beyond)[:5])),
                extra={"executor": executor, "refused": len(beyond)},
            )
        # Not the current attempt of any run (a wrong attempt, or no such run): NOT_FOUND as well, since a
        # STALE would tell an executor that a run beyond its grant exists. Executors treat both alike.
        return beyond | frozenset(ref for ref in refs if ref not in current)

    def connected(self, executor: str, wire: Sequence[pb.AttemptRef]) -> list[pb.ConnectResponse]:
        """A new stream's hello, which names the attempts the executor holds. Any other attempt recorded under
        its name is held by nobody, since one stream holds a name at a time: a grant whose answer was lost
        with the stream before, or an attempt of a process that died and came back under the same name.
        Those end FAILED `NotHeld` and are retried by their policy, rather than kept alive by the executor's
        renewed session for ever. The named ones are then checked as a heartbeat batch."""
        named = set(_refs(wire))
        try:
            held = self._store.attempts_held_by(executor)
        except StoreUnavailable:
            if self._outage is None:
                raise
            held = []  # its orphans are ended at its next connection, or lost to the sweeper
        orphans = [item for item in held if AttemptRef.of(item.run) not in named]
        self._unnamed.pop(executor, None)
        if orphans:
            self._end_not_held(executor, orphans, "connected again without this attempt")
        return self.heartbeats(executor, wire)

    def _end_not_held(self, executor: str, orphans: Sequence[Dispatchable], why: str) -> None:
        now = self._clock()
        settled = self._lifecycle.end(
            [
                EndReport(AttemptRef.of(item.run), functools.partial(_not_held, executor, why, now), executor)
                for item in orphans
            ]
        )
        self._send_retries(settled.retried)
        log.warning(
            "executor %s %s: %d attempts recorded as its own ended NotHeld",
            executor,
            why,
            len(settled.applied),
            extra={"executor": executor, "attempts": sorted(map(str, settled.applied))[:20]},
        )

    def end_unnamed(self, executor: str, wire: Sequence[pb.AttemptRef]) -> None:
        """A heartbeat batch names every attempt its executor holds. An attempt recorded as its own that its
        batches have not named for the attempt's heartbeat timeout is held by nobody (its result was lost on
        the way, say), and ends NotHeld, rather than kept alive by the executor's renewed session until it
        next connects. A claim whose answer was still on its way when a batch left is named by the next."""
        try:
            held = self._store.attempts_held_by(executor)
        except StoreUnavailable:
            return  # judged once the database is back
        now = self._clock()
        named = set(_refs(wire))
        unnamed = {AttemptRef.of(item.run): item for item in held if AttemptRef.of(item.run) not in named}
        with self._unnamed_lock:
            since = self._unnamed.setdefault(executor, {})
            for ref in set(since) - set(unnamed):
                del since[ref]
            for ref in unnamed:
                since.setdefault(ref, now)
            orphans = [
                item for ref, item in unnamed.items() if now - since[ref] >= item.run.heartbeat_timeout
            ]
            for item in orphans:
                del since[AttemptRef.of(item.run)]
        if orphans:
            self._end_not_held(executor, orphans, "left this attempt out of its heartbeats for its timeout")

    def heartbeats(self, executor: str, wire: Sequence[pb.AttemptRef]) -> list[pb.ConnectResponse]:
        """Checks which attempts of a heartbeat batch this executor still holds: the answer names them (it is
        sent once the executor's session is renewed, `SessionRenewals`), the others are fenced, and cancels
        still pending are sent again. The session's renewal keeps the held ones alive; those recorded as the
        executor's that its batches leave out for long are ended (`end_unnamed`)."""
        self.end_unnamed(executor, wire)
        refs = _refs(wire)
        if not refs:
            return [pb.ConnectResponse(heartbeat_answer=pb.HeartbeatAnswer())] if wire else []
        try:
            current = self._store.attempts(refs)
        except StoreUnavailable:
            if self._outage is None:
                raise
            # The database away, nothing can be checked, and no attempt is judged until it is back (the
            # sweeper waits a heartbeat timeout): they go on.
            kept = [ref.to_proto() for ref in refs]
            return [pb.ConnectResponse(heartbeat_answer=pb.HeartbeatAnswer(kept_alive=kept))]
        held = [ref for ref in refs if ref in current and _holds(current[ref].run, executor)]
        fenced = sorted(set(refs) - set(held))
        cancelling = [ref for ref in held if current[ref].run.state is RunState.CANCELLING]
        kept = [ref.to_proto() for ref in held]
        answers = [pb.ConnectResponse(heartbeat_answer=pb.HeartbeatAnswer(kept_alive=kept))]
        if cancelling:
            answers.append(cancel_message(cancelling, "cancelled"))
        if fenced:
            answers.append(pb.ConnectResponse(acks=pb.AckBatch(fenced=[ref.to_proto() for ref in fenced])))
        return answers

    def progress(
        self, executor: str, updates: Sequence[pb.ProgressUpdate], at: datetime | None = None
    ) -> list[pb.ConnectResponse]:
        """`at`: when they came (a journaled report), else now."""
        reports = []
        for update in updates:
            ref = _parsed(update.attempt)
            if ref is not None and 0.0 <= update.progress <= 1.0:
                message = storable(update.message, MAX_PROGRESS_MESSAGE)
                reports.append(ProgressReport(ref, executor, update.progress, message))
        if reports:
            request = pb.ConnectRequest(progress=pb.ProgressBatch(updates=updates))
            with self._journaled_if_away(executor, request, at):
                self._store.report_progress(reports, at or self._clock())
        return []

    def logs(
        self, executor: str, chunks: Sequence[pb.LogChunk], at: datetime | None = None
    ) -> list[pb.ConnectResponse]:
        """`at`: when they came, for lines journaled without a time of their own (else now)."""
        records = []
        for chunk in chunks:
            ref = _parsed(chunk.attempt)
            if ref is None:
                continue
            for line in chunk.lines:
                records.append(
                    LogRecord(
                        job_id=ref.job_id,
                        run_id=ref.run_id,
                        sequence=0,
                        attempt=ref.attempt,
                        time=to_datetime(line.time) if line.HasField("time") else at or self._clock(),
                        stream=LOG_STREAM_FROM_WIRE.get(line.stream, DEFAULT_LOG_STREAM),
                        text=storable(line.text, MAX_LOG_LINE_CHARS),
                    )
                )
        if records:
            with self._journaled_if_away(executor, pb.ConnectRequest(logs=pb.LogBatch(chunks=chunks)), at):
                self._store.append_attempt_logs(records)
        return []

    def results(
        self, executor: str, results: Sequence[pb.AttemptResult], at: datetime | None = None
    ) -> list[pb.ConnectResponse]:
        """`at`: when they came (a journaled report), else now."""
        reported = {}
        for result in results:
            ref = _parsed(result.attempt)
            if ref is not None and result.state in ATTEMPT_END_FROM_WIRE:
                reported[ref] = result
        now = at or self._clock()
        wire = [result.attempt for result in results]
        try:
            settled = self._lifecycle.end(
                [
                    EndReport(ref, functools.partial(_outcome, result, now, executor), executor)
                    for ref, result in reported.items()
                ]
            )
        except StoreUnavailable:
            if self._outage is None or at is not None:
                raise
            # Journaled: recorded as of now once the database is back.
            self._outage.journal(executor, pb.ConnectRequest(results=pb.ResultBatch(results=results)), now)
            return [pb.ConnectResponse(acks=pb.AckBatch(recorded=wire))]
        if at is None and (unapplied := [ref for ref in reported if ref not in settled.applied]):
            settled = settled.merged(self._end_fenced_elsewhere(executor, unapplied, reported, now))
        self._send_retries(settled.retried)
        acks = pb.AckBatch(
            recorded=[item for item in wire if _parsed(item) in settled.applied],
            fenced=[item for item in wire if _parsed(item) not in settled.applied],
        )
        return [pb.ConnectResponse(acks=acks)]


def _outcome(result: pb.AttemptResult, now: datetime, executor: str, run: RunRecord) -> AttemptOutcome:
    start = to_datetime(result.start_time) if result.HasField("start_time") else None
    end = to_datetime(result.end_time) if result.HasField("end_time") else now
    start, end, clamped = clamp_times(run, start, end, now)
    if clamped:
        log.warning(
            "%s: executor %s reported times that contradict the claim (clamped and flagged)",
            AttemptRef.of(run),
            executor,
            extra={"executor": executor, "run": f"{run.job_id}/{run.run_id}"},
        )
    outcome = AttemptOutcome(
        state=ATTEMPT_END_FROM_WIRE[result.state],
        end_time=end,
        start_time=start,
        exit_code=result.exit_code if result.HasField("exit_code") else None,
        error_type=storable(result.error.type, MAX_ERROR_TYPE) or None,
        error_message=storable(result.error.message, MAX_ERROR_MESSAGE) or None,
        times_clamped=clamped,
    )
    return with_result(outcome, result.result)


def clamp_times(
    run: RunRecord, start: datetime | None, end: datetime, now: datetime
) -> tuple[datetime | None, datetime, bool]:
    """The reported start and end of the run's attempt, kept within the server's own record: no start before
    the claim's start (when the server let it begin) or after now, no end after now or before the start.
    Differences within CLOCK_TOLERANCE are clocks, not contradictions, and are kept. True when it clamped."""
    earliest = run.start_time
    clamped = False
    if start is not None:
        if earliest is not None and start < earliest - CLOCK_TOLERANCE:
            start, clamped = earliest, True
        elif start > now + CLOCK_TOLERANCE:
            start, clamped = now, True
    if end > now + CLOCK_TOLERANCE:
        end, clamped = now, True
    floor = start or earliest
    if floor is not None and end < floor - CLOCK_TOLERANCE:
        end, clamped = floor, True
    return start, end, clamped


def _not_held(executor: str, why: str, now: datetime, run: RunRecord) -> AttemptOutcome:
    message = f"executor {executor} {why}: nobody holds it"
    return AttemptOutcome(RunState.FAILED, now, run.start_time, None, ErrorType.NOT_HELD, message)
