"""Flow control at claim, on every backend: a key's limit and a queue's pace hold across claims."""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.flow_control import FLOW_LEAD, KEY_RETRY, Concurrency, Pacing
from jobmesh.core.ports.pipeline_store import ClaimStatus
from jobmesh.core.records import RunState
from tests.adapters.store.builders import at
from tests.adapters.store.pipeline_support import add_job, add_run, end, finish, ref

PACED = {"default": Pacing(10)}
_NUMBERS = itertools.count()


@pytest.fixture(autouse=True)
def alpha(store: SqlStore) -> str:
    return add_job(store)  # no key


def keyed_jobs(store: SqlStore, count: int, key: str = "customer-1", limit: int = 1) -> list[str]:
    concurrency = Concurrency(key, limit)
    return [add_job(store, f"keyed-{next(_NUMBERS)}", concurrency=concurrency) for _ in range(count)]


def test_a_key_at_its_limit_defers_the_claim_and_admits_it_after_a_release(store: SqlStore) -> None:
    first, second = keyed_jobs(store, 2)
    runs = [add_run(store, 60, job_id=job_id, state=RunState.QUEUED) for job_id in (first, second)]
    claims = store.claim([ref(r) for r in runs], "ex1", at(61))
    assert [c.status for c in claims] == [ClaimStatus.GRANTED, ClaimStatus.DEFERRED]
    assert claims[1].retry_time == at(61) + KEY_RETRY
    assert claims[1].run is None
    assert store.get_run(second, runs[1].run_id).state is RunState.QUEUED  # left pending, untouched
    [again] = store.claim([ref(runs[1])], "ex2", at(62))  # another executor, while the first runs
    assert again.status is ClaimStatus.DEFERRED
    assert finish(store, [end(ref(runs[0]), end_time=at(63))]) == [ref(runs[0])]
    [admitted] = store.claim([ref(runs[1])], "ex2", at(64))
    assert admitted.status is ClaimStatus.GRANTED
    assert admitted.run is not None
    assert admitted.run.start_time == at(64)


def test_a_stopping_run_holds_its_key_and_other_keys_and_unkeyed_runs_pass(store: SqlStore) -> None:
    [busy] = keyed_jobs(store, 1, "busy", limit=1)
    add_run(store, 10, job_id=busy, state=RunState.CANCELLING, executor="ex0", start_time=at(10))
    [waiting] = keyed_jobs(store, 1, "busy", limit=1)
    [other] = keyed_jobs(store, 1, "other", limit=2)
    runs = [
        add_run(store, 60, job_id=waiting),
        add_run(store, 60, job_id=other),
        add_run(store, 60, job_id=other),
        add_run(store, 60, job_id=other),
        add_run(store, 60),  # alpha: no key
    ]
    claims = store.claim([ref(r) for r in runs], "ex1", at(61))
    assert [c.status for c in claims] == [
        ClaimStatus.DEFERRED,
        ClaimStatus.GRANTED,
        ClaimStatus.GRANTED,
        ClaimStatus.DEFERRED,
        ClaimStatus.GRANTED,
    ]


def test_each_job_keeps_its_own_limit_for_a_shared_key(store: SqlStore) -> None:
    [narrow] = keyed_jobs(store, 1, "shared", limit=1)
    [wide] = keyed_jobs(store, 1, "shared", limit=2)
    held = add_run(store, 60, job_id=wide)
    assert store.claim([ref(held)], "ex1", at(61))[0].status is ClaimStatus.GRANTED
    late = [add_run(store, 60, job_id=narrow), add_run(store, 60, job_id=wide)]
    claims = store.claim([ref(r) for r in late], "ex1", at(62))
    assert [c.status for c in claims] == [ClaimStatus.DEFERRED, ClaimStatus.GRANTED]


def test_a_changed_key_is_stored_and_counts_at_the_next_claim(store: SqlStore) -> None:
    [job_id] = keyed_jobs(store, 1, "before", limit=1)
    current = store.get_job(job_id)
    assert current is not None
    assert current.concurrency == Concurrency("before", 1)
    store.update_job(
        replace(current, concurrency=None, version=current.version + 1), expected_version=current.version
    )
    changed = store.get_job(job_id)
    assert changed is not None
    assert changed.concurrency is None
    runs = [add_run(store, 60, job_id=job_id) for _ in range(3)]
    assert [c.status for c in store.claim([ref(r) for r in runs], "ex1", at(61))] == [ClaimStatus.GRANTED] * 3


