"""The indexes earn their keep: on a realistic volume (20k jobs, 200k runs over 38 daily partitions), the hot
queries are index scans, never sequential scans of a big table. INDEXES.md records the plans and the reasons.

The store's own statements (get_run, list_runs, list_jobs, and the pipeline's scans, claims, heartbeats and
occurrence checks) are captured as they execute and EXPLAINed with their real parameters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from sqlalchemy import Connection, event, text

from jobmesh.adapters.store.migrate import upgrade
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.filters import DEFAULT_JOB_ORDER, DEFAULT_RUN_ORDER, Comparison, ListQuery, OrderKey
from jobmesh.core.ids import new_run_id
from jobmesh.core.ports.pipeline_store import Heartbeat
from jobmesh.core.ports.store import Page
from jobmesh.core.records import RunState
from jobmesh.core.shards import SHARDS
from tests.adapters.store.builders import run
from tests.adapters.store.pipeline_support import end

pytestmark = pytest.mark.postgres

JOBS, RUNS, PAST_DAYS, AHEAD_DAYS, NAMESPACES = 20_000, 200_000, 30, 7, 20
BIG = 1_000  # a sequential scan of a relation with more rows than this fails the test

LOAD_JOBS = f"""
INSERT INTO jobs (job_id, spec, display_name, labels, schedule_kind, priority, queue, state, next_run_time,
                  create_time, update_time, version, namespace, shard)
SELECT 'job' || lpad(i::text, 6, '0'), '\\x0a00'::bytea, 'job ' || i,
       jsonb_build_object('team', 'team' || i % 40)
         || CASE WHEN i % 1000 = 7 THEN jsonb_build_object('tier', 'gold') ELSE '{{}}'::jsonb END,
       (ARRAY['IMMEDIATE', 'RUN_AT', 'CRON'])[1 + i % 3], 'NORMAL', 'default',
       CASE WHEN i % 20 = 0 THEN 'PAUSED' WHEN i % 50 = 1 THEN 'DELETED' ELSE 'ACTIVE' END,
       CASE WHEN i % 3 = 2 THEN now() + (i % 1440) * interval '1 minute' END,
       now() - interval '90 days' + i * interval '6 minutes', now(), 1, 'ns' || i % {NAMESPACES},
       i % {SHARDS}
FROM generate_series(1, {JOBS}) AS i
"""


# Runs spread evenly from 30 days ago to 7 days ahead: the past finished (4% failed), the last 30 minutes
# running (some with a stale heartbeat) but for the last 3 minutes' QUEUED ones (some never claimed), the
# future scheduled. A tenth belong to five busy jobs (about 110 runs a day each, like frequent cron jobs),
# the rest to everyone else. A run lies in its job's namespace.
LOAD_RUNS = f"""
INSERT INTO job_runs (job_id, run_id, schedule_time, attempt, due_time, state, trigger, priority, queue,
                      executor, dispatch_time, start_time, last_heartbeat_time, heartbeat_deadline, end_time,
                      progress, progress_message, create_time, update_time, namespace, shard)
SELECT 'job' || lpad(job::text, 6, '0'), 'run' || lpad(i::text, 7, '0'), t, 1, t, state,
       'SCHEDULE', 'NORMAL', 'default',
       CASE WHEN state NOT IN ('SCHEDULED', 'QUEUED') THEN 'executor-' || i % 16 END,
       CASE WHEN state <> 'SCHEDULED' THEN t END,
       CASE WHEN state NOT IN ('SCHEDULED', 'QUEUED') THEN t END,
       CASE WHEN state = 'RUNNING' THEN now() - (i % 40) * interval '1 second' END,
       CASE WHEN state = 'RUNNING' THEN now() + (15 - i % 40) * interval '1 second' END,
       CASE WHEN state IN ('SUCCEEDED', 'FAILED') THEN t + interval '3 seconds' END,
       0, '', t, t, 'ns' || job % {NAMESPACES}, job % {SHARDS}
