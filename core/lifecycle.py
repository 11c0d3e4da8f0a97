"""Ending attempts: where an attempt's end becomes a store write, a retry or a dead letter, for every caller.

The server ends the attempts whose results executors report over their streams; the watcher's sweeper ends
those whose heartbeats stopped. Both call `AttemptLifecycle.end`, which, in one transaction and on each run as
it is under the store's lock (a cancel or a heartbeat that came after the report was read counts),
1. settles a run being cancelled: a `CANCELLING` run whose attempt did not succeed ends `CANCELLED`, whatever
   the attempt reported;
2. lets the job's retry policy decide the run's next state (`core.retries`);
3. writes every end, each fenced by its attempt (and by the reporting executor's claim): a late or duplicate
   report changes nothing (invariants 4 and 5);
4. copies the runs whose retries are spent to the dead-letter topic (a report the database refuses is ended as
   FAILED `ResultNotStored` instead, so that its run is retried rather than stuck);
5. returns the runs it scheduled for another attempt, for the caller to hand on (the server dispatches those
   due soon; the watcher holds them in its timer).
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from jobmesh.core.attempts import AttemptEnd, AttemptOutcome, AttemptRef, Dispatchable
from jobmesh.core.dispatch import send_dead_letters
from jobmesh.core.error_types import ErrorType
from jobmesh.core.errors import StoreFailure
from jobmesh.core.hooks import NO_HOOKS, RunHooks
from jobmesh.core.metrics import ATTEMPTS_ENDED, RUN_LATENESS, RUNS_ENDED, RUNS_RETRIED
from jobmesh.core.ports.pipeline_store import PipelineStore
from jobmesh.core.ports.queue import RunQueue
from jobmesh.core.records import RunRecord
from jobmesh.core.retries import decide
from jobmesh.core.states import TERMINAL_RUN_STATES, RunEvent, RunState, run_state_after

log = logging.getLogger(__name__)


RETRY_TRIGGER = "RETRY"  # the lateness histogram's trigger of an attempt after the first

# How an attempt ended, given its run as the store holds it under the end's lock; None leaves it running.
Outcome = Callable[[RunRecord], AttemptOutcome | None]


@dataclass(frozen=True, slots=True)
class EndReport:
    """An attempt that ended, and how: its outcome is made from the run as it is when the end is written, so
    that a cancel or a heartbeat that came in between counts."""

    ref: AttemptRef
    outcome: Outcome
    # The executor that reports it: only its claim lets the end apply. None for the sweeper, whose outcome
    # fences on the heartbeat deadline instead.
    executor: str | None


@dataclass(frozen=True, slots=True)
class Settled:
    """What `end` did: the attempts whose end was written, and which of their runs are retried or spent."""

    applied: frozenset[AttemptRef] = frozenset()
    retried: tuple[Dispatchable, ...] = ()
    dead_lettered: tuple[Dispatchable, ...] = ()

    def merged(self, other: Settled) -> Settled:
        """What two ends did together."""
        return Settled(
            self.applied | other.applied,
            self.retried + other.retried,
            self.dead_lettered + other.dead_lettered,
        )


class AttemptLifecycle:
    def __init__(
        self,
        store: PipelineStore,
        queue: RunQueue,
        clock: Callable[[], datetime],
        *,
        rng: random.Random | None = None,
        hooks: RunHooks = NO_HOOKS,
    ) -> None:
        self._store = store
        self._hooks = hooks
        self._queue = queue
        self._clock = clock
        self._rng = rng or random.Random()

    def end(self, reports: Sequence[EndReport]) -> Settled:
        """Ends the attempts (a ref reported twice counts once, the last report wins). A batch the database
        refuses is ended report by report, and a report it refuses on its own is replaced by a FAILED
        `ResultNotStored`: the run is retried rather than left RUNNING. StoreUnavailable is the caller's."""
        unique = list({report.ref: report for report in reports}.values())
        if not unique:
            return Settled()
        try:
            return self._end(unique)
        except StoreFailure:
            if len(unique) == 1:
                return self._end([_not_stored(unique[0])])
            return _merged([self.end([report]) for report in unique])

    def _end(self, unique: Sequence[EndReport]) -> Settled:
        reports = {report.ref: report for report in unique}
        written = self._store.finish_attempts(list(reports), lambda current: self._decide(reports, current))
        _measure(written)
        self._hooks.end(written)
        spent = tuple(current for current, end in written if end.run_state is RunState.DEAD_LETTERED)
        send_dead_letters(self._queue, spent, self._clock())
        retried = tuple(
            _next_attempt(current, end)
            for current, end in written
            if end.run_state is RunState.SCHEDULED and end.retry_due_time is not None
        )
        return Settled(frozenset(end.ref for _, end in written), retried, spent)

    def _decide(self, reports: Mapping[AttemptRef, EndReport], current: Dispatchable) -> AttemptEnd | None:
        """The end of `current`'s attempt (called by the store, under its lock): the report's outcome, a
        cancel settled, then the job's retry policy."""
        report = reports[AttemptRef.of(current.run)]
        reported = report.outcome(current.run)
        if reported is None:
            return None
        outcome = settle_cancelling(current.run, reported)
        return decide(
            report.ref,
            outcome,
            current.job.retry_policy,
            rng=self._rng,
            executor=report.executor,
            decided_at=self._clock(),
            not_before=current.run.due_time,
        )


