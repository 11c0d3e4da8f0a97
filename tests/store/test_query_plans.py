"""The indexes earn their keep: on a realistic volume (20k jobs, 200k runs over 38 daily partitions), the hot
queries are index scans, never sequential scans of a big table. INDEXES.md records the plans and the reasons.

The store's own statements (get_run, list_runs, list_jobs) are captured as they execute and EXPLAINed with
their real parameters; the watcher's and the sweeper's scans are spelled as the pipeline will run them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from sqlalchemy import Connection, event, text

from jobmesh.server.filtering import DEFAULT_JOB_ORDER, DEFAULT_RUN_ORDER, Comparison, ListQuery
from jobmesh.server.store.migrate import upgrade
from jobmesh.server.store.sql import SqlStore

pytestmark = pytest.mark.postgres

JOBS, RUNS, PAST_DAYS, AHEAD_DAYS = 20_000, 200_000, 30, 7
BIG = 1_000  # a sequential scan of a relation with more rows than this fails the test

LOAD_JOBS = f"""
INSERT INTO jobs (job_id, spec, display_name, labels, schedule_kind, priority, queue, state, next_run_time,
                  create_time, update_time, version)
SELECT 'job' || lpad(i::text, 6, '0'), '\\x0a00'::bytea, 'job ' || i,
       jsonb_build_object('team', 'team' || i % 40)
         || CASE WHEN i % 1000 = 7 THEN jsonb_build_object('tier', 'gold') ELSE '{{}}'::jsonb END,
       (ARRAY['IMMEDIATE', 'RUN_AT', 'CRON'])[1 + i % 3], 'NORMAL', 'default',
       CASE WHEN i % 20 = 0 THEN 'PAUSED' WHEN i % 50 = 1 THEN 'DELETED' ELSE 'ACTIVE' END,
       CASE WHEN i % 3 = 2 THEN now() + (i % 1440) * interval '1 minute' END,
       now() - interval '90 days' + i * interval '6 minutes', now(), 1
FROM generate_series(1, {JOBS}) AS i
"""

# Runs spread evenly from 30 days ago to 7 days ahead: the past finished (4% failed), the last 30 minutes
# running (some with a stale heartbeat), the future scheduled. A tenth belong to five busy jobs (about 110
# runs a day each, like frequent cron jobs), the rest to everyone else.
LOAD_RUNS = f"""
INSERT INTO job_runs (job_id, run_id, schedule_time, attempt, due_time, state, trigger, priority, queue,
                      executor, start_time, last_heartbeat_time, end_time, progress, progress_message,
                      create_time, update_time)
SELECT 'job' || lpad((CASE WHEN i % 10 = 0 THEN 1 + i / 10 % 5 ELSE 1 + i % {JOBS} END)::text, 6, '0'),
       'run' || lpad(i::text, 7, '0'), t, 1, t, state,
       'SCHEDULE', 'NORMAL', 'default',
       CASE WHEN state <> 'SCHEDULED' THEN 'executor-' || i % 16 END,
       CASE WHEN state <> 'SCHEDULED' THEN t END,
       CASE WHEN state = 'RUNNING' THEN now() - (i % 40) * interval '1 second' END,
       CASE WHEN state IN ('SUCCEEDED', 'FAILED') THEN t + interval '3 seconds' END,
       0, '', t, t
