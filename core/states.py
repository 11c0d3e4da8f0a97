"""The lifecycle of jobs and runs, in one place: their states, every transition allowed between them and the
event that makes it, the state sets the rest of the mesh reasons with, what an executor's stop becomes, and
the states' wire values.

Adapters persist what this module allows and hold no rule of their own: their guards (`WHERE state IN ...`)
take the sets below (`run_sources`, `job_sources`, `HELD_RUN_STATES`, ...), and a write that no transition
allows raises `TransitionRefused` (FAILED_PRECONDITION at the API). The table is docs/design.md's "State
machine".
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from jobmesh.core.error_types import ErrorType
from jobmesh.core.errors import FailedPrecondition
from jobmesh.v1 import job_pb2, run_pb2


class JobState(enum.StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    DELETED = "DELETED"


class RunState(enum.StrEnum):
    SCHEDULED = "SCHEDULED"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    CANCELLING = "CANCELLING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMED_OUT = "TIMED_OUT"
    DEAD_LETTERED = "DEAD_LETTERED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_RUN_STATES

    @property
    def is_pending(self) -> bool:
        return self in PENDING_RUN_STATES

    @property
    def is_held(self) -> bool:
        return self in HELD_RUN_STATES


class RunEvent(enum.StrEnum):
    """Why a run changes state."""

    DISPATCH = "dispatch"  # handed to the queue
    CLAIM = "claim"  # an executor claimed the attempt: it starts now (or at its due time, claimed ahead)
    # Asked by a user (or by the job's delete): a pending run ends, a running one is asked to stop.
    CANCEL = "cancel"
    # The job was paused, deleted or its schedule changed (or a claim raced that change): a pending run ends.
    WITHDRAW = "withdraw"
    SUCCEED = "succeed"  # the attempt succeeded (a cancel that came too late does not undo it)
    FAIL = "fail"  # the attempt failed, and the run is not retried
    EXPIRE = "expire"  # the attempt's heartbeats stopped (the sweeper), and the run is not retried
    TIME_OUT = "time out"  # the attempt ran past its execution timeout, and the run is not retried
    STOP = "stop"  # the attempt ended cancelled: asked to stop, or a cancel settled whatever it reported
    RETRY = "retry"  # the attempt failed or timed out and the policy allows another: SCHEDULED, attempt + 1
    DEAD_LETTER = "dead-letter"  # the attempt failed or timed out and the retry policy is spent


class JobEvent(enum.StrEnum):
    """Why a job changes state."""

    PAUSE = "pause"
    RESUME = "resume"  # plans again from now
    COMPLETE = "complete"  # the schedule has no more occurrences (the watcher, or an update of the schedule)
    RESCHEDULE = "reschedule"  # an update gave a completed job a schedule with occurrences ahead
    UPDATE = "update"  # an update that leaves the state as it is
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class RunTransition:
    source: RunState
    target: RunState
    event: RunEvent


@dataclass(frozen=True, slots=True)
class JobTransition:
    source: JobState
    target: JobState
    event: JobEvent


_S, _Q, _R, _C = RunState.SCHEDULED, RunState.QUEUED, RunState.RUNNING, RunState.CANCELLING

# Every transition a run may make. A run is made SCHEDULED (or already ended, a backfill's past occurrence
# never; see core/definitions.py); a terminal run never changes again.
RUN_TRANSITIONS: tuple[RunTransition, ...] = (
    RunTransition(_S, _Q, RunEvent.DISPATCH),
    RunTransition(_S, _R, RunEvent.CLAIM),
    RunTransition(_Q, _R, RunEvent.CLAIM),
    RunTransition(_S, RunState.CANCELLED, RunEvent.CANCEL),
    RunTransition(_Q, RunState.CANCELLED, RunEvent.CANCEL),
    RunTransition(_S, RunState.CANCELLED, RunEvent.WITHDRAW),
    RunTransition(_Q, RunState.CANCELLED, RunEvent.WITHDRAW),
    RunTransition(_R, _C, RunEvent.CANCEL),
    RunTransition(_R, RunState.SUCCEEDED, RunEvent.SUCCEED),
    RunTransition(_C, RunState.SUCCEEDED, RunEvent.SUCCEED),
    RunTransition(_R, RunState.FAILED, RunEvent.FAIL),
    RunTransition(_R, RunState.FAILED, RunEvent.EXPIRE),
    RunTransition(_R, RunState.TIMED_OUT, RunEvent.TIME_OUT),
    RunTransition(_R, RunState.CANCELLED, RunEvent.STOP),
    RunTransition(_C, RunState.CANCELLED, RunEvent.STOP),
    RunTransition(_R, _S, RunEvent.RETRY),
    RunTransition(_R, RunState.DEAD_LETTERED, RunEvent.DEAD_LETTER),
)

_A, _P, _D = JobState.ACTIVE, JobState.PAUSED, JobState.COMPLETED

# Every transition a job may make. A deleted job is gone: nothing leaves DELETED.
JOB_TRANSITIONS: tuple[JobTransition, ...] = (
    JobTransition(_A, _P, JobEvent.PAUSE),
    JobTransition(_P, _A, JobEvent.RESUME),
    JobTransition(_A, _D, JobEvent.COMPLETE),
    JobTransition(_D, _A, JobEvent.RESCHEDULE),
    JobTransition(_A, _A, JobEvent.UPDATE),
    JobTransition(_P, _P, JobEvent.UPDATE),
    JobTransition(_D, _D, JobEvent.UPDATE),
    JobTransition(_A, JobState.DELETED, JobEvent.DELETE),
    JobTransition(_P, JobState.DELETED, JobEvent.DELETE),
    JobTransition(_D, JobState.DELETED, JobEvent.DELETE),
)


def run_sources(*events: RunEvent, target: RunState | None = None) -> frozenset[RunState]:
    """The states from which one of `events` moves a run (to `target`, when given): the guard of the write
    that makes it."""
    return frozenset(t.source for t in RUN_TRANSITIONS if t.event in events and target in (None, t.target))


def in_order(states: frozenset[RunState] | frozenset[JobState]) -> tuple[str, ...]:
    """A set's stored values in a fixed order: a statement built from it reads the same in every process."""
    return tuple(sorted(state.value for state in states))