FROM (
    SELECT i, t, CASE WHEN i % 10 = 0 THEN 1 + i / 10 % 5 ELSE 1 + i % {JOBS} END AS job,
           CASE WHEN t > now() THEN 'SCHEDULED'
                WHEN t > now() - interval '3 minutes' THEN 'QUEUED'
                WHEN t > now() - interval '30 minutes' THEN 'RUNNING'
                WHEN i % 25 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END AS state
    FROM (SELECT i, now() - interval '{PAST_DAYS} days'
                    + i * (interval '{PAST_DAYS + AHEAD_DAYS} days' / {RUNS}) AS t
          FROM generate_series(1, {RUNS}) AS i) AS spread
) AS runs
"""

# Yesterday (UTC) was busy: 150k more finished runs in its partition, about 1.7 runs a second, still far
# below the headline load. Batched lookups are compared against a partition of that size: against the other
# days' ~5k rows a sequential scan is honestly cheaper than 50 index probes.
BUSY_DAY_RUNS = 150_000
YESTERDAY = "(date_trunc('day', now() AT TIME ZONE 'UTC') - interval '1 day') AT TIME ZONE 'UTC'"
LOAD_BUSY_DAY = f"""
INSERT INTO job_runs (job_id, run_id, schedule_time, attempt, due_time, state, trigger, priority, queue,
                      executor, dispatch_time, start_time, end_time, progress, progress_message,
                      create_time, update_time, namespace, shard)
SELECT 'job' || lpad((1 + i % {JOBS})::text, 6, '0'), 'busy' || lpad(i::text, 7, '0'), t, 1, t, 'SUCCEEDED',
       'SCHEDULE', 'NORMAL', 'default', 'executor-' || i % 16, t, t, t + interval '3 seconds', 0, '', t, t,
       'ns' || (1 + i % {JOBS}) % {NAMESPACES}, (1 + i % {JOBS}) % {SHARDS}
FROM (SELECT i, {YESTERDAY} + i * (interval '1 day' / {BUSY_DAY_RUNS}) AS t
      FROM generate_series(0, {BUSY_DAY_RUNS - 1}) AS i) AS spread
"""

# What one of two watchers holds: every other shard. Its window is found by a range of `ix_open_runs_wake`
# filtered by shard (35 rows here) or a range of `ix_open_runs_shard_wake` per shard, as the planner judges;
# one shard's (a watcher among many) by the latter.
HALF = tuple(range(0, SHARDS, 2))
EITHER_WINDOW = ("ix_open_runs_shard_wake", "ix_open_runs_wake")
WATCHER_WINDOW = (
    "SELECT job_id, run_id, schedule_time, wake_time FROM open_runs "
    f"WHERE shard IN {HALF} AND state = 'SCHEDULED' AND wake_time < now() + interval '5 minutes' "
    "ORDER BY wake_time"
)
SWEEPER = (
    "SELECT job_id, run_id, schedule_time, wake_time FROM open_runs "
    "WHERE state IN ('RUNNING', 'CANCELLING') AND wake_time < now()"
)
DUE_JOBS = (
    "SELECT job_id, next_run_time FROM jobs "
    f"WHERE shard IN {HALF} AND state = 'ACTIVE' AND next_run_time < now() + interval '5 minutes' "
    "ORDER BY next_run_time"
)


# The indexes that hold a run's whole key, (job_id, run_id, schedule_time), in some order: a probe by key may
# go through any of them, whichever the planner takes (`_probes_per_key` checks that it is by key).
_KEY_INDEXES = ("pk_job_runs", "ix_job_runs_job_schedule", "ix_job_runs_schedule")


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
                connection.execute(text(LOAD_BUSY_DAY))
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


def _check(connection: Connection, plan: dict[str, Any], index: str | tuple[str, ...]) -> None:
    """No sequential scan of a big relation, and `index` (or its per-partition copies; or one of several)
    is used. (The empty DEFAULT partition may be read sequentially: that costs nothing.)"""
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
    assert used & ({index} if isinstance(index, str) else set(index)), json.dumps(plan, indent=1)


def _captured(
    store: SqlStore, call: Callable[[], object], kinds: tuple[str, ...] = ("SELECT",)
) -> list[tuple[str, Any]]:
    statements: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith(kinds):
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
        (WATCHER_WINDOW, EITHER_WINDOW),
        (SWEEPER, "ix_open_runs_wake"),
        (DUE_JOBS, "ix_jobs_shard_next_run_time"),
    ],
)
def test_pipeline_scans_use_their_indexes(
    loaded: SqlStore, statement: str, index: str | tuple[str, ...]
) -> None:
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


def test_default_run_listing_of_every_job_pages_by_index(loaded: SqlStore) -> None:
    """ListRuns of every job, unscoped (no authentication, or a caller who sees every namespace), walks each
    namespace's runs in order: before, each page read and sorted every run of every partition (150 ms a page
    here). Twenty namespaces, more than a scope's branches (`MAX_NAMESPACE_BRANCHES`)."""
    first = ListQuery((), DEFAULT_RUN_ORDER, 50, "")
    token = loaded.list_runs(None, first).next_page_token
    second = ListQuery((), DEFAULT_RUN_ORDER, 50, token)
    for query in (first, second):
        [(statement, parameters)] = _captured(loaded, partial(loaded.list_runs, None, query))
        with loaded.engine.connect() as connection:
            _check(connection, _plan(connection, statement, parameters), "ix_job_runs_namespace_schedule")


