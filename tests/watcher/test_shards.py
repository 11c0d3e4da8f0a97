"""Watchers sharing shards, in one process on one store: each run is released once, by the watcher holding
its shard, and a watcher that dies leaves its shards to the other when their leases expire. The timer lets go
of a lost shard's runs, and the releaser never sends a run of a shard it does not hold."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.adapters.signals.memory import MemorySignalBus
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.attempts import AttemptRef, Dispatchable
from jobmesh.core.cancels import CancelRouter
from jobmesh.core.dispatch import Dispatcher
from jobmesh.core.ids import new_run_id
from jobmesh.core.ports.store import NewJob
from jobmesh.core.records import RunTrigger
from jobmesh.core.shards import ALL_SHARDS, shard_of
from jobmesh.v1 import job_pb2
from jobmesh.watcher.config import WatcherConfig
from jobmesh.watcher.releaser import Releaser
from jobmesh.watcher.service import Watcher
from jobmesh.watcher.timer import Timer
from tests.adapters.store.builders import job, run
from tests.adapters.store.test_shards import jobs_in_distinct_shards


class CountingQueue(MemoryRunQueue):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def publish(self, runs: Sequence[dispatch_pb2.DispatchedRun], *, timeout: float = 5.0) -> None:
        self.sent.extend(item.attempt.run.rsplit("/", 1)[-1] for item in runs)  # jobs/J/runs/R
        super().publish(runs, timeout=timeout)


def _runs_due_soon(store: SqlStore, job_ids: Sequence[str], seconds: float) -> set[str]:
    moment = datetime.now(UTC) + timedelta(seconds=seconds)
    run_ids = set()
    for job_id in job_ids:
        run_id = new_run_id(moment)
        store.create_run(
            run(job_id, run_id, schedule_time=moment, due_time=moment, trigger=RunTrigger.RUN_NOW)
        )
        run_ids.add(run_id)
    return run_ids


def _config(name: str) -> WatcherConfig:
    return WatcherConfig(
        watcher_id=name,
        lead=timedelta(0),
        lease_renew=timedelta(milliseconds=100),
        shard_lease_ttl=timedelta(milliseconds=600),
        shard_lease_renew=timedelta(milliseconds=200),
    )


def test_two_watchers_release_each_run_once_and_one_takes_over_when_the_other_dies(store: SqlStore) -> None:
    job_ids = jobs_in_distinct_shards(32, "shared")
    store.create_jobs([NewJob(job(job_id, spec=b"")) for job_id in job_ids])  # an empty Job
    queue = CountingQueue()
    first, second = (Watcher(_config(name), store, queue, MemorySignalBus()) for name in ("w1", "w2"))

    async def scenario() -> None:
        stops = asyncio.Event(), asyncio.Event()
        tasks = [asyncio.create_task(w.run(stop)) for w, stop in zip((first, second), stops, strict=True)]
        try:
            await _until(lambda: len(first.shards) == len(second.shards) == 32, "the shards to be split")
            assert first.shards | second.shards == ALL_SHARDS
            # Written straight to the store, due before the 20 s scan interval ends: the store's change notice
            # has them read at once.
            due = _runs_due_soon(store, job_ids, 1.5)
            await _until(lambda: set(queue.sent) >= due, "every run to go out")
            # Dead: it lets nothing go (a SIGKILL would not), and renews nothing any more.
            first._shards.release_all = lambda: None  # type: ignore[method-assign]
            orphaned = first.shards
            stops[0].set()
            await tasks[0]
            died = time.monotonic()
            await _until(lambda: second.shards == ALL_SHARDS, "the survivor to take every shard")
            assert time.monotonic() - died < 0.6 + 1.0  # the lease's TTL, and a round
            orphans = [job_id for job_id in job_ids if shard_of(job_id) in orphaned]
            due |= _runs_due_soon(store, orphans, 0.5)
            await _until(lambda: set(queue.sent) >= due, "the dead watcher's runs to go out")
            await asyncio.sleep(0.5)
            assert sorted(queue.sent) == sorted(due), "a run was sent twice"
        finally:
            stops[1].set()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(scenario())


async def _until(condition: object, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def _item(job_id: str, due: datetime) -> Dispatchable:
    return Dispatchable(run(job_id, new_run_id(due), schedule_time=due, due_time=due), job_pb2.Job())


def test_the_timer_drops_a_lost_shards_runs_and_the_releaser_sends_only_held_shards(store: SqlStore) -> None:
    kept_job, lost_job = jobs_in_distinct_shards(2, "timer")
    store.create_jobs([NewJob(job(job_id)) for job_id in (kept_job, lost_job)])
    now = datetime.now(UTC)
    held = {shard_of(kept_job), shard_of(lost_job)}
    queue, timer = CountingQueue(), Timer()
    releaser = Releaser(
        store,
        Dispatcher(store, queue, lambda: now),
        CancelRouter(MemorySignalBus()),
        timer,
        lambda: now,
        lead=timedelta(0),
        batch=100,
        held=lambda: frozenset(held),
    )
    kept, lost, late = _item(kept_job, now), _item(lost_job, now), _item(lost_job, now)
    for item in (kept, lost, late):
        store.create_run(item.run)
    assert releaser.hold([kept, lost]) == 2
    assert releaser.drop([shard_of(lost_job)]) == 1
    assert len(timer) == 1
    held.discard(shard_of(lost_job))
    assert releaser.hold([late]) == 0  # not this watcher's
    timer.add(
        AttemptRef.of(late.run), replace(late, job=job_pb2.Job()), now
    )  # held before the shard was lost
    assert releaser.release_due() == 1
    assert queue.sent == [kept.run.run_id]