# The state sets, derived from the table where it says them.
# Not yet claimed by an executor (SCHEDULED, QUEUED): what a pause, a delete or a schedule change withdraws.
PENDING_RUN_STATES = run_sources(RunEvent.CLAIM)
# Held by an executor (RUNNING, CANCELLING): an attempt runs (or is stopping); its reports pass the fence.
HELD_RUN_STATES = run_sources(RunEvent.SUCCEED)
# Ended: no transition leaves these.
TERMINAL_RUN_STATES = frozenset(RunState) - {t.source for t in RUN_TRANSITIONS}
# On the queue or with an executor: what counts against a job's runs at once.
ACTIVE_RUN_STATES = frozenset({_Q}) | HELD_RUN_STATES
# Ended by a failure: what a replay may start again (a new run, not a transition); a trace marks them errors.
FAILED_RUN_STATES = frozenset({RunState.FAILED, RunState.TIMED_OUT, RunState.DEAD_LETTERED})
REPLAYABLE_RUN_STATES = FAILED_RUN_STATES
# How an attempt ended that a retry policy may answer with another attempt (RETRY, or DEAD_LETTER when spent).
RETRYABLE_ATTEMPT_STATES = frozenset({RunState.FAILED, RunState.TIMED_OUT})
# How an attempt may end, as its executor or the sweeper tells it.
ATTEMPT_END_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.CANCELLED})
# A job that is not deleted: one that counts, and that its changes may find.
LIVE_JOB_STATES = frozenset(JobState) - {JobState.DELETED}
# A job that makes no runs now (paused or deleted): it has no next run time.
HALTED_JOB_STATES = frozenset({_P, JobState.DELETED})
# A job whose schedule is not done: it makes runs, or will when resumed.
UNFINISHED_JOB_STATES = frozenset({_A, _P})


# The table by source and event, and by source and target: looked up at every attempt's end and cancel.
_RUN_BY_EVENT = {(t.source, t.event): t for t in RUN_TRANSITIONS}
_RUN_BY_STATES: dict[tuple[RunState, RunState], tuple[RunTransition, ...]] = {}
for _transition in RUN_TRANSITIONS:
    _pair = (_transition.source, _transition.target)
    _RUN_BY_STATES[_pair] = (*_RUN_BY_STATES.get(_pair, ()), _transition)