@pytest.mark.parametrize(
    "comparison", [Comparison("labels", "=", "gold", "tier"), Comparison("labels", ":", None, "tier")]
)
def test_a_rare_label_is_found_through_the_gin_index(loaded: SqlStore, comparison: Comparison) -> None:
    query = ListQuery((comparison,), DEFAULT_JOB_ORDER, 50, "")
    [(statement, parameters)] = _captured(loaded, lambda: loaded.list_jobs(query, show_deleted=False))
    with loaded.engine.connect() as connection:
        _check(connection, _plan(connection, statement, parameters), "ix_jobs_labels")


# The pipeline's own statements -----------------------------------------------------------------------------


def _partitions_read(plan: dict[str, Any]) -> set[str]:
    return {
        n["Relation Name"]
        for n in _nodes(plan)
        if n.get("Relation Name", "").startswith(("job_runs_p", "job_runs_default"))
    }


@pytest.mark.parametrize(
    ("call", "index"),
    [
        (lambda s, now: s.lost_attempts(now, limit=1000), "ix_open_runs_wake"),
        (lambda s, now: s.stale_queued(now - timedelta(minutes=1), limit=1000), "ix_open_runs_wake"),
        (
            lambda s, now: s.due_runs(now + timedelta(minutes=5), limit=1000, shards=HALF),
            EITHER_WINDOW,
        ),
        (
            lambda s, now: s.due_runs(now + timedelta(minutes=5), limit=1000, shards=[7]),
            "ix_open_runs_shard_wake",
        ),
        (  # an incremental scan's slice: what entered the window since the scan before
            lambda s, now: s.due_runs(
                now + timedelta(minutes=5), limit=1000, shards=HALF, after=now + timedelta(minutes=4)
            ),
            EITHER_WINDOW,
        ),
        (
            lambda s, now: s.active_runs([f"job{i:06d}" for i in range(1, 200)]),
            ("pk_open_runs", "ix_open_runs_wake"),
        ),
        (
            lambda s, now: s.cron_jobs_due(now + timedelta(minutes=5), limit=1000, shards=HALF),
            "ix_jobs_shard_next_run_time",
        ),
    ],
    ids=[
        "sweeper",
        "stale_queued",
        "due_runs",
        "due_runs_of_one_shard",
        "due_runs_entering",
        "active_runs",
        "cron_jobs_due",
    ],
)
def test_the_watchers_scans_use_their_indexes(
    loaded: SqlStore, call: Callable[[SqlStore, datetime], object], index: str | tuple[str, ...]
) -> None:
    now = datetime.now(UTC)
    [(statement, parameters), *specs] = _captured(loaded, lambda: call(loaded, now))
    with loaded.engine.connect() as connection:
        _check(connection, _plan(connection, statement, parameters), index)
        for spec_statement, spec_parameters in specs:  # the found runs' jobs, by primary key
            _check(connection, _plan(connection, spec_statement, spec_parameters), "jobs_pkey")


