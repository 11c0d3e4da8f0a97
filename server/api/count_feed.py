"""The mesh's counts of runs, pushed: one reader per server process, shared by every `WatchRuns` stream that
asked for them (`include_run_counts`).

The live feed tells it when runs changed (`RunFeed.listen`); it then reads the counts (`Store.count_runs`: a
few rows, and the upcoming runs), at most once per `min_interval` however many runs changed meanwhile, and
wakes the streams when they differ from the last ones; a read that took long spaces the next ones out, so
that reading takes at most a tenth of the time (`READ_SHARE`). Upcoming runs become due as time passes, with
no write: while followed, the counts are read again at least every `max_interval`. While nobody follows,
they are read only every `fold_interval`, so that the store folds what its triggers appended
(`sql_run_counts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from jobmesh.core.errors import JobmeshError
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.ports.store import RunChange, Store
from jobmesh.core.run_counts import RunCounts
from jobmesh.core.timestamps import utcnow
from jobmesh.server.api.feed import StoreReads

log = logging.getLogger(__name__)
# At most this share of the time reading: the read costs the upcoming runs (`sql_run_counts`), which a heavy
# cron load makes many.
READ_SHARE = 0.1


@dataclass(eq=False)
class CountFollower:
    """One stream's view: the latest counts, and an event set when newer ones came."""

    counts: RunCounts
    _newer: asyncio.Event = field(default_factory=asyncio.Event)

    async def next_counts(self) -> RunCounts:
        """The counts once they changed after the last ones returned (or given at the start)."""
        await self._newer.wait()
        self._newer.clear()
        return self.counts


class CountFeed:
    def __init__(
        self,
        store: Store,
        *,
        reads: StoreReads = asyncio.to_thread,
        min_interval: timedelta = timedelta(seconds=1),
        max_interval: timedelta = timedelta(seconds=5),
        fold_interval: timedelta = timedelta(seconds=30),
    ) -> None:
        self._store = store
        self._reads = reads
        self._min_interval = min_interval.total_seconds()
        self._max_interval = max_interval.total_seconds()
        self._fold_interval = fold_interval.total_seconds()
        self._followers: set[CountFollower] = set()
        self._latest: RunCounts | None = None
        self._changed = asyncio.Event()
        self._followed = asyncio.Event()
        self._reading = OutageLog(log, "the run counts' reads of the store")
        self._task: asyncio.Task[None] | None = None

    def runs_changed(self, changes: Sequence[RunChange]) -> None:
        """A `RunFeed` listener: runs changed (on the event loop)."""
        if changes:
            self._changed.set()

    async def read(self) -> RunCounts:
        """The counts read now (a unary `CountRuns`)."""
        return await self._reads(self._store.count_runs, utcnow())

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="jobmesh-count-feed")

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    @contextlib.asynccontextmanager
    async def following(self) -> AsyncIterator[CountFollower]:
        """A follower of the counts until the block ends, starting from counts read now."""
        counts = await self.read()
        follower = CountFollower(counts)
        self._followers.add(follower)
        self._followed.set()  # the reader, idle while nobody followed, takes the followed pace
        try:
            yield follower
        finally:
            self._followers.discard(follower)

    async def _run(self) -> None:
        while True:
            followed = bool(self._followers)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._max_interval if followed else self._fold_interval):
                    await (self._changed if followed else self._followed).wait()
            self._changed.clear()
            self._followed.clear()
            started = time.monotonic()
            try:
                self._publish(await self.read())
                self._reading.succeeded()
            except Exception as error:  # the reader outlives any one read: streams keep their last counts
                if isinstance(error, JobmeshError):
                    self._reading.failed(error)
                else:
                    log.exception("reading the run counts failed, retrying")
            # Changes meanwhile make one read; a slow read (many upcoming runs) spaces the next ones out.
            took = time.monotonic() - started
            await asyncio.sleep(max(self._min_interval, took * (1 - READ_SHARE) / READ_SHARE))

    def _publish(self, counts: RunCounts) -> None:
        if counts.same_counts(self._latest):
            return
        self._latest = counts
        for follower in self._followers:
            if not counts.same_counts(follower.counts):
                follower.counts = counts
                follower._newer.set()
