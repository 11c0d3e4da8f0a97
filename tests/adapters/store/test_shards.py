"""Shards in the store: every job and run carries its shard, the watcher's scans read only the shards asked
for, shard leases are taken many at once, and a scan can read only what changed since the one before."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.exc import IntegrityError

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.records import ScheduleKind
from jobmesh.core.shards import SHARDS, shard_of
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import at, spec
from tests.adapters.store.pipeline_support import add_job, add_run, ref

TTL = timedelta(seconds=10)


def jobs_in_distinct_shards(count: int, prefix: str = "job") -> list[str]:
    """Job ids whose shards all differ."""
    found: dict[int, str] = {}
    n = 0
    while len(found) < count:
        found.setdefault(shard_of(f"{prefix}-{n}"), f"{prefix}-{n}")
        n += 1
    return list(found.values())


def test_the_shard_of_a_job_is_stable_and_spread() -> None:
    assert shard_of("alpha") == shard_of("alpha") == 26  # the same in every process and release
    counts = [0] * SHARDS
    for n in range(64_000):
        counts[shard_of(f"job-{n}")] += 1
    assert 850 < min(counts) <= max(counts) < 1150  # about 1,000 each


def test_jobs_runs_and_open_runs_carry_their_jobs_shard(backend: Backend) -> None:
    store = backend.store
    job_ids = jobs_in_distinct_shards(3)
    for job_id in job_ids:
        add_job(store, job_id)
        add_run(store, 60, job_id=job_id)
    expected = {(job_id, shard_of(job_id)) for job_id in job_ids}
    assert set(backend.execute("SELECT job_id, shard FROM jobs")) == expected
    assert set(backend.execute("SELECT job_id, shard FROM job_runs")) == expected
    assert set(backend.execute("SELECT job_id, shard FROM open_runs")) == expected


def test_due_runs_reads_the_shards_asked_for_and_the_slice_after(store: SqlStore) -> None:
    mine, other = jobs_in_distinct_shards(2)
    add_job(store, mine)
    add_job(store, other)
    early, late = add_run(store, 10, job_id=mine), add_run(store, 50, job_id=mine)
    add_run(store, 20, job_id=other)
    due = store.due_runs(at(60), limit=10, shards=[shard_of(mine)])
    assert [item.run for item in due] == [early, late]
    entering = store.due_runs(at(60), limit=10, shards=[shard_of(mine)], after=at(10))
    assert [item.run for item in entering] == [late]
    assert len(store.due_runs(at(60), limit=10)) == 3  # every shard by default


def test_cron_jobs_due_reads_the_shards_asked_for(store: SqlStore) -> None:
    mine, other = jobs_in_distinct_shards(2, "cron")
    for job_id in (mine, other):
        add_job(store, job_id, schedule_kind=ScheduleKind.CRON, next_run_time=at(10))
    due = store.cron_jobs_due(at(60), limit=10, shards=[shard_of(mine)])
    assert [job.job_id for job in due] == [mine]
    assert {job.job_id for job in store.cron_jobs_due(at(60), limit=10)} == {mine, other}


def test_leases_are_taken_and_renewed_many_at_once(store: SqlStore) -> None:
    assert store.try_leases(["s/1", "s/2"], "w1", TTL, at(0)) == {"s/1", "s/2"}
    assert store.try_leases(["s/2", "s/3"], "w2", TTL, at(1)) == {"s/3"}  # s/2 is w1's until at(10)
    assert store.try_leases(["s/1", "s/2"], "w1", TTL, at(5)) == {"s/1", "s/2"}  # renewed to at(15)
    assert store.try_leases(["s/2"], "w2", TTL, at(14)) == frozenset()
    assert store.try_leases(["s/2"], "w2", TTL, at(15)) == {"s/2"}  # expired: taken over
    assert store.try_leases([], "w1", TTL, at(15)) == frozenset()
    leases = store.leases("s/")
    assert {name: lease.holder for name, lease in leases.items()} == {"s/1": "w1", "s/2": "w2", "s/3": "w2"}
    assert leases["s/2"].expires_at == at(25)
    assert store.leases("nothing/") == {}


def test_a_scan_after_a_cursor_reads_only_the_runs_changed_since(store: SqlStore) -> None:
    mine, other = jobs_in_distinct_shards(2, "inc")
    add_job(store, mine)
    add_job(store, other)
    before = [add_run(store, 10 + n, job_id=mine) for n in range(20)]
    cursor = store.feed_cursor()
    created = add_run(store, 40, job_id=mine)
    add_run(store, 41, job_id=other)  # another shard's
    add_run(store, 400, job_id=mine)  # beyond the window
    store.mark_queued([ref(before[0])], at(5))  # no longer SCHEDULED
    changed = store.due_runs_changed(cursor, at(60), shards=[shard_of(mine)], limit=100)
    assert [item.run for item in changed.runs] == [created]
    assert changed.runs[0].job == spec(mine)
    assert changed.read == 2, "only the changed runs of the shard left SCHEDULED are read, not the 20 before"
    assert changed.complete
    again = store.due_runs_changed(changed.cursor, at(60), shards=[shard_of(mine)], limit=100)
    assert (again.runs, again.read) == ([], 0)


def test_a_scan_after_a_cursor_pages(store: SqlStore) -> None:
    add_job(store)
    cursor = store.feed_cursor()
    runs = [add_run(store, 10 + n) for n in range(5)]
    first = store.due_runs_changed(cursor, at(60), shards=[shard_of("alpha")], limit=3)
    assert (len(first.runs), first.complete) == (3, False)
    rest = store.due_runs_changed(first.cursor, at(60), shards=[shard_of("alpha")], limit=3)
    assert rest.complete
    assert {item.run.run_id for item in [*first.runs, *rest.runs]} == {run.run_id for run in runs}


@pytest.mark.parametrize("prefix", ["watcher-shard/", "watcher-member/"])
def test_lease_prefixes_do_not_match_other_names(store: SqlStore, prefix: str) -> None:
    store.try_leases([f"{prefix}01", "watcher", "watcher-shard", "other"], "w1", TTL, at(0))
    assert set(store.leases(prefix)) == {f"{prefix}01"}


@pytest.mark.postgres
def test_postgresql_refuses_a_shard_out_of_range(backend: Backend) -> None:
    if backend.name != "postgres":
        pytest.skip("SQLite keeps no check on the column it added (migration 0010)")
    with pytest.raises(IntegrityError, match="ck_jobs_shard"):
        backend.execute(
            "INSERT INTO jobs (job_id, spec, display_name, labels, schedule_kind, priority, queue, state,"
            " create_time, update_time, version, shard) VALUES ('far', '', 'far', '{}', 'RUN_AT', 'NORMAL',"
            " 'default', 'ACTIVE', now(), now(), 1, :shard)",
            {"shard": SHARDS},
        )