def test_claims_heartbeats_and_ends_touch_one_partition_by_primary_key(loaded: SqlStore) -> None:
    noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=1)
    moment = noon + timedelta(days=1)
    runs = []
    for i in range(50):  # runs of the busy day with real run ids (late: dispatched after an outage)
        schedule_time = noon + timedelta(seconds=i)
        record = run(
            "job000005", new_run_id(schedule_time), schedule_time=schedule_time, due_time=schedule_time
        )
        loaded.create_run(replace(record, state=RunState.QUEUED))
        runs.append(record)
    refs = [AttemptRef(r.job_id, r.run_id, 1) for r in runs]
    statements = _captured(loaded, lambda: loaded.claim(refs, "bench", moment), ("SELECT", "UPDATE"))
    beats = [Heartbeat(ref, moment + timedelta(seconds=15)) for ref in refs]
    statements += _captured(loaded, lambda: loaded.heartbeat("bench", beats, moment), ("SELECT", "UPDATE"))
    ended = moment + timedelta(seconds=1)
    ends = {ref: end(ref, RunState.SUCCEEDED, end_time=ended) for ref in refs}

    def decide(current: Dispatchable) -> AttemptEnd:
        return ends[AttemptRef.of(current.run)]

    statements += _captured(loaded, lambda: loaded.finish_attempts(refs, decide), ("SELECT", "UPDATE"))
    # Each: the runs locked one key at a time in their day's partition (an index probe by job, run and the
    # millisecond of the run id, whichever index leading with the job the planner takes), then found again
    # one key at a time and written through their row ids. An end's lock reads each run's job definition
    # too, by the jobs' primary key (no sequential scan of the 20k jobs, which `_check` would fail).
    assert [s.split()[0] for s, _ in statements] == ["SELECT", "UPDATE"] * 3
    with loaded.engine.connect() as connection:
        for statement, parameters in statements:
            plan = _plan(connection, statement, parameters)
            assert len(_partitions_read(plan)) == 1, json.dumps(plan, indent=1)
            _check(connection, plan, _KEY_INDEXES)
            assert _probes_per_key(plan), json.dumps(plan, indent=1)


def _small_run_partitions(connection: Connection, rows: float = BIG) -> frozenset[str]:
    """The run partitions that held fewer than `rows` when last analysed: the planner may read one whole,
    as `_check` allows of any small relation."""
    statement = text("SELECT relname FROM pg_class WHERE relname LIKE 'job_runs_%' AND reltuples < :rows")
    return frozenset(connection.execute(statement, {"rows": rows}).scalars())


def _probes_per_key(plan: dict[str, Any], empty: frozenset[str] = frozenset({"job_runs_default"})) -> bool:
    """Every read of a run partition finds one key of the batch: an index scan whose conditions hold the
    key's job, run and schedule time (not a range of the partition read into a hash), or a fetch by the
    row id such a scan found. (An `empty` partition, such as DEFAULT, may be read whole: that costs
    nothing.)"""
    reads = [
        n
        for n in _nodes(plan)
        if n.get("Relation Name", "").startswith("job_runs_") and n["Relation Name"] not in empty
    ]

    def one_key(node: dict[str, Any]) -> bool:
        if node["Node Type"] == "Tid Scan":
            return str(node.get("TID Cond", "")).startswith("(ctid = ")
        condition = str(node.get("Index Cond", ""))
        return node["Node Type"] == "Index Scan" and all(
            re.search(pattern, condition)
            for pattern in (r"job_id = \w+\.job_id", r"run_id = \w+\.run_id", r"schedule_time [<>=]+ \w+\.")
        )

    return bool(reads) and all(one_key(node) for node in reads)


