"""The run counts' reader of a server process (`server/api/count_feed.py`): followers get counts read at once,
then the new ones when runs changed; many changes make one read; unchanged counts wake nobody; nobody
following costs no read per change; a store that fails for a while delays the counts and breaks nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.ports.store import FeedCursor, RunChange, Store
from jobmesh.core.records import RunState
from jobmesh.core.run_counts import RunCount, RunCounts
from jobmesh.server.api.count_feed import CountFeed
from tests.adapters.store.builders import run

FAST = timedelta(milliseconds=20)
CHANGE: Sequence[RunChange] = [RunChange(run("alpha", "r1"), {}, FeedCursor(1))]


class CountingStore:
    """What the reader needs of a store: counts, as many scheduled runs as `scheduled`, or a failure."""

    def __init__(self) -> None:
        self.scheduled = 1
        self.reads = 0
        self.unavailable = False

    def count_runs(self, now: datetime) -> RunCounts:
        self.reads += 1
        if self.unavailable:
            raise StoreUnavailable("the database is away")
        return RunCounts((RunCount("default", "default", RunState.SCHEDULED, self.scheduled),), now)


def feed_of(
    store: CountingStore,
    *,
    min_interval: timedelta = FAST,
    max_interval: timedelta = timedelta(seconds=30),
    fold_interval: timedelta = timedelta(seconds=30),
) -> CountFeed:
    return CountFeed(
        cast(Store, store), min_interval=min_interval, max_interval=max_interval, fold_interval=fold_interval
    )


async def next_within(follower: Any, seconds: float = 5) -> RunCounts:
    async with asyncio.timeout(seconds):
        counts: RunCounts = await follower.next_counts()
        return counts


def scheduled(counts: RunCounts) -> int:
    return counts.by_state()[RunState.SCHEDULED]


def test_a_follower_gets_the_counts_at_once_then_when_runs_changed() -> None:
    async def scenario() -> None:
        store = CountingStore()
        feed = feed_of(store)
        feed.start()
        try:
            async with feed.following() as follower:
                assert scheduled(follower.counts) == 1
                store.scheduled = 5
                feed.runs_changed(CHANGE)
                assert scheduled(await next_within(follower)) == 5
        finally:
            feed.close()

    asyncio.run(scenario())


def test_many_changes_make_one_read_and_unchanged_counts_wake_nobody() -> None:
    async def scenario() -> None:
        store = CountingStore()
        feed = feed_of(store, min_interval=timedelta(milliseconds=300))
        feed.start()
        try:
            async with feed.following() as follower:
                await asyncio.sleep(0.1)  # the reader's first read, as the follower came
                before = store.reads
                store.scheduled = 2
                for _ in range(100):
                    feed.runs_changed(CHANGE)
                    await asyncio.sleep(0)
                assert scheduled(await next_within(follower)) == 2
                await asyncio.sleep(0.5)
                assert store.reads - before <= 3, "a read per change"
                feed.runs_changed(CHANGE)  # the counts do not change: nothing comes
                try:
                    async with asyncio.timeout(1):
                        await follower.next_counts()
                    raise AssertionError("unchanged counts were sent")
                except TimeoutError:
                    pass
        finally:
            feed.close()

    asyncio.run(scenario())


def test_nobody_following_costs_no_read_per_change() -> None:
    async def scenario() -> None:
        store = CountingStore()
        feed = feed_of(store)
        feed.start()
        try:
            await asyncio.sleep(0.1)
            before = store.reads
            for _ in range(20):
                feed.runs_changed(CHANGE)
                await asyncio.sleep(0.01)
            assert store.reads == before
        finally:
            feed.close()

    asyncio.run(scenario())


def test_upcoming_runs_that_fell_due_come_without_a_change() -> None:
    """While followed, the counts are read again at least every `max_interval`: time moves runs from
    upcoming to due with no write."""

    async def scenario() -> None:
        store = CountingStore()
        feed = feed_of(store, max_interval=timedelta(milliseconds=200))
        feed.start()
        try:
            async with feed.following() as follower:
                store.scheduled = 9
                assert scheduled(await next_within(follower)) == 9
        finally:
            feed.close()

    asyncio.run(scenario())


def test_a_store_away_for_a_while_delays_the_counts_and_breaks_nothing() -> None:
    async def scenario() -> None:
        store = CountingStore()
        feed = feed_of(store)
        feed.start()
        try:
            async with feed.following() as follower:
                store.unavailable = True
                store.scheduled = 3
                for _ in range(5):
                    feed.runs_changed(CHANGE)
                    await asyncio.sleep(0.05)
                failed_reads = store.reads
                assert scheduled(follower.counts) == 1  # the last counts stay
                store.unavailable = False
                feed.runs_changed(CHANGE)
                assert scheduled(await next_within(follower)) == 3
                assert failed_reads >= 2
        finally:
            feed.close()

    asyncio.run(scenario())


class SlowStore(CountingStore):
    def count_runs(self, now: datetime) -> RunCounts:
        time.sleep(0.1)
        return super().count_runs(now)


def test_slow_reads_are_spaced_out_to_a_tenth_of_the_time() -> None:
    """A read that costs much (many upcoming runs) is not repeated at the changes' pace."""

    async def scenario() -> None:
        store = SlowStore()
        feed = feed_of(store)
        feed.start()
        try:
            async with feed.following():
                before = store.reads
                for _ in range(40):  # 2 s of changes
                    feed.runs_changed(CHANGE)
                    await asyncio.sleep(0.05)
                # 0.1 s reads at most 10% of the time: about 2 in 2 s, not one per change (40).
                assert store.reads - before <= 4
        finally:
            feed.close()

    asyncio.run(scenario())
