"""The live feed of one server process: one reader of the store's change feed, fanned out in memory to every
open `WatchRuns` and `TailRunLogs` stream.

The reader wakes on the store's notices (its own writes, and other processes' through the database), reads
every change after its cursor, and hands each to the watchers whose filter it passes. An idle stream costs
nothing; a store that cannot hear other processes (SQLite) is read once per `poll_interval` while streams are
open. A watcher that asks to resume from a cursor reads what it missed from the store first, then joins the
live feed; its buffer is bounded, and a watcher that falls behind is cut (it resumes from its cursor).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ParamSpec, Protocol, TypeVar

from jobmesh.core.errors import JobmeshError
from jobmesh.core.filters import Comparison, in_namespaces, is_upcoming, run_matches
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.ports.store import LOGS_CHANGED, FeedCursor, RunChange, Store
from jobmesh.core.ports.subscription import Subscription
from jobmesh.core.records import RunState
from jobmesh.core.timestamps import utcnow

log = logging.getLogger(__name__)
FEED_PAGE = 1000  # changes read at once
RETRY_DELAY = timedelta(seconds=1)
P = ParamSpec("P")
T = TypeVar("T")


class StoreReads(Protocol):
    """Where the feed's blocking store reads run: a server passes its read pool, whose close waits for the
    reads under way (the store is closed next; a read cut off by a cancel would hold a connection past it)."""

    def __call__(self, function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[T]: ...


class FellBehind(Exception):
    """A watcher's buffer overflowed: it must resume from its cursor."""

    def __init__(self, cursor: FeedCursor) -> None:
        super().__init__("the stream fell behind the feed")
        self.cursor = cursor


@dataclass(eq=False)
class FeedSubscription:
    """One stream's view of the feed: the changes it asked for, in feed order, after `cursor`."""

    job_id: str | None
    comparisons: Sequence[Comparison]
    cursor: FeedCursor
    capacity: int
    # Changes at or before it are not this watcher's: a resume token may lie ahead of this server's feed
    # (another server's feed had read further).
    floor: FeedCursor = field(default_factory=lambda: FeedCursor(0))
    # The namespaces whose runs the stream's caller may read (None: all of them).
    namespaces: frozenset[str] | None = None
    # What a resumed watcher missed, read from the store: it comes first, live changes are held meanwhile.
    missed: AsyncIterator[list[RunChange]] | None = None
    # Whether runs SCHEDULED ahead of their time (`is_upcoming`, at the change) are wanted.
    show_upcoming: bool = True
    _queue: asyncio.Queue[list[RunChange]] = field(default_factory=asyncio.Queue)
    _waiting: int = 0
    _behind: bool = False
    _held: list[RunChange] = field(default_factory=list)

    def wants(self, change: RunChange) -> bool:
        run = change.run
        return (
            change.cursor > self.floor
            and (self.job_id is None or run.job_id == self.job_id)
            and in_namespaces(self.namespaces, run.namespace)
            and run_matches(self.comparisons, run, change.labels)
            and (self.show_upcoming or not is_upcoming(run, utcnow()))
        )

    def offer(self, changes: list[RunChange]) -> None:
        mine = [change for change in changes if self.wants(change)]
        if not mine:
            return
        if self.missed is not None:
            self._held += mine
            if len(self._held) > self.capacity:
                self._behind = True
            return
        self._put(mine)

    def _put(self, changes: list[RunChange]) -> None:
        if self._behind or not changes:
            return
        if self._waiting + len(changes) > self.capacity:
            self._behind = True
            self._queue.put_nowait([])  # wakes the stream, which finds it has fallen behind
            return
        self._waiting += len(changes)
        self._queue.put_nowait(changes)

    @property
    def fell_behind(self) -> bool:
        return self._behind

    async def changes(self) -> AsyncGenerator[list[RunChange]]:
        """Batches of changes, each after the last: what a resumed watcher missed, then live ones. Raises
        FellBehind when its buffer overflowed."""
        if self.missed is not None:
            async for batch in self.missed:
                self.cursor = batch[-1].cursor
                yield batch
            self.missed = None
            held, self._held = self._held, []
            self._put([change for change in held if change.cursor > self.cursor])
        while True:
            if self._behind:
                raise FellBehind(self.cursor)
            batch = await self._queue.get()
            if self._behind:
                raise FellBehind(self.cursor)
            self._waiting -= len(batch)
            self.cursor = batch[-1].cursor
            yield batch