def test_a_feed_read_of_a_rare_state_looks_its_changes_up_by_key(loaded: SqlStore) -> None:
    # The server's narrow read (runs being cancelled, none most of the time) after a few hundred changes:
    # the planner, left free, found no CANCELLING run cheaper by reading the day's runs whole.
    cursor = loaded.feed_cursor()
    with loaded.engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE job_runs SET update_time = now() WHERE run_id IN "
                "(SELECT run_id FROM job_runs WHERE state = 'SUCCEEDED' ORDER BY run_id DESC LIMIT 300)"
            )
        )
    states = frozenset({RunState.CANCELLING})
    [(statement, parameters)] = _captured(
        loaded, lambda: loaded.changes_after(cursor, limit=500, states=states)
    )
    with loaded.engine.connect() as connection:
        plan = _plan(connection, statement, parameters)
        _check(connection, plan, _KEY_INDEXES)
        # The oldest day's partition holds a few runs only when the suite runs late in the (UTC) day.
        assert _probes_per_key(plan, _small_run_partitions(connection)), json.dumps(plan, indent=1)


def test_a_watchers_read_of_its_shards_changes_looks_them_up_by_key(loaded: SqlStore) -> None:
    # An incremental window scan: the SCHEDULED runs of half the shards changed since the scan before.
    cursor = loaded.feed_cursor()
    with loaded.engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE job_runs SET update_time = now() WHERE run_id IN "
                "(SELECT run_id FROM job_runs WHERE state = 'SCHEDULED' ORDER BY run_id LIMIT 300)"
            )
        )
    until = datetime.now(UTC) + timedelta(minutes=5)
    [(statement, parameters), *_] = _captured(
        loaded, lambda: loaded.due_runs_changed(cursor, until, shards=HALF, limit=5000)
    )
    with loaded.engine.connect() as connection:
        plan = _plan(connection, statement, parameters)
        _check(connection, plan, _KEY_INDEXES)
        # The oldest day's partition holds a few runs only when the suite runs late in the (UTC) day.
        assert _probes_per_key(plan, _small_run_partitions(connection)), json.dumps(plan, indent=1)


STALE_RUNS = 30_000


def test_a_sweep_looks_runs_up_by_key_when_the_open_runs_statistics_are_stale(
    new_pg_schema: Callable[[str], Any],
) -> None:
    # Statistics taken while 30,000 runs were RUNNING with their heartbeats due, read after they all ended:
    # under load `open_runs` churns faster than autovacuum analyses it.
    now = datetime.now(UTC)
    with new_pg_schema("jm_stale") as url:
        upgrade(url)
        store = SqlStore(url)
        try:
            store.maintain_partitions(now)
            with store.engine.begin() as connection:
                connection.execute(text(LOAD_JOBS.replace(f"{JOBS}", "100")))
                connection.execute(text(STALE_RUNNING))
            with store.engine.connect() as connection:
                connection.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
            with store.engine.begin() as connection:
                connection.execute(text("UPDATE job_runs SET state = 'SUCCEEDED', end_time = now()"))
            [(statement, parameters)] = _captured(store, lambda: store.lost_attempts(now, limit=500))
            with store.engine.connect() as connection:
                plan = _plan(connection, statement, parameters)
                # `open_runs` may be read whole (its statistics say it is all due): autovacuum keeps it to
                # a few thousand rows, live and dead. The day's runs are read one key at a time.
                empty = _small_run_partitions(connection, rows=1)
            assert _probes_per_key(plan, empty), json.dumps(plan, indent=1)
        finally:
            store.close()


