"""The attempt lifecycle on in-process adapters (SQLite, the in-process queue): every branch of ending an
attempt, as the server's stream results and the watcher's sweeper both take it."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from google.protobuf import duration_pb2

from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.migrate import upgrade
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.attempts import AttemptEnd, AttemptOutcome, AttemptRef, Dispatchable
from jobmesh.core.definitions import SchedulingPolicy, build_job
from jobmesh.core.errors import StoreFailure
from jobmesh.core.lifecycle import AttemptLifecycle, EndReport, Settled
from jobmesh.core.ports.queue import QueueUnavailable
from jobmesh.core.ports.store import NewJob
from jobmesh.core.records import RunState
from jobmesh.v1 import job_pb2

NOW = datetime.now(UTC).replace(microsecond=0)
EXECUTOR = "executor-1"


class DeadLetterTopicDown(MemoryRunQueue):
    def publish_dead_letters(
        self, runs: Sequence[dispatch_pb2.DispatchedRun], *, timeout: float = 5.0
    ) -> None:
        raise QueueUnavailable("the broker is away")


@pytest.fixture
def store(tmp_path: Path, migrated_sqlite: Callable[[Path], str]) -> Iterator[SqlStore]:
    store = open_store(migrated_sqlite(tmp_path / "store.db"))
    yield store
    store.close()


@pytest.fixture
def queue() -> MemoryRunQueue:
    return MemoryRunQueue()


def lifecycle(store: SqlStore, queue: MemoryRunQueue) -> AttemptLifecycle:
    return AttemptLifecycle(store, queue, lambda: NOW, rng=random.Random(7))


def running(store: SqlStore, max_attempts: int = 3, job_id: str = "job") -> Dispatchable:
    """An immediate job whose run an executor has claimed: RUNNING on attempt 1."""
    spec = job_pb2.Job(
        schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()),
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])),
        retry_policy=job_pb2.RetryPolicy(
            max_attempts=max_attempts, initial_backoff=duration_pb2.Duration(seconds=2)
        ),
    )
    record, first = build_job(job_id, spec, NOW, SchedulingPolicy())
    assert first is not None
    store.create_jobs([NewJob(record, first)])
    return claimed(store, AttemptRef.of(first))


def claimed(store: SqlStore, ref: AttemptRef, executor: str = EXECUTOR) -> Dispatchable:
    [claim] = store.claim([ref], executor, NOW)
    assert claim.run is not None, claim.status
    return store.attempts([ref])[ref]


def outcome(state: RunState, error_type: str | None = None) -> AttemptOutcome:
    message = f"it {state.value.lower()}" if error_type else None
    return AttemptOutcome(state, NOW + timedelta(seconds=1), NOW, 1, error_type, message)


def report(current: Dispatchable, ended: AttemptOutcome, executor: str | None = EXECUTOR) -> EndReport:
    """`current`'s attempt ended as `ended`, whatever its run holds when the end is written."""
    return EndReport(AttemptRef.of(current.run), lambda _: ended, executor)


def end_one(
    life: AttemptLifecycle, current: Dispatchable, ended: AttemptOutcome, executor: str | None = EXECUTOR
) -> Settled:
    return life.end([report(current, ended, executor)])


def test_a_success_ends_the_run(store: SqlStore, queue: MemoryRunQueue) -> None:
    current = running(store)
    settled = end_one(lifecycle(store, queue), current, outcome(RunState.SUCCEEDED))
    assert settled == Settled(frozenset({AttemptRef.of(current.run)}), (), ())
    run = store.get_run(current.run.job_id, current.run.run_id)
    assert (run.state, run.attempt, run.exit_code) == (RunState.SUCCEEDED, 1, 1)
    assert queue.dead_letters() == []


