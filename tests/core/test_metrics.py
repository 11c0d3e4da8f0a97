"""The metrics the attempt lifecycle records, once per attempt whoever ends it: the lateness histogram (queue,
lane, trigger; fine buckets), attempts and runs by outcome, retries; and a schedule's skipped occurrences."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.attempts import AttemptOutcome, AttemptRef
from jobmesh.core.lifecycle import AttemptLifecycle
from jobmesh.core.metrics import clear_backlog, set_backlog
from jobmesh.core.occurrences import plan_occurrences
from jobmesh.core.records import RunState
from jobmesh.v1 import job_pb2
from tests.core.test_lifecycle import NOW, claimed, end_one, report, running

LATENESS = "jobmesh_run_lateness_seconds"
FIRST = {"queue": "default", "lane": "NORMAL", "trigger": "SCHEDULE"}
RETRY = {**FIRST, "trigger": "RETRY"}


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Counts:
    """Samples read before, and the change since."""

    def __init__(self, *samples: tuple[str, dict[str, str]]) -> None:
        self._samples = samples
        self._before = [value(name, **labels) for name, labels in samples]

    def changes(self) -> list[float]:
        return [
            value(name, **labels) - before
            for (name, labels), before in zip(self._samples, self._before, strict=True)
        ]


@pytest.fixture
def store(tmp_path: Path, migrated_sqlite: Callable[[Path], str]) -> Iterator[SqlStore]:
    store = open_store(migrated_sqlite(tmp_path / "store.db"))
    yield store
    store.close()


@pytest.fixture
def life(store: SqlStore) -> AttemptLifecycle:
    return AttemptLifecycle(store, MemoryRunQueue(), lambda: NOW, rng=random.Random(7))


def started(after: timedelta, state: RunState, error_type: str | None = None) -> AttemptOutcome:
    """An attempt that started `after` its due time (NOW)."""
    return AttemptOutcome(state, NOW + after + timedelta(seconds=1), NOW + after, 0, error_type, None)


def test_an_attempt_ended_is_measured_once_in_the_bucket_of_its_lateness(
    store: SqlStore, life: AttemptLifecycle
) -> None:
    counts = Counts(
        (f"{LATENESS}_count", FIRST),
        (f"{LATENESS}_bucket", {**FIRST, "le": "0.001"}),
        (f"{LATENESS}_bucket", {**FIRST, "le": "0.005"}),
        (f"{LATENESS}_bucket", {**FIRST, "le": "0.01"}),
        ("jobmesh_attempts_ended_total", {"outcome": "SUCCEEDED"}),
        ("jobmesh_runs_ended_total", {"outcome": "SUCCEEDED"}),
    )
    current = running(store, job_id="late-by-4ms")
    ended = started(timedelta(milliseconds=4), RunState.SUCCEEDED)
    assert end_one(life, current, ended).applied
    assert end_one(life, current, ended).applied == frozenset()  # a duplicate report: fenced, not counted
    # 4 ms: above the 1 ms bucket, within 5 ms and 10 ms.
    assert counts.changes() == [1, 0, 1, 1, 1, 1]


def test_a_retried_run_counts_each_attempt_and_the_retry_has_its_own_trigger(
    store: SqlStore, life: AttemptLifecycle
) -> None:
    counts = Counts(
        (f"{LATENESS}_count", FIRST),
        (f"{LATENESS}_count", RETRY),
        ("jobmesh_attempts_ended_total", {"outcome": "FAILED"}),
        ("jobmesh_runs_retried_total", {}),
        ("jobmesh_runs_ended_total", {"outcome": "FAILED"}),
        ("jobmesh_runs_ended_total", {"outcome": "DEAD_LETTERED"}),
    )
    first = running(store, max_attempts=2, job_id="retried")
    [again] = end_one(life, first, started(timedelta(0), RunState.FAILED, "ExitCode")).retried
    second = claimed(store, AttemptRef.of(again.run))
    late = again.run.due_time - NOW + timedelta(seconds=3)
    assert end_one(life, second, started(late, RunState.FAILED, "ExitCode")).dead_lettered
    assert counts.changes() == [1, 1, 2, 1, 0, 1]
    assert value(f"{LATENESS}_bucket", **RETRY, le="2.0") < value(f"{LATENESS}_bucket", **RETRY, le="5.0")


def test_a_lost_attempt_that_never_started_is_counted_but_not_measured(
    store: SqlStore, life: AttemptLifecycle
) -> None:
    counts = Counts((f"{LATENESS}_count", FIRST), ("jobmesh_attempts_ended_total", {"outcome": "FAILED"}))
    current = running(store, job_id="never-started")
    lost = AttemptOutcome(RunState.FAILED, NOW, None, None, "HeartbeatLost", "silent")
    assert end_one(life, current, lost, executor=None).applied
    assert counts.changes() == [0, 1]


def test_occurrences_missed_past_the_catch_up_window_are_counted() -> None:
    cron = job_pb2.Schedule.Cron(expression="* * * * *", time_zone="UTC")
    cron.catchup_window.FromTimedelta(timedelta(minutes=5))
    last = NOW.replace(second=0) - timedelta(hours=1)
    plan = plan_occurrences("job", cron, last, NOW + timedelta(minutes=1), NOW)
    assert plan.skipped_since == last
    assert 54 <= plan.skipped <= 56  # the hour's minutes, less the 5 the window still catches up
    assert plan_occurrences("job", cron, NOW.replace(second=0), NOW + timedelta(minutes=1), NOW).skipped == 0


def test_a_batch_of_ends_counts_each_outcome(store: SqlStore, life: AttemptLifecycle) -> None:
    counts = Counts(
        (f"{LATENESS}_count", FIRST),
        ("jobmesh_attempts_ended_total", {"outcome": "SUCCEEDED"}),
        ("jobmesh_attempts_ended_total", {"outcome": "FAILED"}),
        ("jobmesh_runs_ended_total", {"outcome": "SUCCEEDED"}),
        ("jobmesh_runs_retried_total", {}),
    )
    done = [running(store, job_id=f"done-{index}") for index in range(3)]
    failing = running(store, max_attempts=2, job_id="failing")
    ends = [report(current, started(timedelta(0), RunState.SUCCEEDED)) for current in done]
    ends.append(report(failing, started(timedelta(0), RunState.FAILED, "ExitCode")))
    assert len(life.end(ends).applied) == 4
    assert counts.changes() == [4, 3, 1, 3, 1]


def test_the_backlog_gauges_follow_each_measure_and_go_when_the_watcher_stops_leading() -> None:
    seen: set[str] = set()
    busy, idle = f"busy-{NOW.timestamp()}", f"idle-{NOW.timestamp()}"
    set_backlog({busy: (4, NOW - timedelta(seconds=90)), idle: (1, NOW)}, NOW, seen)
    assert (
        value("jobmesh_runs_waiting", queue=busy),
        value("jobmesh_runs_waiting_oldest_seconds", queue=busy),
    ) == (
        4,
        90,
    )
    set_backlog({busy: (2, NOW - timedelta(seconds=30))}, NOW + timedelta(seconds=10), seen)
    assert value("jobmesh_runs_waiting_oldest_seconds", queue=busy) == 40
    assert value("jobmesh_runs_waiting", queue=idle) == 0  # emptied since: 0, not its old count
    clear_backlog(seen)
    assert REGISTRY.get_sample_value("jobmesh_runs_waiting", {"queue": busy}) is None
    assert seen == set()
    set_backlog({busy: (1, NOW)}, NOW, seen)  # leading again: measured afresh
    assert value("jobmesh_runs_waiting", queue=busy) == 1
