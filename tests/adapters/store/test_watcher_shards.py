"""Watchers sharing the job space on each store: shard leases split fairly, a dead watcher's shards are taken
when their leases expire, and a watcher's scans read only what changed after its first full load."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.adapters.signals.memory import MemorySignalBus
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.cancels import CancelRouter
from jobmesh.core.dispatch import Dispatcher
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.ports.pipeline_store import DueChanges
from jobmesh.core.shards import ALL_SHARDS, SHARDS, shard_of
from jobmesh.watcher.releaser import Releaser
from jobmesh.watcher.shards import ShardLeases
from jobmesh.watcher.timer import Timer
from jobmesh.watcher.window import WindowScans
from tests.adapters.store.builders import at
from tests.adapters.store.pipeline_support import add_job, add_run, ref
from tests.adapters.store.test_shards import jobs_in_distinct_shards

TTL = timedelta(milliseconds=1500)
ROUND = timedelta(milliseconds=500)


@dataclass
class Clock:
    now: datetime = field(default_factory=lambda: at(0))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, by: timedelta) -> None:
        self.now += by


def _watchers(store: SqlStore, clock: Clock, *names: str) -> list[ShardLeases]:
    return [ShardLeases(store, name, TTL, clock) for name in names]


def _rounds(clock: Clock, watchers: list[ShardLeases], count: int) -> None:
    for _ in range(count):
        for watcher in watchers:
            watcher.renew()
        clock.advance(ROUND)


def test_two_watchers_split_the_shards_and_one_takes_all_when_the_other_dies(store: SqlStore) -> None:
    clock = Clock()
    first, second = _watchers(store, clock, "w1", "w2")
    assert first.renew().taken == ALL_SHARDS  # alone: everything
    for _ in range(SHARDS):
        first.renew()
        second.renew()
        assert first.held.isdisjoint(second.held)
        clock.advance(ROUND)
    assert len(first.held) == len(second.held) == SHARDS // 2
    assert first.held | second.held == ALL_SHARDS
    # `first` dies (its last renewal now): nothing moves before its leases expire, everything at once then.
    died_at = clock.now
    first.renew()
    clock.advance(ROUND)
    moves = second.renew()
    assert moves.taken == frozenset()
    assert moves.wake_at == died_at + TTL  # when to look again
    clock.now = died_at + TTL
    before = second.held
    assert second.renew().taken == ALL_SHARDS - before
    assert second.held == ALL_SHARDS


def test_a_watcher_that_stops_hands_its_shards_over_at_once(store: SqlStore) -> None:
    clock = Clock()
    first, second = _watchers(store, clock, "w1", "w2")
    _rounds(clock, [first, second], SHARDS)
    first.release_all()
    assert first.held == frozenset()
    assert first.renew().taken == frozenset()  # a round that was under way at the stop takes nothing back
    second.renew()
    assert second.held == ALL_SHARDS


def test_a_joining_watcher_gets_its_share_one_shard_at_a_time_never_leaving_more_uncovered(
    store: SqlStore,
) -> None:
    clock = Clock()
    watchers = _watchers(store, clock, "w1", "w2")
    _rounds(clock, watchers, SHARDS)
    third = ShardLeases(store, "w3", TTL, clock)
    watchers.append(third)
    for _ in range(2 * SHARDS):
        for watcher in watchers:
            watcher.renew()
            held = [w.held for w in watchers]
            assert sum(map(len, held)) == len(frozenset().union(*held)), "a shard held twice"
            # Each of the two givers may have one shard in hand-over (free) until the taker's round.
            assert len(ALL_SHARDS - frozenset().union(*held)) <= 2
        clock.advance(ROUND)
    counts = sorted(len(w.held) for w in watchers)
    assert sum(counts) == SHARDS
    assert counts[-1] - counts[0] <= 2  # 21, 21, 22 or 20, 22, 22: fair shares, rounded up
    assert max(counts) <= -(-SHARDS // 3)


# Incremental scans ---------------------------------------------------------------------------------------


class CountingStore:
    """The store, counting the rows the window scans read."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self.rows_read = 0
        self.full_loads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def due_runs(self, until: datetime, **options: Any) -> Any:
        found = self._store.due_runs(until, **options)
        self.rows_read += len(found)
        self.full_loads += options.get("after") is None
        return found

    def due_runs_changed(self, *args: Any, **options: Any) -> DueChanges:
        changed = self._store.due_runs_changed(*args, **options)
        self.rows_read += changed.read
        return changed