def test_a_failure_with_attempts_left_is_retried_after_the_backoff(
    store: SqlStore, queue: MemoryRunQueue
) -> None:
    current = running(store, max_attempts=3)
    settled = end_one(lifecycle(store, queue), current, outcome(RunState.FAILED, "ExitCode"))
    [retried] = settled.retried
    run = store.get_run(current.run.job_id, current.run.run_id)
    assert (run.state, run.attempt) == (RunState.SCHEDULED, 2)
    # The backoff starts at the attempt's end: 2 s, stretched by up to 10% of jitter.
    assert timedelta(seconds=2) <= run.due_time - (NOW + timedelta(seconds=1)) <= timedelta(seconds=2.2)
    assert (retried.run.attempt, retried.run.state, retried.run.due_time) == (
        2,
        RunState.SCHEDULED,
        run.due_time,
    )
    assert retried.job == current.job
    [first] = run.previous_attempts
    assert (first.attempt, first.state, first.error_type) == (1, RunState.FAILED, "ExitCode")
    assert settled.dead_lettered == ()


def test_a_failure_of_the_last_attempt_is_dead_lettered_and_copied_to_the_topic(
    store: SqlStore, queue: MemoryRunQueue
) -> None:
    life = lifecycle(store, queue)
    first = running(store, max_attempts=2)
    [again] = end_one(life, first, outcome(RunState.FAILED, "ExitCode")).retried
    second = claimed(store, AttemptRef.of(again.run))
    settled = end_one(life, second, outcome(RunState.TIMED_OUT, "Timeout"))
    assert settled.retried == ()
    assert [item.run.run_id for item in settled.dead_lettered] == [first.run.run_id]
    run = store.get_run(first.run.job_id, first.run.run_id)
    assert (run.state, run.attempt, run.error_type) == (RunState.DEAD_LETTERED, 2, "Timeout")
    [letter] = queue.dead_letters()
    assert (letter.attempt.run, letter.attempt.attempt) == (AttemptRef.of(run).run_name, 2)


def test_a_dead_letter_topic_that_is_down_loses_nothing(store: SqlStore) -> None:
    down = DeadLetterTopicDown()
    current = running(store, max_attempts=1)
    settled = end_one(lifecycle(store, down), current, outcome(RunState.FAILED, "ExitCode"))
    assert settled.applied == {AttemptRef.of(current.run)}
    # One attempt only: no retry policy was spent, so the run is simply FAILED (and kept in the database).
    assert store.get_run(current.run.job_id, current.run.run_id).state is RunState.FAILED


def test_a_run_cancelled_while_running_ends_cancelled_and_is_not_retried(
    store: SqlStore, queue: MemoryRunQueue
) -> None:
    started = running(store, max_attempts=5)
    cancelling = store.cancel_run("job", started.run.run_id, reason="stop it", now=NOW)
    assert cancelling.state is RunState.CANCELLING
    current = store.attempts([AttemptRef.of(cancelling)])[AttemptRef.of(cancelling)]
    settled = end_one(lifecycle(store, queue), current, outcome(RunState.FAILED, "Signal"))
    assert settled.retried == ()
    run = store.get_run("job", cancelling.run_id)
    assert (run.state, run.error_type, run.error_message) == (RunState.CANCELLED, "Cancelled", "stop it")


def test_a_run_cancelled_while_running_that_succeeded_anyway_succeeded(
    store: SqlStore, queue: MemoryRunQueue
) -> None:
    started = running(store)
    cancelling = store.cancel_run("job", started.run.run_id, reason="too late", now=NOW)
    current = store.attempts([AttemptRef.of(cancelling)])[AttemptRef.of(cancelling)]
    end_one(lifecycle(store, queue), current, outcome(RunState.SUCCEEDED))
    assert store.get_run("job", cancelling.run_id).state is RunState.SUCCEEDED


def test_a_report_from_an_executor_that_does_not_hold_the_attempt_is_fenced(
    store: SqlStore, queue: MemoryRunQueue
) -> None:
    current = running(store)
    settled = end_one(lifecycle(store, queue), current, outcome(RunState.SUCCEEDED), executor="impostor")
    assert settled == Settled()
    assert store.get_run(current.run.job_id, current.run.run_id).state is RunState.RUNNING


