"""The live feed on a real SQLite store: a resumed watcher gets what it missed and then what came meanwhile,
in order and once; one that falls behind while catching up is cut at the last change it got; a store that
fails for a while delays the feed and loses nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.ports.store import ChangePage, FeedCursor, RunChange
from jobmesh.core.records import RunState
from jobmesh.server.api.feed import FEED_PAGE, FeedSubscription, FellBehind, RunFeed
from jobmesh.server.loop_lag import LoopLag
from jobmesh.server.stream_lag import StreamLag
from jobmesh.server.workers import Workers
from tests.adapters.store.builders import at, new_job, run
from tests.support import arrives


@pytest.fixture
def store(sqlite_store: SqlStore) -> SqlStore:
    """A SQLite store of the test's own, not the module's shared one (tests/server/conftest.py)."""
    return sqlite_store


def add_runs(store: SqlStore, job_id: str, count: int) -> list[str]:
    store.create_jobs([new_job(job_id)])
    ids = [f"r{index}" for index in range(count)]
    for run_id in ids:
        store.create_run(run(job_id, run_id))
    return ids


async def take(watcher: FeedSubscription, count: int) -> list[RunChange]:
    got: list[RunChange] = []
    async with asyncio.timeout(10):
        async for batch in watcher.changes():
            got += batch
            if len(got) >= count:
                return got
    return got


async def read_into(watcher: FeedSubscription, got: list[RunChange]) -> None:
    async with asyncio.timeout(10):
        async for batch in watcher.changes():
            got += batch


def test_a_resumed_watcher_gets_what_it_missed_then_what_came_meanwhile_once_each(store: SqlStore) -> None:
    async def scenario() -> list[str]:
        start = store.feed_cursor()
        missed = add_runs(store, "alpha", 3)
        feed = RunFeed(store)
        read: list[str] = []
        feed.listen(lambda changes: read.extend(change.run.job_id for change in changes))
        await feed.start()
        try:
            async with feed.watching(None, (), start) as watcher:
                meanwhile = add_runs(store, "beta", 2)  # live, while the watcher has not caught up
                # The feed reads them and holds them for the watcher.
                await arrives(lambda: read.count("beta") >= len(meanwhile), 10, "the feed to read them")
                got = await take(watcher, len(missed) + len(meanwhile))
        finally:
            feed.close()
        return [f"{c.run.job_id}/{c.run.run_id}" for c in got]

    assert asyncio.run(scenario()) == ["alpha/r0", "alpha/r1", "alpha/r2", "beta/r0", "beta/r1"]


def test_a_watcher_that_falls_behind_while_catching_up_is_cut_after_what_it_got(store: SqlStore) -> None:
    async def scenario() -> tuple[list[RunChange], FeedCursor]:
        start = store.feed_cursor()
        add_runs(store, "alpha", 2)
        feed = RunFeed(store, watcher_capacity=FEED_PAGE)
        await feed.start()
        got: list[RunChange] = []
        try:
            async with feed.watching(None, (), start) as watcher:
                store.create_jobs([new_job(f"many-{index}", first_run="r") for index in range(FEED_PAGE + 1)])
                await arrives(lambda: watcher.fell_behind, 10, "more held than the watcher's capacity")
                with pytest.raises(FellBehind) as behind:
                    await read_into(watcher, got)
        finally:
            feed.close()
        return got, behind.value.cursor

    got, cursor = asyncio.run(scenario())
    assert [c.run.job_id for c in got] == ["alpha", "alpha"]  # what it missed, then the cut
    assert cursor == got[-1].cursor


class FailingFor:
    """A store whose change reads fail `times` times, then work."""

    def __init__(self, store: SqlStore, times: int) -> None:
        self._store = store
        self.failures_left = times

    def changes_after(
        self, cursor: FeedCursor, limit: int, states: frozenset[RunState] | None = None
    ) -> ChangePage:
        if self.failures_left:
            self.failures_left -= 1
            raise StoreUnavailable("connection refused")
        return self._store.changes_after(cursor, limit=limit, states=states)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_failing_store_delays_the_feed_and_loses_nothing(store: SqlStore) -> None:
    flaky = FailingFor(store, times=2)

    async def scenario() -> list[str]:
        feed = RunFeed(flaky, retry_delay=timedelta(milliseconds=50))
        await feed.start()
        try:
            async with feed.watching(None, (), None) as watcher:
                add_runs(store, "alpha", 2)
                got = await take(watcher, 2)
        finally:
            feed.close()
        return [c.run.run_id for c in got]

    assert asyncio.run(scenario()) == ["r0", "r1"]
    assert flaky.failures_left == 0


class Reads:
    """The store, counting the states each change read asked for."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self.asked: list[frozenset[RunState] | None] = []

    def changes_after(
        self, cursor: FeedCursor, limit: int, states: frozenset[RunState] | None = None
    ) -> ChangePage:
        self.asked.append(states)
        return self._store.changes_after(cursor, limit=limit, states=states)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_unwatched_the_feed_reads_only_what_its_listeners_want_and_everything_once_watched(
    store: SqlStore,
) -> None:
    reads = Reads(store)
    cancelling = frozenset({RunState.CANCELLING})

    async def scenario() -> tuple[list[str], list[str]]:
        feed = RunFeed(reads, min_interval=timedelta(milliseconds=5))
        heard: list[str] = []
        feed.listen(
            lambda changes: heard.extend(f"{c.run.run_id}:{c.run.state.value}" for c in changes), cancelling
        )
        await feed.start()
        try:
            store.create_jobs([new_job("alpha")])
            store.create_run(run("alpha", "r1", state=RunState.RUNNING, executor="e1", attempt=1))
            store.create_run(run("alpha", "r2"))
            store.cancel_run("alpha", "r1", reason="x", now=at(100))
            await arrives(lambda: heard, 10, "the cancelling change")
            assert reads.asked
            assert set(reads.asked) == {cancelling}
            unwatched = list(heard)
            async with feed.watching(None, (), None) as watcher:
                reads.asked.clear()
                store.create_run(run("alpha", "r3"))
                got = await take(watcher, 1)
            assert None in reads.asked  # watched: every change is read
        finally:
            feed.close()
        return unwatched, [c.run.run_id for c in got]

    heard, watched = asyncio.run(scenario())
    assert heard == ["r1:CANCELLING"]  # r1's creation and r2 were passed over
    assert watched == ["r3"]