STALE_RUNNING = f"""
INSERT INTO job_runs (job_id, run_id, schedule_time, attempt, due_time, state, trigger, priority, queue,
                      executor, dispatch_time, start_time, last_heartbeat_time, heartbeat_deadline,
                      progress, progress_message, create_time, update_time, namespace, shard)
SELECT 'job' || lpad((1 + i % 100)::text, 6, '0'), 'run' || lpad(i::text, 7, '0'), t, 1, t, 'RUNNING',
       'SCHEDULE', 'NORMAL', 'default', 'executor-1', t, t, t, t + interval '1 second', 0, '', t, t,
       'ns' || (1 + i % 100) % {NAMESPACES}, (1 + i % 100) % {SHARDS}
FROM (SELECT i, now() - interval '1 hour' + i * interval '100 milliseconds' AS t
      FROM generate_series(1, {STALE_RUNS}) AS i) AS spread
"""


def test_the_occurrence_check_is_one_index_probe_in_one_partition(loaded: SqlStore) -> None:
    job = loaded.get_job("job000005")  # an active cron job with ~110 runs a day
    assert job.next_run_time is not None
    times = [job.next_run_time + timedelta(minutes=k) for k in range(3)]
    occurrences = [run(job.job_id, new_run_id(t), schedule_time=t, due_time=t) for t in times]
    statements = _captured(
        loaded,
        lambda: loaded.materialize(
            job.job_id,
            expected_next_run_time=job.next_run_time or times[0],
            runs=occurrences,
            next_run_time=times[-1] + timedelta(minutes=1),
            completed=False,
        ),
    )
    [(statement, parameters)] = [(s, p) for s, p in statements if "trigger" in s]
    with loaded.engine.connect() as connection:
        plan = _plan(connection, statement, parameters)
        _check(connection, plan, "ix_job_runs_job_schedule")
        days = {t.astimezone(UTC).date() for t in times}
        assert len(_partitions_read(plan)) == len(days), json.dumps(plan, indent=1)


# Namespace scopes (migration 0006) -------------------------------------------------------------------------


@pytest.mark.parametrize("namespaces", [frozenset({"ns3"}), frozenset({"ns3", "ns4", "ns5"})])
def test_scoped_lists_page_by_their_namespace_indexes(loaded: SqlStore, namespaces: frozenset[str]) -> None:
    calls: list[tuple[Callable[[ListQuery], object], tuple[OrderKey, ...], str]] = [
        (partial(loaded.list_runs, None), DEFAULT_RUN_ORDER, "ix_job_runs_namespace_schedule"),
        (partial(loaded.list_jobs, show_deleted=False), DEFAULT_JOB_ORDER, "ix_jobs_namespace_create_time"),
    ]
    for call, order, index in calls:
        first = ListQuery((), order, 50, "", namespaces)
        page = call(first)
        assert isinstance(page, Page)
        assert page.next_page_token
        assert {item.namespace for item in page.items} <= namespaces
        second = ListQuery((), order, 50, page.next_page_token, namespaces)
        for query in (first, second):
            [(statement, parameters)] = _captured(loaded, partial(call, query))
            with loaded.engine.connect() as connection:
                _check(connection, _plan(connection, statement, parameters), index)


@pytest.mark.parametrize(
    ("queue", "index"),
    [("io", "ix_open_runs_queue_state"), ("default", ("ix_open_runs_queue_state", "ix_open_runs_wake"))],
    ids=["quiet_queue", "busy_queue"],
)
def test_a_claim_counts_a_limited_queue_s_held_runs_by_an_index(
    loaded: SqlStore, queue: str, index: str | tuple[str, ...]
) -> None:
    """A queue's held runs are a range of `ix_open_runs_queue_state`; for the one queue of every run here,
    the planner may as well take the held runs of `ix_open_runs_wake` (the same rows)."""
    moment = datetime.now(UTC)
    record = run("job000005", new_run_id(moment), schedule_time=moment, due_time=moment, queue=queue)
    loaded.create_run(replace(record, state=RunState.QUEUED))
    refs = [AttemptRef(record.job_id, record.run_id, 1)]
    statements = _captured(loaded, lambda: loaded.claim(refs, "bench", moment, queue_limits={queue: 1000}))
    [(statement, parameters)] = [(s, p) for s, p in statements if "FROM open_runs" in s and "count(" in s]
    with loaded.engine.connect() as connection:
        _check(connection, _plan(connection, statement, parameters), index)
