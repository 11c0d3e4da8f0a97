"""Migrations and the factory: the migrated schema is the metadata, upgrades repeat, errors translate."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.migrate import alembic_config, upgrade
from jobmesh.adapters.store.schema import (
    CHANGE_DEFAULT_PARTITION,
    CHANGE_PARTITION_PREFIX,
    LOG_DEFAULT_PARTITION,
    LOG_PARTITION_PREFIX,
    RUN_DEFAULT_PARTITION,
    RUN_PARTITION_PREFIX,
    metadata,
)
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.records import RunState
from jobmesh.core.shards import shard_of
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import at, new_job
from tests.adapters.store.pipeline_support import add_job, add_run, end, finish, ref


def _schema_drift(url: str) -> list[Any]:
    def include(obj: Any, name: str | None, kind: str, reflected: bool, compare_to: Any) -> bool:
        table = obj if kind == "table" else getattr(obj, "table", None)
        table_name = getattr(table, "name", "") or ""
        partition = table_name.startswith(
            (
                RUN_PARTITION_PREFIX,
                RUN_DEFAULT_PARTITION,
                LOG_PARTITION_PREFIX,
                LOG_DEFAULT_PARTITION,
                CHANGE_PARTITION_PREFIX,
                CHANGE_DEFAULT_PARTITION,
            )
        )
        sqlite_gin = kind == "index" and name == "ix_jobs_labels" and url.startswith("sqlite")
        sqlite_clock = table_name == "change_clock"  # SQLite's change feed counter (migration 0004)
        # SQLite keeps one change entry a run; PostgreSQL appends them (migration 0008).
        postgres_log = kind == "index" and name == "ix_run_changes_run" and url.startswith("postgresql")
        # SQLite keeps one count a key; PostgreSQL appends them (migration 0013).
        postgres_counts = kind == "index" and name == "ux_run_counts" and url.startswith("postgresql")
        return not (partition or sqlite_gin or sqlite_clock or postgres_log or postgres_counts)

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "include_object": include}
            )
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


def test_migrated_schema_is_the_metadata(backend: Backend) -> None:
    assert _schema_drift(backend.url) == []


def test_upgrade_again_is_a_no_op(backend: Backend) -> None:
    backend.store.create_jobs([new_job("alpha")])
    upgrade(backend.url)
    assert backend.execute("SELECT version_num FROM alembic_version") == [("0014",)]
    assert backend.store.get_job("alpha").job_id == "alpha"


def test_a_database_at_head_is_not_migrated_again_and_one_behind_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a store at head skips Alembic's environment (it loads every migration script); a database
    behind head still goes through it."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    runs: list[str] = []
    real = command.upgrade
    monkeypatch.setattr(command, "upgrade", lambda config, revision: runs.append(revision))
    upgrade(url)
    assert runs == []
    monkeypatch.setattr(command, "upgrade", real)
    _downgrade(url, "0006")
    monkeypatch.setattr(command, "upgrade", lambda config, revision: runs.append(revision))
    upgrade(url)
    assert runs == ["head"]


def _downgrade(url: str, revision: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.downgrade(config, revision)
    finally:
        engine.dispose()


def test_downgrade_to_base_and_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    _downgrade(url, "base")
    engine = create_engine(url)
    try:
        assert inspect(engine).get_table_names() == ["alembic_version"]
    finally:
        engine.dispose()
    upgrade(url)
    assert _schema_drift(url) == []


@pytest.mark.postgres
def test_replicas_migrating_together_do_not_collide(new_pg_schema: Callable[[str], Any]) -> None:
    with new_pg_schema("jm_migrate") as url, ThreadPoolExecutor(4) as pool:
        stores = list(pool.map(lambda _: open_store(url), range(4)))
        for store in stores:
            store.close()
        assert _schema_drift(url) == []


def test_open_store_sets_up_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    store = open_store(f"sqlite:///{path}")
    try:
        store.create_jobs([new_job("alpha")])
        engine = store.engine
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10_000
    finally:
        store.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT job_id FROM jobs").fetchall() == [("alpha",)]
    raw.close()


def test_a_foreign_key_protects_runs(backend: Backend) -> None:
    with pytest.raises(IntegrityError, match=r"(?i)foreign key"):
        backend.execute(
            "INSERT INTO job_runs (job_id, run_id, schedule_time, attempt, due_time, state, trigger,"
            " priority, queue, progress, progress_message, create_time, update_time, shard) VALUES ('ghost',"
            " 'r', :t, 1, :t, 'SCHEDULED', 'SCHEDULE', 'NORMAL', 'default', 0, '', :t, :t, 0)",
            {"t": "2026-01-01 00:00:00+00:00"},
        )


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2",
        "sqlite:////nonexistent-directory/for/jobmesh/store.db",
    ],
)
def test_an_unreachable_database_is_store_unavailable(url: str) -> None:
    store = SqlStore(url)
    try:
        with pytest.raises(StoreUnavailable):
            store.get_job("alpha")
        with pytest.raises(StoreUnavailable):
            store.create_jobs([new_job("alpha")])
    finally:
        store.close()


def test_maintain_partitions_is_a_no_op_on_sqlite(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        store.maintain_partitions(new_job("x").job.create_time)
        with store.engine.connect() as connection:
            names = connection.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'")).scalars()
            assert sorted(names) == [
                "alembic_version",
                "audit_events",
                "change_clock",
                "executor_sessions",
                "flow_gates",
                "job_runs",
                "jobs",
                "leases",
                "open_runs",
                "run_attempts",
                "run_changes",
                "run_counts",
                "run_logs",
            ]
    finally:
        store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of the test's own, migrated to head (it is taken up and down)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
        upgrade(url)
        yield url
        return
    with request.getfixturevalue("new_pg_schema")("jm_down") as url:
        upgrade(url)
        yield url


def _side_tables(url: str) -> tuple[set[Any], set[Any]]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            opened = set(connection.execute(text("SELECT job_id, run_id, state, wake_time FROM open_runs")))
            latest = (
                "SELECT c.run_id, c.change_position FROM run_changes AS c JOIN job_runs AS r "
                "ON r.job_id = c.job_id AND r.run_id = c.run_id AND r.schedule_time = c.schedule_time "
                "AND r.update_time = c.update_time"
            )
            changes = set(connection.execute(text(latest)))
            return opened, changes
    finally:
        engine.dispose()


def test_runs_keep_their_queues_and_positions_down_to_0007_and_up_again(empty_url: str) -> None:
    """Migration 0008 fills `open_runs` and `run_changes` from the runs there, and its downgrade gives the
    positions back to `job_runs`."""
    store = SqlStore(empty_url)
    try:
        add_job(store)
        scheduled, queued, running = (add_run(store, seconds) for seconds in (60, 61, 62))
        add_run(store, 63, state=RunState.SUCCEEDED)
        store.mark_queued([ref(queued), ref(running)], at(64))
        store.claim([ref(running)], "ex1", at(65))
    finally:
        store.close()
    before = _side_tables(empty_url)
    assert {(run_id, state) for _, run_id, state, _ in before[0]} == {
        (scheduled.run_id, "SCHEDULED"),
        (queued.run_id, "QUEUED"),
        (running.run_id, "RUNNING"),
    }
    assert len(before[1]) == 4
    _downgrade(empty_url, "0007")
    engine = create_engine(empty_url)
    try:
        with engine.connect() as connection:
            positions = set(connection.execute(text("SELECT run_id, change_position FROM job_runs")))
    finally:
        engine.dispose()
    assert positions == before[1]
    upgrade(empty_url)
    assert _side_tables(empty_url) == before
    assert _schema_drift(empty_url) == []


def test_jobs_and_runs_get_their_shards_up_from_0009(empty_url: str) -> None:
    """Migration 0010 backfills the shard of every job, run and open run, and the runs inserted after it
    bring theirs to `open_runs`."""
    store = SqlStore(empty_url)
    try:
        for job_id in ("alpha", "beta", "gamma"):
            add_job(store, job_id)
            add_run(store, 60, job_id=job_id)
    finally:
        store.close()
    _downgrade(empty_url, "0009")
    upgrade(empty_url)
    expected = {(job_id, shard_of(job_id)) for job_id in ("alpha", "beta", "gamma")}
    engine = create_engine(empty_url)
    try:
        with engine.connect() as connection:
            for table in ("jobs", "job_runs", "open_runs"):
                assert set(connection.execute(text(f"SELECT job_id, shard FROM {table}"))) == expected
    finally:
        engine.dispose()
    store = SqlStore(empty_url)
    try:
        add_job(store, "delta")
        add_run(store, 61, job_id="delta")
        assert [item.run.job_id for item in store.due_runs(at(70), limit=10, shards=[shard_of("delta")])] == [
            "delta"
        ]
    finally:
        store.close()
    assert _schema_drift(empty_url) == []


def test_runs_keep_their_rows_down_to_0010_and_get_an_empty_result_up_again(empty_url: str) -> None:
    """Migration 0011 adds `job_runs.result`; its downgrade drops it and keeps the runs."""
    store = SqlStore(empty_url)
    try:
        add_job(store)
        record = add_run(store, 60)
        store.claim([ref(record)], "ex1", at(61))
        assert finish(store, [end(ref(record), result="[1,2]")]) == [ref(record)]
        assert store.get_run("alpha", record.run_id).result == "[1,2]"
    finally:
        store.close()
    _downgrade(empty_url, "0010")
    engine = create_engine(empty_url)
    try:
        assert "result" not in {column["name"] for column in inspect(engine).get_columns("job_runs")}
    finally:
        engine.dispose()
    upgrade(empty_url)
    store = SqlStore(empty_url)
    try:
        kept = store.get_run("alpha", record.run_id)
        assert (kept.state, kept.result) == (RunState.SUCCEEDED, None)
    finally:
        store.close()
    assert _schema_drift(empty_url) == []


def test_runs_made_before_0013_are_counted_up_and_the_counts_go_down_again(empty_url: str) -> None:
    """Migration 0013 counts the runs already there; its downgrade drops the counts and keeps the runs."""
    _downgrade(empty_url, "0012")
    store = SqlStore(empty_url)
    try:
        add_job(store)
        for seconds in (60, 61, 62):
            add_run(store, seconds)
    finally:
        store.close()
    upgrade(empty_url)
    store = SqlStore(empty_url)
    try:
        assert store.count_runs(at(3600)).by_state() == {RunState.SCHEDULED: 3}
        add_run(store, 63)  # and the triggers count what comes next
        assert store.count_runs(at(3600)).by_state() == {RunState.SCHEDULED: 4}
    finally:
        store.close()
    _downgrade(empty_url, "0012")
    engine = create_engine(empty_url)
    try:
        assert "run_counts" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
    upgrade(empty_url)
    store = SqlStore(empty_url)
    try:
        assert store.count_runs(at(3600)).by_state() == {RunState.SCHEDULED: 4}
    finally:
        store.close()
    assert _schema_drift(empty_url) == []
