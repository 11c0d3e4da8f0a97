"""PostgreSQL run partitions: created ahead, dropped after retention, and a DEFAULT partition that never
refuses a run (its rows move out when their day's partition is created)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobmesh.adapters.store.migrate import upgrade
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.errors import NotFound
from jobmesh.core.ids import new_run_id
from jobmesh.core.records import RunState
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import log, new_job, run

pytestmark = pytest.mark.postgres

DAY0 = datetime(2030, 3, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
def pg(new_pg_schema: Callable[[str], Any]) -> Iterator[Backend]:
    with new_pg_schema("jm_parts") as url:
        upgrade(url)
        store = SqlStore(url, retention_days=3, partition_ahead_days=2)
        try:
            store.create_jobs([new_job("alpha")])
            yield Backend("postgres", url, store)
        finally:
            store.close()


def _partitions(pg: Backend, table: str = "job_runs") -> dict[str, str]:
    rows = pg.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(:table)",
        {"table": table},
    )
    return {name: bound for name, bound in rows}


def _renamed(partitions: dict[str, str], table: str) -> dict[str, str]:
    return {name.replace("job_runs", table): bound for name, bound in partitions.items()}


def _home(pg: Backend, run_id: str) -> str:
    [(table,)] = pg.execute("SELECT tableoid::regclass::text FROM job_runs WHERE run_id = :r", {"r": run_id})
    return str(table)


def _day(moment: datetime, run_id: str, state: RunState = RunState.SUCCEEDED) -> Any:
    return run("alpha", run_id, schedule_time=moment, due_time=moment, state=state)


def test_partitions_are_created_for_the_coming_days(pg: Backend) -> None:
    pg.store.maintain_partitions(DAY0)
    pg.store.maintain_partitions(DAY0 + timedelta(hours=1))  # again: nothing to do
    assert _partitions(pg) == {
        "job_runs_default": "DEFAULT",
        "job_runs_p20300310": "FOR VALUES FROM ('2030-03-10 00:00:00+00') TO ('2030-03-11 00:00:00+00')",
        "job_runs_p20300311": "FOR VALUES FROM ('2030-03-11 00:00:00+00') TO ('2030-03-12 00:00:00+00')",
        "job_runs_p20300312": "FOR VALUES FROM ('2030-03-12 00:00:00+00') TO ('2030-03-13 00:00:00+00')",
    }
    assert _partitions(pg, "run_changes") == _renamed(_partitions(pg), "run_changes")
    indexes = pg.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'job_runs_p20300311'")
    assert len(indexes) == 4  # the primary key and the three indexes of job_runs
    assert pg.execute("SELECT reloptions FROM pg_class WHERE relname = 'job_runs_p20300311'") == [
        (["fillfactor=60"],)
    ]
    [(queue_options,)] = pg.execute("SELECT reloptions FROM pg_class WHERE oid = 'open_runs'::regclass")
    assert "autovacuum_vacuum_scale_factor=0" in queue_options  # a small table rewritten at every change
    pg.store.create_run(_day(DAY0 + timedelta(days=1), "r1"))
    assert _home(pg, "r1") == "job_runs_p20300311"


def test_old_partitions_are_dropped_unless_a_run_is_unfinished(pg: Backend) -> None:
    pg.store.maintain_partitions(DAY0)
    pg.store.create_run(_day(DAY0, "finished"))
    pg.store.create_run(_day(DAY0 + timedelta(days=1), "running", RunState.RUNNING))
    pg.store.create_run(_day(DAY0 + timedelta(days=2), "recent"))
    pg.store.maintain_partitions(DAY0 + timedelta(days=5))  # retention 3 days: 03-12 is the oldest kept
    assert sorted(_partitions(pg)) == [
        "job_runs_default",
        "job_runs_p20300311",  # kept: it holds a running run
        "job_runs_p20300312",
        "job_runs_p20300315",
        "job_runs_p20300316",
        "job_runs_p20300317",
    ]
    assert sorted(_partitions(pg, "run_changes")) == sorted(_renamed(_partitions(pg), "run_changes"))
    with pytest.raises(NotFound):
        pg.store.get_run("alpha", "finished")
    assert pg.store.get_run("alpha", "running").state is RunState.RUNNING
    assert pg.store.get_run("alpha", "recent").run_id == "recent"
    # A dropped partition fires no trigger: its runs were taken off the counts beforehand.
    counts = pg.store.count_runs(DAY0 + timedelta(days=5))
    assert counts.by_state() == {RunState.RUNNING: 1, RunState.SUCCEEDED: 1}


def test_runs_outside_every_partition_go_to_default_and_move_out_later(pg: Backend) -> None:
    pg.store.maintain_partitions(DAY0)
    future = datetime(2030, 6, 1, 8, 30, tzinfo=UTC)
    pg.store.create_run(_day(future, "future", RunState.SCHEDULED))
    pg.store.create_run(_day(datetime(1990, 1, 1, tzinfo=UTC), "ancient-done"))
    pg.store.create_run(_day(datetime(1991, 1, 1, tzinfo=UTC), "ancient-running", RunState.RUNNING))
    assert {_home(pg, r) for r in ("future", "ancient-done", "ancient-running")} == {"job_runs_default"}

    pg.store.maintain_partitions(future - timedelta(days=1))  # its day's partition is now due
    assert _home(pg, "future") == "job_runs_p20300601"
    assert pg.store.get_run("alpha", "future") == _day(future, "future", RunState.SCHEDULED)
    assert pg.execute("SELECT count(*) FROM job_runs_default") == [(1,)]  # finished and past retention: gone
    assert pg.execute("SELECT run_id FROM run_changes_default") == [("ancient-running",)]
    assert pg.execute("SELECT tableoid::regclass::text FROM run_changes WHERE run_id = 'future'") == [
        ("run_changes_p20300601",)
    ]
    assert _home(pg, "ancient-running") == "job_runs_default"
    with pytest.raises(NotFound):
        pg.store.get_run("alpha", "ancient-done")
    # Moved out of DEFAULT, a run is counted once; expired from it, no more.
    counts = pg.store.count_runs(future + timedelta(days=1))
    assert counts.by_state() == {RunState.SCHEDULED: 1, RunState.RUNNING: 1}


def _log_partitions(pg: Backend) -> list[str]:
    rows = pg.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'run_logs'::regclass"
    )
    return sorted(name for (name,) in rows)


def _with_logs(pg: Backend, moment: datetime, state: RunState) -> str:
    run_id = new_run_id(moment)
    pg.store.create_run(_day(moment, run_id, state))
    pg.store.append_logs([log("alpha", run_id, 1), log("alpha", run_id, 2)])
    return run_id


def test_logs_are_partitioned_by_their_runs_day_and_go_with_them(pg: Backend) -> None:
    pg.store.maintain_partitions(DAY0)
    assert _log_partitions(pg) == [
        "run_logs_default",
        "run_logs_p20300310",
        "run_logs_p20300311",
        "run_logs_p20300312",
    ]
    finished = _with_logs(pg, DAY0, RunState.SUCCEEDED)
    running = _with_logs(pg, DAY0 + timedelta(days=1), RunState.RUNNING)
    recent = _with_logs(pg, DAY0 + timedelta(days=2), RunState.SUCCEEDED)
    [(home,)] = pg.execute(
        "SELECT DISTINCT tableoid::regclass::text FROM run_logs WHERE run_id = :r", {"r": finished}
    )
    assert home == "run_logs_p20300310"
    pg.store.maintain_partitions(DAY0 + timedelta(days=5))  # retention 3 days
    assert "run_logs_p20300310" not in _log_partitions(pg)
    assert pg.store.list_logs("alpha", finished, after_sequence=0, limit=10) == []
    assert len(pg.store.list_logs("alpha", running, after_sequence=0, limit=10)) == 2  # its run is kept
    assert len(pg.store.list_logs("alpha", recent, after_sequence=0, limit=10)) == 2
