"""Attempts: the one identity of an attempt (`AttemptRef`), how one ended (`AttemptOutcome`), and what becomes
of its run (`AttemptEnd`).

`AttemptRef` is the key of an attempt everywhere: in the store's fences, the signal bus, the server's streams
and the executor's books. It converts to and from the wire's `jobmesh.control.v1.AttemptRef` here, and only
here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from jobmesh.control.v1 import executor_control_pb2
from jobmesh.core.errors import InvalidArgument
from jobmesh.core.names import parse_run_name, run_name
from jobmesh.core.records import RunRecord, RunState
from jobmesh.v1 import job_pb2

MAX_ATTEMPT = 2**31 - 1  # the wire's int32


@dataclass(frozen=True, slots=True, order=True)
class AttemptRef:
    """One attempt of one run: the fencing token of every report about it."""

    job_id: str
    run_id: str
    attempt: int

    @classmethod
    def of(cls, run: RunRecord) -> AttemptRef:
        """The run's current attempt."""
        return cls(run.job_id, run.run_id, run.attempt)

    @classmethod
    def parse(cls, name: str, attempt: int, field: str = "attempt") -> AttemptRef:
        """From a run name and an attempt number; INVALID_ARGUMENT, naming `field`, for a malformed one."""
        job_id, run_id = parse_run_name(name, f"{field}.run")
        if not 1 <= attempt <= MAX_ATTEMPT:
            raise InvalidArgument.single(f"{field}.attempt", f"must be 1 to {MAX_ATTEMPT}, got {attempt}")
        return cls(job_id, run_id, attempt)

    @classmethod
    def from_proto(cls, ref: executor_control_pb2.AttemptRef) -> AttemptRef:
        return cls.parse(ref.run, ref.attempt)

    @classmethod
    def from_proto_or_none(cls, ref: executor_control_pb2.AttemptRef) -> AttemptRef | None:
        """For references in batches, where a malformed one is skipped rather than failing the rest."""
        try:
            return cls.parse(ref.run, ref.attempt)
        except InvalidArgument:
            return None

    def to_proto(self) -> executor_control_pb2.AttemptRef:
        return executor_control_pb2.AttemptRef(run=self.run_name, attempt=self.attempt)

    @property
    def run_name(self) -> str:
        return run_name(self.job_id, self.run_id)

    def __str__(self) -> str:
        return f"{self.run_name}#{self.attempt}"


@dataclass(frozen=True, slots=True)
class Dispatchable:
    """A run ready to hand to the queue, with its job's definition: the message its job record's spec holds,
    decoded once by whoever read or stored it (`core.definitions.decode_spec`) and shared, never modified."""

    run: RunRecord
    job: job_pb2.Job


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    """How an attempt ended, as reported by its executor or decided by the sweeper."""

    state: RunState
    end_time: datetime
    # The executor's reported start: checked against the claim and measured, never stored (the claim's is).
    start_time: datetime | None = None
    exit_code: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    # The reported times contradicted the server's record and were clamped to it.
    times_clamped: bool = False
    # What a succeeded handler returned, as JSON text.
    result: str | None = None


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """How an attempt ended and what becomes of its run.

    `run_state` is the run's new state: terminal, or SCHEDULED for a retry (then the run moves to attempt + 1,
    due at `retry_due_time`). `attempt_state` is how this attempt ended, kept in the attempt history.
    """

    ref: AttemptRef
    attempt_state: RunState
    run_state: RunState
    end_time: datetime
    start_time: datetime | None = None
    exit_code: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    retry_due_time: datetime | None = None
    # Only this executor's report applies; None for the sweeper (it fences on the heartbeat deadline instead).
    executor: str | None = None
    times_clamped: bool = False  # see AttemptOutcome
    result: str | None = None  # see AttemptOutcome
