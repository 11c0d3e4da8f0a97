"""The store's counts of runs per namespace, queue and state (migration 0013) equal a count of the runs
themselves, whoever wrote them: creates, the pipeline's batches, cancels, deletes; upcoming runs apart; and
on PostgreSQL, folded or not."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from jobmesh.adapters.store import sql_run_counts
from jobmesh.core.ids import new_run_id
from jobmesh.core.records import RunState
from jobmesh.core.run_counts import RunCount, RunCounts
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import at
from tests.adapters.store.pipeline_support import add_job, add_run, pipeline_round, ref

BEFORE_ALL = at(-3600)  # every run of the suite is upcoming then
AFTER_ALL = at(3600)  # and none is


def counted(backend: Backend, now: datetime) -> dict[tuple[str, str, RunState], tuple[int, int]]:
    """The runs themselves, counted: (due or not upcoming, upcoming) per namespace, queue and state."""
    runs: Counter[tuple[str, str, RunState]] = Counter()
    upcoming: Counter[tuple[str, str, RunState]] = Counter()
    for namespace, queue, state, schedule_time in backend.execute(
        "SELECT namespace, queue, state, schedule_time FROM job_runs"
    ):
        key = (namespace, queue, RunState(state))
        if key[2] is RunState.SCHEDULED and _time(schedule_time) > now:
            upcoming[key] += 1
        else:
            runs[key] += 1
    return {key: (runs[key], upcoming[key]) for key in runs.keys() | upcoming.keys()}


def _time(value: datetime | str) -> datetime:
    """A time as read back by plain SQL: SQLite gives UTC as text."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value).replace(tzinfo=UTC)


def kept(counts: RunCounts) -> dict[tuple[str, str, RunState], tuple[int, int]]:
    return {(c.namespace, c.queue, c.state): (c.runs, c.upcoming) for c in counts.counts}


def assert_counts_match(backend: Backend) -> None:
    for now in (BEFORE_ALL, AFTER_ALL):
        assert kept(backend.store.count_runs(now)) == counted(backend, now)


def test_an_empty_store_counts_nothing(backend: Backend) -> None:
    counts = backend.store.count_runs(AFTER_ALL)
    assert counts.counts == ()
    assert counts.by_state() == {}
    assert counts.read_time == AFTER_ALL


def test_the_counts_follow_every_write_of_the_pipeline(backend: Backend) -> None:
    store = backend.store
    pipeline_round(store, "round", 5)  # one run retried (SCHEDULED again), four succeeded
    assert_counts_match(backend)
    assert store.count_runs(AFTER_ALL).by_state() == {RunState.SCHEDULED: 1, RunState.SUCCEEDED: 4}
    add_job(store, "beta", namespace="team-b", queue="slow")
    waiting = add_run(store, 90, job_id="beta", namespace="team-b", queue="slow")
    other = add_run(store, 95, job_id="beta", namespace="team-b", queue="slow")
    store.mark_queued([ref(waiting)], at(91))
    store.cancel_run("beta", other.run_id, reason="no longer wanted", now=at(96))
    assert_counts_match(backend)
    assert kept(store.count_runs(AFTER_ALL))[("team-b", "slow", RunState.QUEUED)] == (1, 0)
    assert kept(store.count_runs(AFTER_ALL))[("team-b", "slow", RunState.CANCELLED)] == (1, 0)


def test_upcoming_runs_are_counted_apart_from_the_due_ones(backend: Backend) -> None:
    store = backend.store
    add_job(store)
    for seconds in (10, 20, 30):
        add_run(store, seconds)
    counts = store.count_runs(at(15))  # one due, two ahead of their time
    assert counts.counts == (RunCount("default", "default", RunState.SCHEDULED, 1, 2),)
    assert counts.by_state() == {RunState.SCHEDULED: 1}
    assert counts.upcoming == 2
    assert store.count_runs(AFTER_ALL).counts == (RunCount("default", "default", RunState.SCHEDULED, 3, 0),)


def test_deleted_runs_leave_the_counts(backend: Backend) -> None:
    store = backend.store
    add_job(store)
    gone = add_run(store, 10)
    add_run(store, 20)
    backend.execute(f"DELETE FROM job_runs WHERE run_id = '{gone.run_id}'")
    assert_counts_match(backend)
    assert store.count_runs(AFTER_ALL).by_state() == {RunState.SCHEDULED: 1}


def test_the_counts_are_read_per_namespace_the_caller_may_see(backend: Backend) -> None:
    store = backend.store
    add_job(store, "a", namespace="one")
    add_job(store, "b", namespace="two")
    add_run(store, 10, job_id="a", namespace="one")
    add_run(store, 10, job_id="b", namespace="two")
    add_run(store, 11, job_id="b", namespace="two")
    counts = store.count_runs(AFTER_ALL)
    assert counts.visible_to(None) is counts
    assert counts.visible_to(frozenset({"two"})).by_state() == {RunState.SCHEDULED: 2}
    assert counts.visible_to(frozenset()).counts == ()


@pytest.mark.postgres
def test_postgres_folds_the_appended_changes_into_their_sums(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend.name != "postgres":
        pytest.skip("SQLite keeps one row per key")
    store = backend.store
    add_job(store)
    records = [add_run(store, 10 + n, run_id=new_run_id(at(10 + n))) for n in range(6)]
    for record in records:  # one statement each: one appended row each
        store.mark_queued([ref(record)], at(30))
    [(rows,)] = backend.execute("SELECT count(*) FROM run_counts")
    assert rows > 6
    before = store.count_runs(AFTER_ALL)
    monkeypatch.setattr(sql_run_counts, "FOLD_ROWS", 2)
    assert store.count_runs(AFTER_ALL).counts == before.counts  # read, then folded
    assert backend.execute("SELECT state, runs FROM run_counts") == [("QUEUED", 6)]
    assert store.count_runs(AFTER_ALL).counts == before.counts
    assert_counts_match(backend)


@pytest.mark.postgres
def test_a_heartbeat_appends_no_count(backend: Backend) -> None:
    """A write that moves no run between states costs the counts nothing."""
    if backend.name != "postgres":
        pytest.skip("SQLite's trigger fires on a change of state only")
    store = backend.store
    add_job(store)
    record = add_run(store, 10)
    [(rows,)] = backend.execute("SELECT count(*) FROM run_counts")
    backend.execute(f"UPDATE job_runs SET progress = 0.5 WHERE run_id = '{record.run_id}'")
    assert backend.execute("SELECT count(*) FROM run_counts") == [(rows,)]
