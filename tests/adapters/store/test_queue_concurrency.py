"""A queue's concurrency limit at claim, on every backend: at most N runs of the queue held at once, across
claims, executors and namespaces."""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.flow_control import KEY_RETRY, Concurrency
from jobmesh.core.ports.pipeline_store import ClaimStatus
from jobmesh.core.records import RunRecord, RunState
from tests.adapters.store.builders import at
from tests.adapters.store.pipeline_support import add_job, add_run, end, finish, ref

LIMITED = {"io": 2}
_NUMBERS = itertools.count()


def io_runs(store: SqlStore, count: int, namespace: str = "default", **job: object) -> list[RunRecord]:
    job_id = add_job(store, f"io-{next(_NUMBERS)}", queue="io", namespace=namespace, **job)
    return [
        add_run(store, 60, job_id=job_id, queue="io", namespace=namespace, state=RunState.QUEUED)
        for _ in range(count)
    ]


def held(store: SqlStore, runs: list[RunRecord]) -> int:
    stored = [store.get_run(r.job_id, r.run_id) for r in runs]
    return sum(1 for r in stored if r is not None and r.state in (RunState.RUNNING, RunState.CANCELLING))


def test_a_queue_at_its_limit_defers_the_claim_and_admits_it_after_a_release(store: SqlStore) -> None:
    runs = io_runs(store, 3)
    claims = store.claim([ref(r) for r in runs], "ex1", at(61), queue_limits=LIMITED)
    assert [c.status for c in claims] == [ClaimStatus.GRANTED, ClaimStatus.GRANTED, ClaimStatus.DEFERRED]
    assert claims[2].retry_time == at(61) + KEY_RETRY
    assert claims[2].run is None
    assert store.get_run(runs[2].job_id, runs[2].run_id).state is RunState.QUEUED  # left pending
    [again] = store.claim([ref(runs[2])], "ex2", at(62), queue_limits=LIMITED)  # another executor
    assert again.status is ClaimStatus.DEFERRED
    assert finish(store, [end(ref(runs[0]), end_time=at(63))]) == [ref(runs[0])]
    [admitted] = store.claim([ref(runs[2])], "ex2", at(64), queue_limits=LIMITED)
    assert admitted.status is ClaimStatus.GRANTED
    assert admitted.run is not None
    assert admitted.run.start_time == at(64)
    assert held(store, runs) == 2


def test_a_queue_counts_stopping_runs_and_every_namespace_and_other_queues_pass(store: SqlStore) -> None:
    [stopping] = io_runs(store, 1, namespace="team-a")
    add_job(store, "busy-io", queue="io", namespace="team-b")
    add_run(
        store,
        10,
        job_id="busy-io",
        queue="io",
        namespace="team-b",
        state=RunState.CANCELLING,
        executor="ex0",
        start_time=at(10),
    )
    assert store.claim([ref(stopping)], "ex1", at(61), queue_limits=LIMITED)[0].status is ClaimStatus.GRANTED
    waiting = io_runs(store, 1, namespace="team-c")
    add_job(store, "elsewhere")
    free = [add_run(store, 60, job_id="elsewhere") for _ in range(3)]  # queue "default": no limit
    claims = store.claim([ref(r) for r in waiting + free], "ex1", at(62), queue_limits=LIMITED)
    assert [c.status for c in claims] == [ClaimStatus.DEFERRED] + [ClaimStatus.GRANTED] * 3


def test_a_run_over_its_key_takes_no_room_of_its_queue(store: SqlStore) -> None:
    keyed = io_runs(store, 2, concurrency=Concurrency("customer-1", 1))
    plain = io_runs(store, 1)
    claims = store.claim([ref(r) for r in keyed + plain], "ex1", at(61), queue_limits=LIMITED)
    assert [c.status for c in claims] == [ClaimStatus.GRANTED, ClaimStatus.DEFERRED, ClaimStatus.GRANTED]


def test_unlimited_or_on_their_fences_a_queue_s_claims_are_not_held_back(store: SqlStore) -> None:
    runs = io_runs(store, 4)
    assert [c.status for c in store.claim([ref(r) for r in runs[:3]], "ex1", at(61))] == [
        ClaimStatus.GRANTED
    ] * 3
    [fenced] = store.claim([ref(runs[3])], "ex1", at(61), on_fence=True, queue_limits=LIMITED)
    assert fenced.status is ClaimStatus.GRANTED


def test_concurrent_claims_of_a_queue_never_pass_its_limit(store: SqlStore) -> None:
    runs = [run for _ in range(4) for run in io_runs(store, 3)]  # 12 runs of 4 jobs
    barrier = threading.Barrier(len(runs))

    def claim(index: int) -> ClaimStatus:
        barrier.wait()
        return store.claim([ref(runs[index])], f"ex{index}", at(61), queue_limits=LIMITED)[0].status

    with ThreadPoolExecutor(len(runs)) as pool:
        statuses = list(pool.map(claim, range(len(runs))))
    assert sorted(s.value for s in statuses) == ["deferred"] * 10 + ["granted"] * 2
    assert held(store, runs) == 2
    # Released one by one, the waiting runs are admitted one for each release, in threads again.
    running = [r for r in runs if store.get_run(r.job_id, r.run_id).state is RunState.RUNNING]
    finish(store, [end(ref(running[0]), end_time=at(62))])
    waiting = [r for r in runs if store.get_run(r.job_id, r.run_id).state is RunState.QUEUED]
    barrier = threading.Barrier(len(waiting))

    def claim_again(run: RunRecord) -> ClaimStatus:
        barrier.wait()
        return store.claim([ref(run)], "ex-again", at(63), queue_limits=LIMITED)[0].status

    with ThreadPoolExecutor(len(waiting)) as pool:
        statuses = list(pool.map(claim_again, waiting))
    assert sorted(s.value for s in statuses) == ["deferred"] * (len(waiting) - 1) + ["granted"]
    assert held(store, runs) == 2