def _scans(
    store: CountingStore,
    clock: Clock,
    held: Callable[[], frozenset[int]],
    reconcile_interval: timedelta = timedelta(hours=1),
) -> tuple[WindowScans, Timer]:
    timer = Timer()
    queue = MemoryRunQueue()
    typed: Any = store
    releaser = Releaser(
        typed,
        Dispatcher(typed, queue, clock),
        CancelRouter(MemorySignalBus()),
        timer,
        clock,
        lead=timedelta(0),
        batch=100,
        held=held,
    )
    scans = WindowScans(
        typed, releaser, clock, window=timedelta(minutes=5), reconcile_interval=reconcile_interval
    )
    return scans, timer


def test_after_the_first_full_load_a_scan_reads_only_what_changed(store: SqlStore) -> None:
    mine, other = jobs_in_distinct_shards(2, "scan")
    for job_id in (mine, other):
        add_job(store, job_id)
    runs = [add_run(store, 10 + n, job_id=mine) for n in range(30)]
    add_run(store, 20, job_id=other)
    clock, counting = Clock(), CountingStore(store)
    held = frozenset({shard_of(mine)})
    scans, timer = _scans(counting, clock, lambda: held)
    assert scans.scan(held) == 30
    assert counting.rows_read == 30
    counting.rows_read = 0
    created = add_run(store, 50, job_id=mine)
    add_run(store, 51, job_id=other)
    store.mark_queued([ref(runs[0])], at(1))
    clock.advance(timedelta(seconds=20))
    assert scans.scan(held) == 1
    assert counting.rows_read == 1, "the new run of its shard, not the 30 loaded before nor the other shard's"
    assert counting.full_loads == 1
    assert len(timer) == 31
    assert created.run_id in {item.run.run_id for _, item in timer.pop_due(at(100), 100)}


def test_runs_entering_the_window_are_read_as_it_moves(store: SqlStore) -> None:
    add_job(store)
    held = frozenset({shard_of("alpha")})
    clock, counting = Clock(), CountingStore(store)
    scans, timer = _scans(counting, clock, lambda: held)
    add_run(store, 60)
    later = add_run(store, 330)  # beyond the first window (5 min from at(0))
    assert scans.scan(held) == 1
    clock.advance(timedelta(seconds=40))
    counting.rows_read = 0
    assert scans.scan(held) == 1
    assert counting.rows_read == 1
    assert [item.run.run_id for _, item in timer.pop_due(at(400), 10)][-1] == later.run_id


def test_a_shard_taken_is_loaded_at_the_next_scan(store: SqlStore) -> None:
    mine, taken = jobs_in_distinct_shards(2, "take")
    for job_id in (mine, taken):
        add_job(store, job_id)
        add_run(store, 30, job_id=job_id)
    clock, counting = Clock(), CountingStore(store)
    held = {shard_of(mine)}
    scans, timer = _scans(counting, clock, lambda: frozenset(held))
    assert scans.scan(frozenset(held)) == 1
    held.add(shard_of(taken))
    scans.take([shard_of(taken)])
    assert scans.scan(frozenset(held)) == 1
    assert len(timer) == 2
    assert counting.full_loads == 2  # the first, then the shard taken alone


def test_a_reconcile_reads_the_whole_window_again(store: SqlStore) -> None:
    add_job(store)
    add_run(store, 30)
    held = frozenset({shard_of("alpha")})
    counting = CountingStore(store)
    scans, timer = _scans(counting, Clock(), lambda: held, reconcile_interval=timedelta(milliseconds=1))
    assert scans.scan(held) == 1
    timer.clear()  # as if something had been lost
    time.sleep(0.01)
    assert scans.scan(held) == 1
    assert counting.full_loads == 2


class Away:
    """The store, unreachable while `away`."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self.away = False

    def __getattr__(self, name: str) -> Any:
        if self.away:
            raise StoreUnavailable("the database is away")
        return getattr(self._store, name)


def test_after_the_database_was_away_each_watcher_keeps_its_own_shards(store: SqlStore) -> None:
    clock, away = Clock(), Away(store)
    typed: Any = away
    watchers = [ShardLeases(typed, name, TTL, clock) for name in ("w1", "w2")]
    _rounds(clock, watchers, SHARDS)
    before = [watcher.held for watcher in watchers]
    assert sorted(map(len, before)) == [SHARDS // 2, SHARDS // 2]
    away.away = True
    for watcher in watchers:
        with pytest.raises(StoreUnavailable):
            watcher.renew()
    clock.advance(timedelta(seconds=30))  # every lease expired meanwhile
    away.away = False
    watchers[0].renew()  # back first: it must not take the other's expired shards
    clock.advance(ROUND)
    _rounds(clock, watchers, 4)
    assert [watcher.held for watcher in watchers] == before