def test_a_late_report_after_the_sweeper_ended_the_attempt_is_fenced(
    store: SqlStore, queue: MemoryRunQueue
) -> None:
    life = lifecycle(store, queue)
    current = running(store)
    lost = AttemptOutcome(RunState.FAILED, NOW, NOW, None, "HeartbeatLost", "no heartbeat")
    swept = end_one(life, current, lost, executor=None)
    assert swept.applied == {AttemptRef.of(current.run)}
    [retry] = swept.retried
    late = end_one(life, current, outcome(RunState.SUCCEEDED))
    assert late == Settled()
    run = store.get_run(current.run.job_id, current.run.run_id)
    assert (run.state, run.attempt, run.due_time) == (RunState.SCHEDULED, 2, retry.run.due_time)


def test_the_sweeper_ends_a_lost_cancelling_attempt_cancelled(store: SqlStore, queue: MemoryRunQueue) -> None:
    started = running(store)
    cancelling = store.cancel_run("job", started.run.run_id, reason="cancelled by ops", now=NOW)
    current = store.attempts([AttemptRef.of(cancelling)])[AttemptRef.of(cancelling)]
    lost = AttemptOutcome(RunState.FAILED, NOW, NOW, None, "HeartbeatLost", "no heartbeat")
    assert end_one(lifecycle(store, queue), current, lost, executor=None).retried == ()
    run = store.get_run("job", cancelling.run_id)
    assert (run.state, run.error_message) == (RunState.CANCELLED, "cancelled by ops")


def test_many_ends_in_one_call_and_a_repeated_report_counts_once(
    store: SqlStore, queue: MemoryRunQueue
) -> None:
    first, second = running(store, job_id="first"), running(store, job_id="second")
    reports = [
        report(first, outcome(RunState.FAILED, "ExitCode")),
        report(second, outcome(RunState.SUCCEEDED)),
        report(first, outcome(RunState.SUCCEEDED)),  # the last report of an attempt wins
    ]
    settled = lifecycle(store, queue).end(reports)
    assert settled.applied == {AttemptRef.of(first.run), AttemptRef.of(second.run)}
    assert store.get_run("first", first.run.run_id).state is RunState.SUCCEEDED
    assert store.get_run("second", second.run.run_id).state is RunState.SUCCEEDED
    assert lifecycle(store, queue).end([]) == Settled()


class RefusingStore(SqlStore):
    """Refuses, as a database would a NUL in text, every batch holding an end whose message says "poison"."""

    def finish_attempts(
        self, refs: Sequence[AttemptRef], decide: Callable[[Dispatchable], AttemptEnd | None]
    ) -> list[tuple[Dispatchable, AttemptEnd]]:
        def refusing(current: Dispatchable) -> AttemptEnd | None:
            end = decide(current)
            if end is not None and "poison" in (end.error_message or ""):
                raise StoreFailure("value refused")
            return end

        return super().finish_attempts(refs, refusing)


def test_a_report_the_database_refuses_ends_failed_and_retried_not_stuck(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'refusing.db'}"
    upgrade(url)
    store = RefusingStore(url)
    try:
        life = lifecycle(store, MemoryRunQueue())
        poisoned, healthy = running(store, job_id="poisoned"), running(store, job_id="healthy")
        bad = AttemptOutcome(RunState.FAILED, NOW, NOW, 1, "ValueError", "poison")
        settled = life.end([report(poisoned, bad), report(healthy, outcome(RunState.SUCCEEDED))])
        assert settled.applied == {AttemptRef.of(poisoned.run), AttemptRef.of(healthy.run)}
        assert store.get_run("healthy", healthy.run.run_id).state is RunState.SUCCEEDED
        run = store.get_run("poisoned", poisoned.run.run_id)
        assert (run.state, run.attempt) == (RunState.SCHEDULED, 2)  # retried, per its policy
        assert run.previous_attempts[0].error_type == "ResultNotStored"
        assert [item.run.job_id for item in settled.retried] == ["poisoned"]
    finally:
        store.close()