def test_unwatched_the_feed_reads_at_most_once_a_narrow_interval(store: SqlStore) -> None:
    """Time is the behaviour here: 100 notices 20 ms apart make at most one narrow read each 0.5 s (the
    first at once), where reads at the 5 ms minimum interval would follow nearly every notice."""
    reads = Reads(store)

    async def scenario() -> tuple[int, float]:
        feed = RunFeed(reads, min_interval=timedelta(milliseconds=5), narrow_interval=timedelta(seconds=0.5))
        feed.listen(lambda changes: None, frozenset({RunState.CANCELLING}))
        await feed.start()
        try:
            store.create_jobs([new_job("alpha")])
            await arrives(lambda: reads.asked, 10, "a first narrow read")
            reads.asked.clear()
            began = time.monotonic()
            for i in range(100):
                store.create_run(run("alpha", f"n{i}"))
                await asyncio.sleep(0.02)
            return len(reads.asked), time.monotonic() - began
        finally:
            feed.close()

    narrow, elapsed = asyncio.run(scenario())
    assert 1 <= narrow <= elapsed / 0.5 + 2, (narrow, elapsed)


class HeldNarrowReads(Reads):
    """Narrow reads wait for `release` before they read."""

    def __init__(self, store: SqlStore) -> None:
        super().__init__(store)
        self.waiting = threading.Event()
        self.release = threading.Event()

    def changes_after(
        self, cursor: FeedCursor, limit: int, states: frozenset[RunState] | None = None
    ) -> ChangePage:
        if states is not None and not self.release.is_set():
            self.waiting.set()
            assert self.release.wait(10), "the test never released the read"
        return super().changes_after(cursor, limit, states)


def test_a_watcher_that_comes_during_a_narrow_read_misses_nothing(store: SqlStore) -> None:
    reads = HeldNarrowReads(store)

    async def scenario() -> list[str]:
        feed = RunFeed(reads, min_interval=timedelta(milliseconds=5))
        feed.listen(lambda changes: None, frozenset({RunState.CANCELLING}))
        await feed.start()
        try:
            store.create_jobs([new_job("alpha")])
            await arrives(reads.waiting.is_set, 10, "a narrow read under way")
            async with feed.watching(None, (), None) as watcher:
                store.create_run(run("alpha", "r1"))  # after the watcher came, before the read runs
                reads.release.set()
                got = await take(watcher, 1)
        finally:
            feed.close()
        return [c.run.run_id for c in got]

    assert asyncio.run(scenario()) == ["r1"]


class HeldReads:
    """The store, each change read held until `release` is set."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self.reading = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def changes_after(
        self, cursor: FeedCursor, limit: int, states: frozenset[RunState] | None = None
    ) -> ChangePage:
        self.reading.set()
        self.release.wait(30)
        page = self._store.changes_after(cursor, limit=limit, states=states)
        self.finished.set()
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_servers_pools_close_only_once_the_feeds_read_under_way_is_done(store: SqlStore) -> None:
    """The feed's reads run on the server's read pool, whose close waits for them: the store is closed
    next, and a read cut off by the feed's cancel would hold one of its connections past that."""
    held = HeldReads(store)
    workers = Workers(
        StreamLag(),
        LoopLag(),
        max_pending_creates=10,
        max_stream_lag=timedelta(seconds=1),
        max_loop_lag=timedelta(seconds=1),
        retry_after=timedelta(seconds=1),
    )
    closed = threading.Event()

    def close_pools() -> None:
        workers.close()
        closed.set()

    async def scenario() -> None:
        feed = RunFeed(held, reads=workers.read)
        await feed.start()
        feed.listen(lambda _: None, None)
        add_runs(store, "alpha", 1)  # the store's notice wakes the feed
        await asyncio.to_thread(held.reading.wait, 10)
        feed.close()
        closer = threading.Thread(target=close_pools)
        closer.start()
        await asyncio.sleep(0.5)
        assert not closed.is_set(), "the pools closed with the feed's read under way"
        held.release.set()
        await asyncio.to_thread(closer.join, 30)

    asyncio.run(scenario())
    assert held.finished.is_set()
    assert closed.is_set()
