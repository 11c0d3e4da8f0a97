"""The change feed's contract, on every store: runs in the order of their visible changes, after a cursor,
never skipping one (a transaction that commits late included), and notices when they may have changed."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, create_engine, text

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.filters import DEFAULT_RUN_ORDER, RUN_FIELDS, ListQuery, parse_filter, run_matches
from jobmesh.core.ports.pipeline_store import Heartbeat
from jobmesh.core.ports.store import LOGS_CHANGED, RUNS_CHANGED, FeedCursor, NewJob, RunChange
from jobmesh.core.records import RunState, RunTrigger
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import at, job, log, new_job, run
from tests.support import fresh_postgres_database, require_service_url


def everything_after(
    store: SqlStore, cursor: FeedCursor, limit: int = 1000
) -> tuple[list[RunChange], FeedCursor]:
    changes: list[RunChange] = []
    while True:
        page = store.changes_after(cursor, limit=limit)
        changes += page.changes
        cursor = page.cursor
        if page.complete:
            return changes, cursor


def test_changes_come_in_order_once_each_and_again_when_changed_again(store: SqlStore) -> None:
    start = store.feed_cursor()
    assert everything_after(store, start)[0] == []
    store.create_jobs([new_job("alpha", labels={"team": "core"}), new_job("beta")])
    for name in ("r1", "r2"):
        store.create_run(run("alpha", name))
    store.create_run(run("beta", "r3"))
    changes, cursor = everything_after(store, start)
    assert [(c.run.job_id, c.run.run_id) for c in changes] == [
        ("alpha", "r1"),
        ("alpha", "r2"),
        ("beta", "r3"),
    ]
    assert changes[0].labels == {"team": "core"}
    assert [c.cursor for c in changes] == sorted(c.cursor for c in changes)
    assert everything_after(store, cursor)[0] == []

    store.cancel_run("alpha", "r1", reason="x", now=at(100))
    [again], cursor = everything_after(store, cursor)
    assert (again.run.run_id, again.run.state) == ("r1", RunState.CANCELLED)


def test_a_read_of_some_states_gets_only_their_changes_and_passes_the_others(store: SqlStore) -> None:
    start = store.feed_cursor()
    store.create_jobs([new_job("alpha")])
    store.create_run(run("alpha", "r1", state=RunState.RUNNING, executor="e1", attempt=1))
    store.create_run(run("alpha", "r2", state=RunState.RUNNING, executor="e1", attempt=1))
    store.create_run(run("alpha", "r3"))
    store.cancel_run("alpha", "r2", reason="x", now=at(100))
    wanted = frozenset({RunState.CANCELLING})
    page = store.changes_after(start, limit=1000, states=wanted)
    assert [(c.run.run_id, c.run.state) for c in page.changes] == [("r2", RunState.CANCELLING)]
    assert page.complete
    assert everything_after(store, page.cursor)[0] == []  # the others were passed, not left for later
    store.cancel_run("alpha", "r1", reason="x", now=at(101))
    store.cancel_run("alpha", "r3", reason="x", now=at(102))  # never started: CANCELLED at once
    later = store.changes_after(page.cursor, limit=1000, states=wanted)
    assert [(c.run.run_id, c.run.state) for c in later.changes] == [("r1", RunState.CANCELLING)]
    assert [c.run.run_id for c in everything_after(store, page.cursor)[0]] == ["r1", "r3"]


def test_a_full_page_of_some_states_ends_at_its_last_change(store: SqlStore) -> None:
    start = store.feed_cursor()
    store.create_jobs([new_job("alpha")])
    for name in ("r1", "r2", "r3"):
        store.create_run(run("alpha", name, state=RunState.RUNNING, executor="e1", attempt=1))
        store.cancel_run("alpha", name, reason="x", now=at(100))
    page = store.changes_after(start, limit=2, states=frozenset({RunState.CANCELLING}))
    assert [c.run.run_id for c in page.changes] == ["r1", "r2"]
    assert not page.complete
    assert page.cursor == page.changes[-1].cursor
    rest = store.changes_after(page.cursor, limit=2, states=frozenset({RunState.CANCELLING}))
    assert [c.run.run_id for c in rest.changes] == ["r3"]


def test_a_run_changed_many_times_between_reads_comes_once_as_it_is_now(store: SqlStore) -> None:
    store.create_jobs([new_job("alpha")])
    cursor = store.feed_cursor()
    store.create_run(run("alpha", "r1"))
    store.create_run(run("alpha", "r2"))
    store.cancel_run("alpha", "r1", reason="x", now=at(100))
    changes, cursor = everything_after(store, cursor, limit=1)
    assert [(c.run.run_id, c.run.state) for c in changes] == [
        ("r2", RunState.SCHEDULED),
        ("r1", RunState.CANCELLED),
    ]
    assert everything_after(store, cursor)[0] == []


def test_a_heartbeat_is_no_change(store: SqlStore) -> None:
    store.create_jobs([new_job("alpha")])
    store.create_run(run("alpha", "r1", state=RunState.RUNNING, executor="e1", attempt=1))
    cursor = everything_after(store, FeedCursor(0))[1]
    store.heartbeat("e1", [Heartbeat(AttemptRef("alpha", "r1", 1), at(500))], at(5))
    assert everything_after(store, cursor)[0] == []


def test_five_thousand_runs_written_in_one_transaction_all_come(store: SqlStore) -> None:
    start = store.feed_cursor()
    store.create_jobs([NewJob(job(f"job-{i}"), run(f"job-{i}", "r")) for i in range(5000)])
    changes, _ = everything_after(store, start, limit=700)
    assert len(changes) == 5000
    assert len({(c.run.job_id, c.run.run_id) for c in changes}) == 5000


def test_writes_call_the_stores_listeners(store: SqlStore) -> None:
    heard: list[str] = []
    subscription = store.watch_changes(heard.append)
    try:
        store.create_jobs([new_job("alpha")])
        store.create_run(run("alpha", "r1"))
        store.append_logs([log("alpha", "r1", 1)])
        assert RUNS_CHANGED in heard
        assert LOGS_CHANGED in heard
    finally:
        subscription.close()
    heard.clear()
    store.create_run(run("alpha", "r2"))
    assert RUNS_CHANGED not in heard


@contextlib.contextmanager
def _racing_writers(backend: Backend, *run_names: str) -> Iterator[tuple[FeedCursor, Connection, Connection]]:
    """Runs of one job, the feed's cursor past them, and two connections of their own that write them in
    transactions that overlap (PostgreSQL)."""
    if backend.name != "postgres":
        pytest.skip("SQLite has one writer at a time: nothing commits out of order")
    backend.store.create_jobs([new_job("alpha")])
    for name in run_names:
        backend.store.create_run(run("alpha", name))
    cursor = everything_after(backend.store, FeedCursor(0))[1]
    engine = create_engine(backend.url)
    try:
        with engine.connect() as slow, engine.connect() as quick:
            yield cursor, slow, quick
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_transaction_that_commits_late_is_not_skipped(backend: Backend) -> None:
    with _racing_writers(backend, "early", "late") as (cursor, slow, quick):
        slow_transaction = slow.begin()
        slow.execute(text("UPDATE job_runs SET update_time = now() WHERE run_id = 'early'"))
        with quick.begin():  # begins writing after the slow one, commits first
            quick.execute(text("UPDATE job_runs SET update_time = now() WHERE run_id = 'late'"))
        seen, cursor_before = everything_after(backend.store, cursor)
        assert seen == []  # 'late' waits: 'early''s transaction is still open below it
        slow_transaction.commit()
    changes, _ = everything_after(backend.store, cursor_before)
    assert sorted(c.run.run_id for c in changes) == ["early", "late"]


@pytest.mark.postgres
def test_a_run_changed_last_by_the_transaction_that_began_first_comes_once_as_it_is_now(
    backend: Backend,
) -> None:
    """The earlier transaction's position is the lower one, yet its change is the run's latest."""
    with _racing_writers(backend, "first", "shared") as (cursor, slow, quick):
        slow_transaction = slow.begin()
        slow.execute(text("UPDATE job_runs SET update_time = now() WHERE run_id = 'first'"))
        with quick.begin():
            quick.execute(
                text("UPDATE job_runs SET state = 'QUEUED', update_time = now() WHERE run_id = 'shared'")
            )
        slow.execute(
            text("UPDATE job_runs SET state = 'CANCELLED', update_time = now() WHERE run_id = 'shared'")
        )
        slow_transaction.commit()
    changes, cursor = everything_after(backend.store, cursor)
    assert sorted((c.run.run_id, c.run.state) for c in changes) == [
        ("first", RunState.SCHEDULED),
        ("shared", RunState.CANCELLED),
    ]
    assert everything_after(backend.store, cursor)[0] == []


@pytest.mark.postgres
def test_a_transaction_open_in_another_database_holds_nothing_back(backend: Backend) -> None:
    """Another database on the same server (another application's, say) cannot write here: its long
    transaction must not stall the feed, as it would if the horizon were the whole cluster's."""
    if backend.name != "postgres":
        pytest.skip("SQLite has no other databases")
    store = backend.store
    store.create_jobs([new_job("alpha")])
    store.create_run(run("alpha", "before"))
    cursor = everything_after(store, FeedCursor(0))[1]
    with fresh_postgres_database(require_service_url("JOBMESH_DATABASE_URL")) as other_url:
        engine = create_engine(other_url)
        try:
            with engine.connect() as other, other.begin():
                other.execute(text("CREATE TABLE held (id int)"))  # it now has a transaction id, open
                store.create_run(run("alpha", "after"))
                changes, _ = everything_after(store, cursor)
                assert [c.run.run_id for c in changes] == ["after"]
        finally:
            engine.dispose()


@pytest.mark.postgres
def test_other_processes_changes_are_heard(backend: Backend) -> None:
    if backend.name != "postgres":
        pytest.skip("SQLite tells no other process")
    heard = threading.Event()
    subscription = backend.store.watch_changes(lambda what: heard.set() if what == RUNS_CHANGED else None)
    try:
        backend.store.create_jobs([new_job("alpha")])
        heard.wait(timeout=5)
        heard.clear()
        other = SqlStore(backend.url)  # another process's store: its writes reach us through NOTIFY
        try:
            other.create_run(run("alpha", "elsewhere"))
        finally:
            other.close()
        assert heard.wait(timeout=5)
    finally:
        subscription.close()


FILTERS = [
    "",
    "state = RUNNING",
    "state != RUNNING",
    "attempt >= 2",
    "attempt < 2",
    'executor = "e1"',
    'executor != "e1"',  # an unset executor reads as ""
    'executor = ""',
    "labels:team",
    'labels.team = "core"',
    'labels.team != "core"',  # a job without the label passes
    'job = "jobs/alpha"',
    'job != "jobs/alpha"',
    "trigger = RUN_NOW",
    f'start_time > "{at(50).isoformat()}"',  # an unstarted run passes neither
    f'start_time <= "{at(50).isoformat()}"',
    f'schedule_time >= "{at(60).isoformat()}" AND state = SUCCEEDED',
    f'update_time < "{at(1000).isoformat()}" AND labels.team = "core" AND attempt = 1',
]


@pytest.mark.parametrize("text", FILTERS)
def test_the_feeds_filter_answers_as_the_stores_query(store: SqlStore, text: str) -> None:
    store.create_jobs([new_job("alpha", labels={"team": "core"}), new_job("beta", labels={"team": "ops"})])
    store.create_jobs([new_job("gamma", labels={})])
    samples = [
        run("alpha", "a1", state=RunState.RUNNING, executor="e1", start_time=at(40)),
        run("alpha", "a2", state=RunState.SUCCEEDED, attempt=2, executor="e2", start_time=at(70)),
        run("beta", "b1", state=RunState.SCHEDULED, trigger=RunTrigger.RUN_NOW),
        run("gamma", "g1", state=RunState.FAILED, attempt=3, executor="e1", start_time=at(10)),
        run("gamma", "g2", state=RunState.SUCCEEDED, schedule_time=at(30), due_time=at(30)),
    ]
    for sample in samples:
        store.create_run(sample)
    query = ListQuery(parse_filter(text, RUN_FIELDS), DEFAULT_RUN_ORDER, 100, "")
    from_store = {r.run_id for r in store.list_runs(None, query).items}
    changes, _ = everything_after(store, FeedCursor(0))
    in_memory = {c.run.run_id for c in changes if run_matches(query.comparisons, c.run, c.labels)}
    assert in_memory == from_store