FROM (
    SELECT i, t, CASE WHEN t > now() THEN 'SCHEDULED'
                      WHEN t > now() - interval '30 minutes' THEN 'RUNNING'
                      WHEN i % 25 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END AS state
    FROM (SELECT i, now() - interval '{PAST_DAYS} days'
                    + i * (interval '{PAST_DAYS + AHEAD_DAYS} days' / {RUNS}) AS t
          FROM generate_series(1, {RUNS}) AS i) AS spread
) AS runs
"""

WATCHER_WINDOW = (
    "SELECT job_id, run_id, schedule_time, due_time FROM job_runs "
    "WHERE state = 'SCHEDULED' AND due_time < now() + interval '5 minutes' ORDER BY due_time"
)
SWEEPER = (
    "SELECT job_id, run_id, schedule_time, attempt FROM job_runs "
    "WHERE state = 'RUNNING' AND last_heartbeat_time < now() - interval '15 seconds'"
)
DUE_JOBS = (
    "SELECT job_id, next_run_time FROM jobs "
    "WHERE state = 'ACTIVE' AND next_run_time < now() + interval '5 minutes' ORDER BY next_run_time"
)


@pytest.fixture(scope="module")
def loaded(new_pg_schema: Callable[[str], Any]) -> Iterator[SqlStore]:
    with new_pg_schema("jm_plans") as url:
        upgrade(url)
        store = SqlStore(url, retention_days=PAST_DAYS * 2, partition_ahead_days=PAST_DAYS + AHEAD_DAYS)
        try:
            store.maintain_partitions(datetime.now(UTC) - timedelta(days=PAST_DAYS))
            with store.engine.begin() as connection:
                connection.execute(text(LOAD_JOBS))
                connection.execute(text(LOAD_RUNS))
            with store.engine.connect() as connection:
                connection.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))
            yield store
        finally:
            store.close()


def _plan(connection: Connection, statement: str, parameters: Any = None) -> dict[str, Any]:
    raw = connection.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", parameters or {}).scalar()
    document = raw if isinstance(raw, list) else json.loads(str(raw))
    return dict(document[0]["Plan"])


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _check(connection: Connection, plan: dict[str, Any], index: str) -> None:
    """No sequential scan of a big relation, and `index` (or its per-partition copies) is used. (The empty
    DEFAULT partition may be read sequentially: that costs nothing.)"""
    sizes: dict[str, float] = dict(
        connection.execute(text("SELECT relname, reltuples FROM pg_class WHERE relkind = 'r'")).all()
    )
    parents: dict[str, str] = dict(
        connection.execute(
            text(
                "SELECT c.relname, p.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE c.relkind = 'i'"
            )
        ).all()
    )
    nodes = list(_nodes(plan))
    big_seq_scans = [
        n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan" and sizes[n["Relation Name"]] > BIG
    ]
    assert big_seq_scans == [], json.dumps(plan, indent=1)
    used = {parents.get(n["Index Name"], n["Index Name"]) for n in nodes if "Index Name" in n}
    assert index in used, json.dumps(plan, indent=1)


def _captured(store: SqlStore, call: Callable[[], object]) -> list[tuple[str, Any]]:
    statements: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        call()
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    return statements


@pytest.mark.parametrize(
    ("statement", "index"),
    [
        (WATCHER_WINDOW, "ix_job_runs_due"),
        (SWEEPER, "ix_job_runs_heartbeat"),
        (DUE_JOBS, "ix_jobs_next_run_time"),
    ],
)
def test_pipeline_scans_use_their_partial_indexes(loaded: SqlStore, statement: str, index: str) -> None:
    with loaded.engine.connect() as connection:
        _check(connection, _plan(connection, statement), index)


def test_get_run_probes_each_partition_by_primary_key(loaded: SqlStore) -> None:
    # A busy job's run: the (job_id, run_id, ...) primary key prefix finds it without reading the job's
    # other runs (for a job with a few runs per partition any job_id index would do).
    assert loaded.get_run("job000005", "run0100040").job_id == "job000005"
    [(statement, parameters), _attempts] = _captured(
        loaded, lambda: loaded.get_run("job000005", "run0100040")
    )
    with loaded.engine.connect() as connection:
        _check(connection, _plan(connection, statement, parameters), "pk_job_runs")


def test_runs_of_a_job_page_by_index(loaded: SqlStore) -> None:
    first = ListQuery((), DEFAULT_RUN_ORDER, 3, "")
    token = loaded.list_runs("job000005", first).next_page_token
    assert token
    second = ListQuery((), DEFAULT_RUN_ORDER, 3, token)
    for query in (first, second):
        [(statement, parameters)] = _captured(loaded, partial(loaded.list_runs, "job000005", query))
        with loaded.engine.connect() as connection:
            _check(connection, _plan(connection, statement, parameters), "ix_job_runs_job_schedule")


def test_default_job_listing_pages_by_index(loaded: SqlStore) -> None:
    first = ListQuery((), DEFAULT_JOB_ORDER, 50, "")
    token = loaded.list_jobs(first, show_deleted=False).next_page_token
    second = ListQuery((), DEFAULT_JOB_ORDER, 50, token)
    for query in (first, second):
        [(statement, parameters)] = _captured(loaded, partial(loaded.list_jobs, query, show_deleted=False))
        with loaded.engine.connect() as connection:
            _check(connection, _plan(connection, statement, parameters), "ix_jobs_create_time")


@pytest.mark.parametrize(
    "comparison", [Comparison("labels", "=", "gold", "tier"), Comparison("labels", ":", None, "tier")]
)
def test_a_rare_label_is_found_through_the_gin_index(loaded: SqlStore, comparison: Comparison) -> None:
    query = ListQuery((comparison,), DEFAULT_JOB_ORDER, 50, "")
    [(statement, parameters)] = _captured(loaded, lambda: loaded.list_jobs(query, show_deleted=False))
    with loaded.engine.connect() as connection:
        _check(connection, _plan(connection, statement, parameters), "ix_jobs_labels")