del _transition, _pair


def run_state_after(source: RunState, event: RunEvent) -> RunState:
    """Where `event` takes a run in `source`; TransitionRefused when it takes it nowhere."""
    transition = _RUN_BY_EVENT.get((source, event))
    if transition is None:
        raise TransitionRefused("run", source, event.value)
    return transition.target


def run_transition(source: RunState, target: RunState, *events: RunEvent) -> RunTransition:
    """The transition from `source` to `target` (by one of `events`, when given); TransitionRefused when no
    transition is allowed."""
    for transition in _RUN_BY_STATES.get((source, target), ()):
        if not events or transition.event in events:
            return transition
    raise TransitionRefused("run", source, target.value)


def job_sources(target: JobState) -> frozenset[JobState]:
    """The states from which a job may move to `target`: the guard of the write that makes it."""
    return frozenset(t.source for t in JOB_TRANSITIONS if t.target is target)


def job_transition(source: JobState, target: JobState) -> JobTransition:
    for transition in JOB_TRANSITIONS:
        if transition.source is source and transition.target is target:
            return transition
    raise TransitionRefused("job", source, target.value)


def job_may_move(source: JobState, target: JobState) -> bool:
    return source in job_sources(target)


# Cancellable: a cancel ends a pending run at once and asks a running one to stop; others it leaves.
CANCELLABLE_RUN_STATES = run_sources(RunEvent.CANCEL)


class TransitionRefused(FailedPrecondition):
    """A change of state that no transition allows."""

    reason = "TRANSITION_REFUSED"

    def __init__(self, kind: str, source: JobState | RunState, wanted: str) -> None:
        super().__init__(
            f"a {kind} in state {source.value} cannot go to {wanted}",
            reason="TRANSITION_REFUSED",
            metadata={"kind": kind, "state": source.value, "wanted": wanted},
        )
        self.source = source


# How an executor's stop ends its attempt: the state it reports, and the error type. A fence reports nothing.
class StopReason(enum.Enum):
    CANCEL = "cancelled"  # a cancel from the server or the signal bus: report CANCELLED
    TIMEOUT = "timed out"  # the execution timeout: report TIMED_OUT
    DRAIN = "drained"  # the executor is leaving: report FAILED `Drained`, the server retries elsewhere
    FENCE = "fenced"  # the server gave the attempt up (maybe to another executor): kill, report nothing
    # No heartbeat known to have kept it alive for nearly its timeout: kill, report FAILED `ContactLost`
    # (the server may have retried it elsewhere already; if so the report is fenced)
    CONTACT_LOST = "out of contact with the server"


STOP_OUTCOMES: Mapping[StopReason, tuple[RunState, ErrorType]] = {
    StopReason.CANCEL: (RunState.CANCELLED, ErrorType.CANCELLED),
    StopReason.TIMEOUT: (RunState.TIMED_OUT, ErrorType.TIMEOUT),
    StopReason.DRAIN: (RunState.FAILED, ErrorType.DRAINED),
    StopReason.CONTACT_LOST: (RunState.FAILED, ErrorType.CONTACT_LOST),
}


# The wire's values (jobmesh.v1), both ways. The wire's UNSPECIFIED has no state.
JOB_STATE_TO_WIRE: Mapping[JobState, job_pb2.JobState.ValueType] = {
    state: job_pb2.JobState.Value(f"JOB_STATE_{state.value}") for state in JobState
}
RUN_STATE_TO_WIRE: Mapping[RunState, run_pb2.RunState.ValueType] = {
    state: run_pb2.RunState.Value(f"RUN_STATE_{state.value}") for state in RunState
}
JOB_STATE_FROM_WIRE: Mapping[job_pb2.JobState.ValueType, JobState] = {
    wire: state for state, wire in JOB_STATE_TO_WIRE.items()
}
RUN_STATE_FROM_WIRE: Mapping[run_pb2.RunState.ValueType, RunState] = {
    wire: state for state, wire in RUN_STATE_TO_WIRE.items()
}
# The states an executor may report an attempt ended in, as the wire says them.
ATTEMPT_END_FROM_WIRE: Mapping[run_pb2.RunState.ValueType, RunState] = {
    wire: state for wire, state in RUN_STATE_FROM_WIRE.items() if state in ATTEMPT_END_STATES
}
