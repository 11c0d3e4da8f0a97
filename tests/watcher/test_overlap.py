"""Overlap policies, applied by the releaser when a cron occurrence is about to start while an earlier run of
its job is still going. Real store (SQLite) and in-process queue and signals."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.adapters.signals.memory import MemorySignalBus
from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.attempts import AttemptRef, Dispatchable
from jobmesh.core.cancels import CancelRouter
from jobmesh.core.definitions import SchedulingPolicy, build_job, heartbeat_timeout_of, new_run
from jobmesh.core.dispatch import Dispatcher
from jobmesh.core.ports.store import NewJob
from jobmesh.core.records import RunState, RunTrigger
from jobmesh.core.shards import ALL_SHARDS
from jobmesh.v1 import job_pb2
from jobmesh.watcher.releaser import Releaser
from jobmesh.watcher.timer import Timer

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def store(tmp_path: Path, migrated_sqlite: Callable[[Path], str]) -> Iterator[SqlStore]:
    store = open_store(migrated_sqlite(tmp_path / "overlap.sqlite3"))
    yield store
    store.close()


def _job(
    store: SqlStore,
    policy: job_pb2.OverlapPolicy.ValueType,
    *,
    earlier: RunState = RunState.RUNNING,
    due_at: datetime = NOW,
    catchup_window: timedelta | None = None,
) -> tuple[Dispatchable, Dispatchable]:
    """A cron job with an earlier run (RUNNING on an executor, or only QUEUED) and the next occurrence due
    at `due_at`."""
    cron = job_pb2.Schedule.Cron(expression="* * * * * *", overlap_policy=policy)
    if catchup_window is not None:
        cron.catchup_window.FromTimedelta(catchup_window)
    spec = job_pb2.Job(
        schedule=job_pb2.Schedule(cron=cron),
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])),
    )
    record, _ = build_job(f"job-{policy}", spec, NOW, SchedulingPolicy(immediate_threshold=timedelta(0)))
    store.create_jobs([NewJob(record)])
    timeout = heartbeat_timeout_of(spec)
    running = new_run(
        record, due_at - timedelta(seconds=5), NOW, RunTrigger.SCHEDULE, heartbeat_timeout=timeout
    )
    due = new_run(record, due_at, NOW, RunTrigger.SCHEDULE, heartbeat_timeout=timeout)
    store.materialize(
        record.job_id,
        expected_next_run_time=record.next_run_time or NOW,
        runs=[running, due],
        next_run_time=NOW + timedelta(seconds=1),
        completed=False,
    )
    first = AttemptRef(record.job_id, running.run_id, 1)
    if earlier is RunState.QUEUED:
        store.mark_queued([first], NOW)
        return Dispatchable(store.get_run(record.job_id, running.run_id), spec), Dispatchable(due, spec)
    [claim] = store.claim([first], "executor-1", NOW)
    assert claim.run is not None
    return Dispatchable(claim.run, spec), Dispatchable(due, spec)


def _release(store: SqlStore, item: Dispatchable) -> tuple[MemoryRunQueue, Timer]:
    queue, timer = MemoryRunQueue(), Timer()
    releaser = Releaser(
        store,
        Dispatcher(store, queue, lambda: NOW),
        CancelRouter(MemorySignalBus()),
        timer,
        lambda: NOW,
        lead=timedelta(0),
        batch=100,
        held=lambda: ALL_SHARDS,
    )
    releaser.hold([item])
    releaser.release_due()
    return queue, timer


def _published(queue: MemoryRunQueue, queue_name: str = "default") -> list[str]:
    consumer = queue.consumer("test", [queue_name])
    try:
        return [delivery.run.attempt.run for delivery in consumer.poll(100, 0.1)]
    finally:
        consumer.close()


def _state(store: SqlStore, item: Dispatchable) -> RunState:
    return store.get_run(item.run.job_id, item.run.run_id).state


def test_skip_cancels_the_new_occurrence(store: SqlStore) -> None:
    running, due = _job(store, job_pb2.OVERLAP_POLICY_SKIP)
    queue, _ = _release(store, due)
    assert _published(queue) == []
    assert _state(store, due) is RunState.CANCELLED
    assert "skipped" in (store.get_run(due.run.job_id, due.run.run_id).error_message or "")
    assert _state(store, running) is RunState.RUNNING


def test_unspecified_means_skip(store: SqlStore) -> None:
    _, due = _job(store, job_pb2.OVERLAP_POLICY_UNSPECIFIED)
    _release(store, due)
    assert _state(store, due) is RunState.CANCELLED


def test_buffer_holds_the_occurrence_until_the_other_ends(store: SqlStore) -> None:
    _, due = _job(store, job_pb2.OVERLAP_POLICY_BUFFER_ONE)
    queue, timer = _release(store, due)
    assert _published(queue) == []
    assert _state(store, due) is RunState.SCHEDULED
    assert len(timer) == 1  # held back, asked again shortly


def test_cancel_other_stops_the_running_one_and_starts_the_new(store: SqlStore) -> None:
    running, due = _job(store, job_pb2.OVERLAP_POLICY_CANCEL_OTHER)
    queue, _ = _release(store, due)
    assert _published(queue) == [f"jobs/{due.run.job_id}/runs/{due.run.run_id}"]
    assert _state(store, running) is RunState.CANCELLING


def test_allow_all_starts_side_by_side(store: SqlStore) -> None:
    running, due = _job(store, job_pb2.OVERLAP_POLICY_ALLOW_ALL)
    queue, _ = _release(store, due)
    assert _published(queue) == [f"jobs/{due.run.job_id}/runs/{due.run.run_id}"]
    assert _state(store, running) is RunState.RUNNING


def test_skip_waits_while_the_earlier_occurrence_has_not_started(store: SqlStore) -> None:
    """After the queue was away, earlier occurrences are QUEUED, not going: the next one is not skipped as if
    they were, but waits for them to start (then it is skipped, truly) or end."""
    earlier, due = _job(store, job_pb2.OVERLAP_POLICY_SKIP, earlier=RunState.QUEUED)
    queue, timer = _release(store, due)
    assert _published(queue) == []
    assert _state(store, due) is RunState.SCHEDULED
    assert len(timer) == 1  # held back, asked again shortly

    store.claim([AttemptRef.of(earlier.run)], "executor-1", NOW)
    _release(store, due)
    assert _state(store, due) is RunState.CANCELLED
    assert "1 earlier run(s) still going" in (
        store.get_run(due.run.job_id, due.run.run_id).error_message or ""
    )


@pytest.mark.parametrize("policy", [job_pb2.OVERLAP_POLICY_ALLOW_ALL, job_pb2.OVERLAP_POLICY_SKIP])
def test_an_occurrence_later_than_its_catchup_window_is_skipped_saying_so(
    store: SqlStore, policy: job_pb2.OverlapPolicy.ValueType
) -> None:
    _, due = _job(store, policy, due_at=NOW - timedelta(seconds=61), catchup_window=timedelta(minutes=1))
    queue, timer = _release(store, due)
    assert _published(queue) == []
    assert len(timer) == 0
    assert _state(store, due) is RunState.CANCELLED
    reason = store.get_run(due.run.job_id, due.run.run_id).error_message or ""
    assert "catch-up window (0:01:00)" in reason, reason


def test_an_occurrence_within_its_catchup_window_goes_out(store: SqlStore) -> None:
    _, due = _job(
        store,
        job_pb2.OVERLAP_POLICY_ALLOW_ALL,
        due_at=NOW - timedelta(seconds=59),
        catchup_window=timedelta(minutes=1),
    )
    queue, _ = _release(store, due)
    assert _published(queue) == [f"jobs/{due.run.job_id}/runs/{due.run.run_id}"]
