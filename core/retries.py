"""What becomes of a run when an attempt ends: done, retried after a backoff, failed, or dead-lettered."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from jobmesh.core.attempts import AttemptEnd, AttemptOutcome, AttemptRef
from jobmesh.core.backoff import backoff_delay
from jobmesh.core.error_types import FINAL_ERROR_TYPES
from jobmesh.core.states import RETRYABLE_ATTEMPT_STATES, RunState
from jobmesh.core.timestamps import to_timedelta
from jobmesh.v1 import job_pb2

DEFAULT_INITIAL_BACKOFF = timedelta(seconds=1)
DEFAULT_MULTIPLIER = 2.0
DEFAULT_MAX_BACKOFF = timedelta(minutes=5)
# Errors that another attempt cannot cure, whatever the job's policy says: the run fails, or dead-letters when
# it had a retry policy, at once rather than after burning its retries.


def backoff(policy: job_pb2.RetryPolicy, attempt: int, rng: random.Random) -> timedelta:
    """The delay before attempt `attempt + 1`: initial * multiplier^(attempt - 1), capped, plus jitter."""
    initial = (
        to_timedelta(policy.initial_backoff)
        if policy.HasField("initial_backoff")
        else DEFAULT_INITIAL_BACKOFF
    )
    multiplier = policy.backoff_multiplier or DEFAULT_MULTIPLIER
    cap = to_timedelta(policy.max_backoff) if policy.HasField("max_backoff") else DEFAULT_MAX_BACKOFF
    return backoff_delay(initial, attempt, cap=cap, multiplier=multiplier, rng=rng)


def decide(
    ref: AttemptRef,
    outcome: AttemptOutcome,
    policy: job_pb2.RetryPolicy,
    *,
    rng: random.Random,
    executor: str | None,
    decided_at: datetime,
    not_before: datetime | None = None,
) -> AttemptEnd:
    """The run's next state: a retry while the policy allows one, else the outcome itself, or DEAD_LETTERED
    when a retry policy (more than one attempt) was spent."""
    retry_due = None
    run_state = outcome.state
    if outcome.state in RETRYABLE_ATTEMPT_STATES:
        retryable = outcome.error_type not in FINAL_ERROR_TYPES and outcome.error_type not in set(
            policy.non_retryable_error_types
        )
        if retryable and ref.attempt < policy.max_attempts:
            run_state = RunState.SCHEDULED
            # From when the end is known: an attempt whose executor died ends when it was last heard,
            # found a heartbeat timeout later; its retry was due no earlier than that.
            retry_due = max(outcome.end_time, decided_at) + backoff(policy, ref.attempt, rng)
            # Never before the attempt it replaces was due: one claimed ahead of its time whose grant was lost
            # (`NotHeld`, found at once) would otherwise be retried before the run's schedule time.
            if not_before is not None:
                retry_due = max(retry_due, not_before)
        elif policy.max_attempts > 1:
            run_state = RunState.DEAD_LETTERED
    return AttemptEnd(
        ref=ref,
        attempt_state=outcome.state,
        run_state=run_state,
        end_time=outcome.end_time,
        start_time=outcome.start_time,
        exit_code=outcome.exit_code,
        error_type=outcome.error_type,
        error_message=outcome.error_message,
        retry_due_time=retry_due,
        executor=executor,
        times_clamped=outcome.times_clamped,
        result=outcome.result,
    )