def _measure(written: Sequence[tuple[Dispatchable, AttemptEnd]]) -> None:
    """The metrics of the attempts whose end was written: here, once per attempt, whoever ended it. A
    histogram observe per started attempt; the counters once per outcome of the batch."""
    attempts: dict[RunState, int] = {}
    runs: dict[RunState, int] = {}
    retried = 0
    for current, end in written:
        run = current.run
        if end.start_time is not None:
            trigger = run.trigger if run.attempt == 1 else RETRY_TRIGGER
            RUN_LATENESS(run.queue, run.priority, trigger).observe(
                max((end.start_time - run.due_time).total_seconds(), 0.0)
            )
        attempts[end.attempt_state] = attempts.get(end.attempt_state, 0) + 1
        if end.run_state in TERMINAL_RUN_STATES:
            runs[end.run_state] = runs.get(end.run_state, 0) + 1
        elif end.retry_due_time is not None:
            retried += 1
    for state, count in attempts.items():
        ATTEMPTS_ENDED(state).inc(count)
    for state, count in runs.items():
        RUNS_ENDED(state).inc(count)
    if retried:
        RUNS_RETRIED.inc(retried)


def _not_stored(report: EndReport) -> EndReport:
    def outcome(run: RunRecord) -> AttemptOutcome | None:
        reported = report.outcome(run)
        if reported is None:
            return None
        log.error("%s: the database refused its report, ended as ResultNotStored instead", report.ref)
        return AttemptOutcome(
            RunState.FAILED,
            reported.end_time,
            reported.start_time,
            reported.exit_code,
            ErrorType.RESULT_NOT_STORED,
            "the executor's report of this attempt could not be stored; see the server log",
        )

    return EndReport(report.ref, outcome, report.executor)


def _merged(parts: Sequence[Settled]) -> Settled:
    return Settled(
        frozenset().union(*(part.applied for part in parts)),
        tuple(item for part in parts for item in part.retried),
        tuple(item for part in parts for item in part.dead_lettered),
    )


def settle_cancelling(run: RunRecord, outcome: AttemptOutcome) -> AttemptOutcome:
    """A run being cancelled ends as its attempt's stop (CANCELLED, core.states) unless its attempt succeeded:
    a cancel is never retried away."""
    if run.state is not RunState.CANCELLING or outcome.state is RunState.SUCCEEDED:
        return outcome
    return dataclasses.replace(
        outcome,
        state=run_state_after(run.state, RunEvent.STOP),
        error_type=ErrorType.CANCELLED,
        error_message=run.error_message or "cancelled",
    )


def _next_attempt(current: Dispatchable, end: AttemptEnd) -> Dispatchable:
    """The run as the retry left it: on the next attempt, SCHEDULED at the retry's due time."""
    assert end.retry_due_time is not None
    run = dataclasses.replace(
        current.run, attempt=end.ref.attempt + 1, state=RunState.SCHEDULED, due_time=end.retry_due_time
    )
    return Dispatchable(run, current.job)