def test_concurrent_claims_of_a_key_admit_no_more_than_its_limit(store: SqlStore) -> None:
    jobs = keyed_jobs(store, 8, "race", limit=2)
    runs = [add_run(store, 60, job_id=job_id, state=RunState.QUEUED) for job_id in jobs]
    barrier = threading.Barrier(len(runs))

    def claim(index: int) -> ClaimStatus:
        barrier.wait()
        return store.claim([ref(runs[index])], f"ex{index}", at(61))[0].status

    with ThreadPoolExecutor(len(runs)) as pool:
        statuses = list(pool.map(claim, range(len(runs))))
    assert sorted(s.value for s in statuses) == ["deferred"] * 6 + ["granted"] * 2
    running = [store.get_run(r.job_id, r.run_id) for r in runs]
    assert sum(1 for r in running if r is not None and r.state is RunState.RUNNING) == 2


def test_a_paced_queue_spaces_its_starts_across_claims(store: SqlStore) -> None:
    runs = [add_run(store, 60, state=RunState.QUEUED) for _ in range(8)]
    claims = store.claim([ref(r) for r in runs[:4]], "ex1", at(61), queue_rates=PACED)
    later = store.claim([ref(r) for r in runs[4:]], "ex2", at(61.05), queue_rates=PACED)
    statuses = [c.status for c in claims + later]
    assert statuses == [ClaimStatus.GRANTED] * 6 + [ClaimStatus.DEFERRED] * 2
    starts = [c.run.start_time for c in claims + later if c.run is not None]
    assert starts == [at(61 + n / 10) for n in range(6)]
    assert [c.retry_time for c in later[2:]] == [at(61.6) - FLOW_LEAD] * 2
    stored = [store.get_run(r.job_id, r.run_id) for r in runs[:6]]
    assert [r.start_time for r in stored if r is not None] == starts
    # Unpaced, the same queue's runs start at once: the pace is the server's setting, not the store's.
    [free] = store.claim([ref(runs[6])], "ex1", at(61.1))
    assert free.status is ClaimStatus.GRANTED
    assert free.run is not None
    assert free.run.start_time == at(61.1)


def test_claims_granted_on_their_fences_are_not_held_back(store: SqlStore) -> None:
    first, second = keyed_jobs(store, 2)
    runs = [add_run(store, 60, job_id=job_id, state=RunState.QUEUED) for job_id in (first, second)]
    claims = store.claim([ref(r) for r in runs], "ex1", at(61), on_fence=True, queue_rates=PACED)
    assert [c.status for c in claims] == [ClaimStatus.GRANTED] * 2


def test_an_admitted_run_starts_no_earlier_than_the_clock_read_after_the_count(store: SqlStore) -> None:
    """The caller read `now` before the claim's transaction, which may have waited for the end of a run of
    the key: the admitted run's start is the clock's, after that end, not the stale `now`."""
    [job_id] = keyed_jobs(store, 1, "timed")
    waiting = add_run(store, 60, job_id=job_id)
    [claim] = store.claim([ref(waiting)], "ex1", at(61), clock=lambda: at(61.25))
    assert claim.run is not None
    assert claim.run.start_time == at(61.25)
    # Unkeyed and unpaced, a claim starts its run at `now`, as before.
    plain = add_run(store, 60)
    [claim] = store.claim([ref(plain)], "ex1", at(61), clock=lambda: at(61.25))
    assert claim.run is not None
    assert claim.run.start_time == at(61)


def test_a_key_counts_within_its_namespace(store: SqlStore) -> None:
    concurrency = Concurrency("customer-1", 1)
    mine = add_job(store, f"keyed-{next(_NUMBERS)}", concurrency=concurrency, namespace="team-a")
    theirs = add_job(store, f"keyed-{next(_NUMBERS)}", concurrency=concurrency, namespace="team-b")
    held = add_run(store, 60, job_id=mine, namespace="team-a")
    assert store.claim([ref(held)], "ex1", at(61))[0].status is ClaimStatus.GRANTED
    runs = [
        add_run(store, 60, job_id=theirs, namespace="team-b"),
        add_run(store, 60, job_id=mine, namespace="team-a"),
    ]
    claims = store.claim([ref(r) for r in runs], "ex1", at(62))
    assert [c.status for c in claims] == [ClaimStatus.GRANTED, ClaimStatus.DEFERRED]
