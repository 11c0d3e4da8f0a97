"""The runs' work queues and change positions live beside `job_runs` (migration 0008), so a run's updates
touch none of its indexes: PostgreSQL writes each as a HOT update. Triggers keep both tables, whoever writes
the runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from jobmesh.adapters.store.migrate import upgrade
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.shards import shard_of
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import at
from tests.adapters.store.pipeline_support import TIMEOUT, add_job, add_run, pipeline_round, ref

# Few enough that every version of their runs fits on the runs' one page: whether an update is HOT then
# depends on the indexes alone, not on when PostgreSQL prunes the page's dead versions (which a concurrent
# snapshot, such as autovacuum's, may hold off).
JOBS = 4
# What `pipeline_round` updates in each run: handed to the queue, claimed, a heartbeat, progress, ended.
UPDATES_A_RUN = 5


def _open_runs(backend: Backend) -> dict[tuple[str, str], tuple[str, datetime]]:
    rows = backend.execute("SELECT job_id, run_id, state, wake_time FROM open_runs")
    return {(job_id, run_id): (state, _time(wake)) for job_id, run_id, state, wake in rows}


def _time(value: datetime | str) -> datetime:
    """A time as read back by plain SQL: SQLite gives UTC as text."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value).replace(tzinfo=UTC)


def test_the_open_runs_are_the_runs_not_ended_each_with_when_it_next_needs_the_mesh(backend: Backend) -> None:
    store = backend.store
    pipeline_round(store, "round", 3)  # the first run retried (SCHEDULED again), the others ended
    opened = _open_runs(backend)
    assert [state for state, _ in opened.values()] == ["SCHEDULED"]
    [(job_id, _run_id)] = opened
    assert job_id == "round-0"
    add_job(store, "beta")
    waiting = add_run(store, 90, job_id="beta")
    key = ("beta", waiting.run_id)
    assert _open_runs(backend)[key] == ("SCHEDULED", at(90))
    store.mark_queued([ref(waiting)], at(91))
    assert _open_runs(backend)[key] == ("QUEUED", at(91))
    store.claim([ref(waiting)], "ex1", at(92))
    assert _open_runs(backend)[key] == ("RUNNING", at(92) + TIMEOUT)


def test_a_runs_latest_change_position_moves_with_each_visible_change(backend: Backend) -> None:
    add_job(backend.store, "beta")
    record = add_run(backend.store, 90, job_id="beta")
    query = (
        "SELECT c.change_position FROM run_changes AS c JOIN job_runs AS r "
        "ON r.job_id = c.job_id AND r.run_id = c.run_id AND r.schedule_time = c.schedule_time "
        f"AND r.update_time = c.update_time WHERE c.run_id = '{record.run_id}'"
    )
    [(created,)] = backend.execute(query)
    backend.store.mark_queued([ref(record)], at(91))
    [(queued,)] = backend.execute(query)
    assert queued > created


def _run_updates(url: str, at_least: int) -> tuple[int, int]:
    """Updates and HOT updates of the run partitions. A backend's statistics reach the shared counters as it
    ends: the store's have just been closed, so this waits until at least `at_least` updates are counted."""
    engine = create_engine(url)
    query = text(
        "SELECT coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0) FROM pg_stat_user_tables "
        "WHERE schemaname = current_schema() AND relname LIKE 'job_runs%'"
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with engine.connect() as connection:
                updates, hot = connection.execute(query).one()
            if updates >= at_least or time.monotonic() > deadline:
                return int(updates), int(hot)
            time.sleep(0.1)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_runs_updates_through_its_life_are_hot(new_pg_schema: Callable[[str], Any]) -> None:
    with new_pg_schema("jm_hot") as url:
        upgrade(url)
        store = SqlStore(url)
        try:
            pipeline_round(store, "hot", JOBS)
        finally:
            store.close()
        updates, hot = _run_updates(url, JOBS * UPDATES_A_RUN)
    assert updates >= JOBS * UPDATES_A_RUN
    assert hot == updates


# Enough runs that a join of the update's old rows to its new ones by nested loop (the store's sessions turn
# hash joins off) takes minutes here; by hash, about a second.
MANY_RUNS = 40_000
MANY_RUNS_TIMEOUT = "20s"


@pytest.mark.postgres
def test_one_statement_that_updates_many_runs_keeps_the_open_runs_in_linear_time(
    new_pg_schema: Callable[[str], Any],
) -> None:
    with new_pg_schema("jm_many") as url:
        upgrade(url)
        store = SqlStore(url)
        try:
            store.maintain_partitions(datetime.now(UTC))
            add_job(store, "many")
            with store.engine.begin() as connection:
                connection.execute(text(_MANY_RUNS), {"count": MANY_RUNS, "shard": shard_of("many")})
            with store.engine.begin() as connection:  # a session of the store's, with its settings
                connection.execute(text(f"SET LOCAL statement_timeout = '{MANY_RUNS_TIMEOUT}'"))
                ended = connection.execute(
                    text("UPDATE job_runs SET state = 'SUCCEEDED', end_time = now(), update_time = now()")
                )
                assert ended.rowcount == MANY_RUNS
            with store.engine.connect() as connection:
                assert connection.execute(text("SELECT count(*) FROM open_runs")).scalar() == 0
        finally:
            store.close()


_MANY_RUNS = """
INSERT INTO job_runs (job_id, run_id, schedule_time, attempt, due_time, state, trigger, priority, queue,
                      executor, start_time, last_heartbeat_time, heartbeat_deadline, progress,
                      progress_message, create_time, update_time, namespace, shard)
SELECT 'many', 'run' || lpad(i::text, 7, '0'), now(), 1, now(), 'RUNNING', 'MANUAL', 'NORMAL', 'default',
       'executor-1', now(), now(), now() + interval '1 minute', 0, '', now(), now(), 'default', :shard
FROM generate_series(1, :count) AS i
"""
