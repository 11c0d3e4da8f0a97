from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf import duration_pb2

from jobmesh.core.attempts import AttemptEnd, AttemptOutcome, AttemptRef
from jobmesh.core.error_types import ErrorType
from jobmesh.core.records import RunState
from jobmesh.core.retries import backoff, decide
from jobmesh.v1 import job_pb2

END = datetime(2026, 1, 1, tzinfo=UTC)


def _policy(**fields: object) -> job_pb2.RetryPolicy:
    policy = job_pb2.RetryPolicy(**fields)  # type: ignore[arg-type]
    return policy


def test_backoff_grows_by_the_multiplier_up_to_the_cap_with_bounded_jitter() -> None:
    policy = _policy(max_attempts=10, backoff_multiplier=3)
    policy.initial_backoff.FromSeconds(2)
    policy.max_backoff.FromSeconds(60)
    rng = random.Random(7)
    delays = [backoff(policy, attempt, rng) for attempt in range(1, 7)]
    for attempt, delay in enumerate(delays, start=1):
        base = min(2 * 3 ** (attempt - 1), 60)
        assert timedelta(seconds=base) <= delay <= timedelta(seconds=base * 1.1)
    assert delays[0] < delays[1] < delays[2] < delays[3]


def test_defaults_when_the_policy_leaves_them_out() -> None:
    delay = backoff(_policy(max_attempts=3), 2, random.Random(1))
    assert timedelta(seconds=2) <= delay <= timedelta(seconds=2.2)  # 1 s doubled


def _end(
    attempt: int,
    state: RunState,
    policy: job_pb2.RetryPolicy,
    error: str = "ExitCode",
    *,
    decided_at: datetime = END,
    not_before: datetime | None = None,
) -> AttemptEnd:
    outcome = AttemptOutcome(state, END, error_type=error)
    ref = AttemptRef("j", "r", attempt)
    return decide(
        ref, outcome, policy, rng=random.Random(1), executor="e", decided_at=decided_at, not_before=not_before
    )


def test_a_retry_is_never_due_before_the_attempt_it_replaces() -> None:
    """A run due in 3 s, claimed ahead of its time, whose grant was lost with the stream: the executor, back
    at once, no longer holds it (NotHeld). Its retry is due when the run was, not a backoff after now."""
    policy = _policy(max_attempts=2, initial_backoff=duration_pb2.Duration(seconds=0, nanos=100_000_000))
    due = END + timedelta(seconds=3)
    retry = _end(1, RunState.FAILED, policy, "NotHeld", not_before=due).retry_due_time
    assert retry == due
    later = _end(1, RunState.FAILED, policy, "NotHeld", decided_at=due, not_before=due).retry_due_time
    assert later is not None
    assert later > due  # once due, a backoff after the end as ever


def test_a_retry_is_due_a_backoff_after_the_end_was_known_not_before() -> None:
    """An attempt whose executor died ends when it was last heard; the sweeper finds it a heartbeat timeout
    later, and the retry is due a backoff after that, not in the past."""
    policy = _policy(max_attempts=2, initial_backoff=duration_pb2.Duration(seconds=1))
    found = END + timedelta(seconds=15)
    retry = _end(1, RunState.FAILED, policy, "HeartbeatLost", decided_at=found).retry_due_time
    assert retry is not None
    assert found + timedelta(seconds=1) <= retry <= found + timedelta(seconds=1.1)


def test_failed_attempts_retry_then_dead_letter() -> None:
    policy = _policy(max_attempts=3)
    first = _end(1, RunState.FAILED, policy)
    assert first.run_state is RunState.SCHEDULED
    assert first.retry_due_time is not None
    assert first.retry_due_time > END
    assert _end(2, RunState.TIMED_OUT, policy).run_state is RunState.SCHEDULED
    last = _end(3, RunState.FAILED, policy)
    assert last.run_state is RunState.DEAD_LETTERED
    assert last.attempt_state is RunState.FAILED


def test_no_policy_means_one_attempt_that_simply_fails() -> None:
    assert _end(1, RunState.FAILED, _policy()).run_state is RunState.FAILED


def test_non_retryable_errors_and_successes_are_final() -> None:
    policy = _policy(max_attempts=5, non_retryable_error_types=["BadInput"])
    assert _end(1, RunState.FAILED, policy, "BadInput").run_state is RunState.DEAD_LETTERED
    assert _end(1, RunState.SUCCEEDED, policy).run_state is RunState.SUCCEEDED
    assert _end(1, RunState.CANCELLED, policy).run_state is RunState.CANCELLED


@pytest.mark.parametrize("error", [ErrorType.TARGET_NOT_ALLOWED, ErrorType.SECRET_NOT_FOUND])
def test_a_refused_target_or_a_missing_secret_is_final_whatever_the_policy(error: str) -> None:
    """Another attempt would be refused the same way: the run dead-letters at once, or simply fails."""
    assert _end(1, RunState.FAILED, _policy(max_attempts=5), error).run_state is RunState.DEAD_LETTERED
    assert _end(1, RunState.FAILED, _policy(), error).run_state is RunState.FAILED
    assert _end(1, RunState.FAILED, _policy(max_attempts=5), "SpawnError").run_state is RunState.SCHEDULED