class RunFeed:
    def __init__(
        self,
        store: Store,
        *,
        reads: StoreReads = asyncio.to_thread,
        poll_interval: timedelta = timedelta(seconds=1),
        min_interval: timedelta = timedelta(milliseconds=50),
        narrow_interval: timedelta = timedelta(milliseconds=250),
        watcher_capacity: int = 10_000,
        retry_delay: timedelta = RETRY_DELAY,
    ) -> None:
        self._store = store
        self._reads = reads
        self._retry_delay = retry_delay.total_seconds()
        self._poll = poll_interval if not store.notices_from_other_processes else None
        self._min_interval = min_interval.total_seconds()
        self._narrow_interval = narrow_interval.total_seconds()
        self.watcher_capacity = watcher_capacity
        self._watchers: set[FeedSubscription] = set()
        self._log_waiters: set[asyncio.Event] = set()
        self._listeners: list[Callable[[Sequence[RunChange]], None]] = []
        self._listened: frozenset[RunState] | None = frozenset()  # None: some listener wants every change
        self._cursor: FeedCursor | None = None
        self._wake = asyncio.Event()
        self._reading = OutageLog(log, "the live feed's reads of the store")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._subscription: Subscription | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._cursor = await self._reads(self._store.feed_cursor)
        self._subscription = self._store.watch_changes(self._notice)
        self._task = asyncio.create_task(self._run(), name="jobmesh-feed")

    def close(self) -> None:
        """Stops listening and reading; from any thread."""
        if self._subscription is not None:
            self._subscription.close()
        if self._task is not None and self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                self._loop.call_soon_threadsafe(self._task.cancel)

    def listen(
        self, listener: Callable[[Sequence[RunChange]], None], states: frozenset[RunState] | None = None
    ) -> None:
        """`listener` gets the pages of changes, on the event loop, for the feed's life: every change, or
        with `states` at least those that left a run in one of them. While nobody watches, the feed reads
        only what its listeners want: at full rate every run changes three times or more, and a server
        that nobody watches would otherwise read and decode each change for nothing."""
        self._listeners.append(listener)
        if states is None or self._listened is None:
            self._listened = None
        else:
            self._listened |= states

    @property
    def watchers(self) -> frozenset[FeedSubscription]:
        return frozenset(self._watchers)

    @property
    def cursor(self) -> FeedCursor:
        assert self._cursor is not None, "the feed has not started"
        return self._cursor

    @contextlib.asynccontextmanager
    async def watching(
        self,
        job_id: str | None,
        comparisons: Sequence[Comparison],
        after: FeedCursor | None,
        namespaces: frozenset[str] | None = None,
        *,
        show_upcoming: bool = True,
    ) -> AsyncIterator[FeedSubscription]:
        """A watcher of the changes after `after` (from now, without it) in `namespaces` (None: all) until
        the block ends; runs SCHEDULED ahead of their time only with `show_upcoming`."""
        watcher = FeedSubscription(
            job_id,
            comparisons,
            after or self.cursor,
            self.watcher_capacity,
            after or FeedCursor(0),
            namespaces,
            show_upcoming=show_upcoming,
        )
        if after is not None and after < self.cursor:
            watcher.missed = self._missed(watcher, after, self.cursor)
        self._watchers.add(watcher)
        try:
            yield watcher
        finally:
            self._watchers.discard(watcher)

    @contextlib.asynccontextmanager
    async def log_waker(self) -> AsyncIterator[asyncio.Event]:
        """An event set whenever logs may have been added (or a run changed: a follower may stop then)."""
        event = asyncio.Event()
        self._log_waiters.add(event)
        try:
            yield event
        finally:
            self._log_waiters.discard(event)

    async def _missed(
        self, watcher: FeedSubscription, after: FeedCursor, target: FeedCursor
    ) -> AsyncIterator[list[RunChange]]:
        """What a resumed watcher missed, read from the store page by page up to where the live feed stood
        when it came (the live feed brings what lies beyond)."""
        cursor = after
        while cursor < target:
            page = await self._reads(self._store.changes_after, cursor, limit=FEED_PAGE)
            wanted = [change for change in page.changes if change.cursor <= target and watcher.wants(change)]
            if wanted:
                yield wanted
            if page.complete or not page.changes:
                return
            cursor = page.cursor

    def _notice(self, what: str) -> None:
        """From any thread: a store's notice."""
        if self._loop is None or self._loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop is closing
            self._loop.call_soon_threadsafe(self._noticed, what)

    def _noticed(self, what: str) -> None:
        if what == LOGS_CHANGED:
            for event in self._log_waiters:
                event.set()
        else:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            if self._poll is not None and (self._watchers or self._log_waiters):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll.total_seconds()):
                        await self._wake.wait()
                for event in self._log_waiters:  # no notices from other processes: tails look too
                    event.set()
            else:
                await self._wake.wait()
            self._wake.clear()
            try:
                await self._read()
                self._reading.succeeded()
            except Exception as error:  # the feed outlives any one read: streams wait, nothing is skipped
                if isinstance(error, JobmeshError):
                    self._reading.failed(error)
                else:
                    log.exception("the live feed failed reading the store, retrying")
                self._wake.set()
                await asyncio.sleep(self._retry_delay)
            # Notices that came meanwhile make one read. While nobody watches, the reads serve the listeners
            # alone (a server's cancels over its streams, whose first path is the signal bus): at full rate
            # every write notifies, and reading as often as for a watcher took about 8% of the server's busy
            # time at 250 jobs/s (docs/performance.md).
            await asyncio.sleep(self._min_interval if self._wanted() is None else self._narrow_interval)

    def _wanted(self) -> frozenset[RunState] | None:
        """The states whose changes the next read needs: all (None) while anybody watches or follows logs."""
        return None if self._watchers or self._log_waiters else self._listened

    async def _read(self) -> None:
        while True:
            wanted = self._wanted()
            page = await self._reads(self._store.changes_after, self.cursor, limit=FEED_PAGE, states=wanted)
            if wanted is not None and self._wanted() is None:
                # Somebody came to watch while a narrow read was under way, from the cursor it started at:
                # the page passed over changes they want, so the same range is read again in full.
                continue
            self._cursor = page.cursor
            if page.changes:
                for watcher in list(self._watchers):
                    watcher.offer(page.changes)
                for listener in self._listeners:
                    listener(page.changes)
                for event in self._log_waiters:
                    event.set()
            if page.complete:
                return
