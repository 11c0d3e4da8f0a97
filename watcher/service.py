"""The watcher: any number share the job space by leased shards (watcher/shards.py). Each scans the window of
the shards it holds (watcher/window.py), holds their due runs in memory, releases each to the queue at its
instant, and makes their cron occurrences into runs. One of them, by the singleton lease, also sweeps lost
attempts, re-sends unclaimed runs and maintains partitions. A watcher that takes a shard loads it from the
database at once: nothing lives only in memory."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from jobmesh.core.cancels import CancelRouter
from jobmesh.core.dispatch import Dispatcher
from jobmesh.core.errors import JobmeshError, StoreUnavailable
from jobmesh.core.hooks import NO_HOOKS, RunHooks
from jobmesh.core.lifecycle import AttemptLifecycle
from jobmesh.core.metrics import (
    BACKLOG_AGE,
    WATCHER_LEADING,
    WATCHER_SCAN_AGE,
    WATCHER_SHARDS,
    clear_backlog,
    set_backlog,
)
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.ports.queue import RunQueue
from jobmesh.core.ports.signals import SignalBus
from jobmesh.core.ports.store import RUNS_CHANGED
from jobmesh.core.readiness import Readiness
from jobmesh.core.timestamps import utcnow
from jobmesh.watcher.config import WatcherConfig
from jobmesh.watcher.materializer import Materializer
from jobmesh.watcher.releaser import Releaser
from jobmesh.watcher.shards import NO_MOVES, ShardLeases, ShardMoves
from jobmesh.watcher.sweeper import Sweeper
from jobmesh.watcher.timer import Timer
from jobmesh.watcher.window import WindowScans

log = logging.getLogger(__name__)
LEASE = "watcher"
# The readiness of a watcher: it reaches its lease (to lead or stand by), and, holding shards, its scans are
# fresh.
LEASE_HELD = "lease"
SCANS = "scans"
SCAN_MARGIN = 5.0  # seconds a scan may take beyond its interval before it counts as stale
SCAN_FLOOR = 1.0  # seconds between scans that change notices ask for
SCAN_POLL = 0.05
BACKLOG_INTERVAL = 10.0  # seconds between the leading watcher's reads of the backlog (the metrics)


class Watcher:
    def __init__(
        self,
        config: WatcherConfig,
        store: SchedulerStore,
        queue: RunQueue,
        signals: SignalBus,
        clock: Callable[[], datetime] = utcnow,
        *,
        readiness: Readiness | None = None,
        hooks: RunHooks = NO_HOOKS,
    ) -> None:
        """`readiness`: the process's, which the lease and the scans are reported to (one of its own when
        None). `hooks` observe the runs it makes, sends and ends."""
        self.config = config
        self.readiness = readiness or Readiness("watcher")
        self.readiness.expect(LEASE_HELD)
        self.readiness.expect(SCANS)
        self._last_scan = time.monotonic()
        self._outages: dict[str, OutageLog] = {}  # by loop: each logs its failures once an outage
        self._store = store
        self._clock = clock
        self._timer = Timer()
        self._shards = ShardLeases(store, config.watcher_id, config.shard_lease_ttl, clock)
        dispatcher = Dispatcher(store, queue, clock, hooks)
        self._releaser = Releaser(
            store,
            dispatcher,
            CancelRouter(signals),
            self._timer,
            clock,
            lead=config.lead,
            batch=config.release_batch,
            held=lambda: self._shards.held,
        )
        self._window = WindowScans(
            store,
            self._releaser,
            clock,
            window=config.window,
            reconcile_interval=config.reconcile_interval,
        )
        self._sweeper = Sweeper(
            store=store,
            lifecycle=AttemptLifecycle(store, queue, clock, hooks=hooks),
            signals=signals,
            dispatcher=dispatcher,
            clock=clock,
        )
        self._materializer = Materializer(store, clock, hooks)
        self._queue_durable = queue.durable
        self._started = clock()
        self._leading = asyncio.Event()
        self._wake = asyncio.Event()  # shards taken: scan at once
        self._changed = threading.Event()  # runs changed (a store notice): scan soon

    @property
    def leading(self) -> bool:
        """Whether this watcher holds the singleton lease (sweeper, requeue, partitions)."""
        return self._leading.is_set()

    @property
    def shards(self) -> frozenset[int]:
        return self._shards.held

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [
            asyncio.create_task(self._keep_lease(stop), name="lease"),
            asyncio.create_task(self._keep_shards(stop), name="shards"),
            asyncio.create_task(self._scan(stop), name="scan"),
            asyncio.create_task(self._materialize(stop), name="cron"),
            asyncio.create_task(self._release(stop), name="release"),
            asyncio.create_task(self._sweep(stop), name="sweep"),
            asyncio.create_task(self._maintain(stop), name="maintenance"),
            asyncio.create_task(self._report_scans(stop), name="scan health"),
            asyncio.create_task(self._measure_backlog(stop), name="backlog"),
        ]
        stopped = asyncio.create_task(stop.wait())
        notices = self._store.watch_changes(self._notice)
        try:
            done, _ = await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for task in done - {stopped}:
                task.result()  # a loop that failed: leave (a standby takes over) rather than limp on
                if not stop.is_set():
                    raise RuntimeError(f"the watcher's {task.get_name()} loop ended unexpectedly")
        finally:
            stopped.cancel()
            notices.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._guarded("shard release", self._shards.release_all)
            if self.leading:
                await self._guarded(
                    "lease release", lambda: self._store.release_lease(LEASE, self.config.watcher_id)
                )

    async def _keep_lease(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                held = await asyncio.to_thread(
                    self._store.try_lease, LEASE, self.config.watcher_id, self.config.lease_ttl, self._clock()
                )
                self.readiness.report(LEASE_HELD, True, "leading" if held else "standing by")
            except StoreUnavailable as error:
                # Degraded, not down: a leader keeps releasing what it holds while the database is away.
                self.readiness.report(LEASE_HELD, False, f"cannot reach the lease: {error}")
                held = self.leading
            if held and not self.leading:
                log.info("%s leads: sweeping, requeueing, maintaining partitions", self.config.watcher_id)
                self._sweeper.forget_reachability()
                self._leading.set()
                if not self._queue_durable:
                    # What an earlier process queued in memory died with it: send it again now.
                    await self._guarded("requeue", lambda: self._sweeper.requeue_queued_before(self._started))
            elif not held and self.leading:
                log.warning("%s lost the lease: its shards go on", self.config.watcher_id)
                self._leading.clear()
            await _sleep(stop, self.config.lease_renew.total_seconds())

    async def _keep_shards(self, stop: asyncio.Event) -> None:
        renew = self.config.shard_lease_renew.total_seconds()
        outage = self._outages.setdefault("shard leases", OutageLog(log, "shard leases"))
        while not stop.is_set():
            try:
                moves = await asyncio.to_thread(self._shards.renew)
                outage.succeeded()
            except StoreUnavailable as error:
                # Degraded, not down: the shards held go on being released while the database is away.
                outage.failed(error)
                moves = NO_MOVES
            self._apply(moves)
            delay = renew
            if moves.wake_at is not None:  # another's lease may expire first: take its shard then
                delay = min(delay, max((moves.wake_at - self._clock()).total_seconds(), 0.0) + 0.005)
            await _sleep(stop, delay)

    def _apply(self, moves: ShardMoves) -> None:
        if moves.lost:
            dropped = self._releaser.drop(moves.lost)
            log.info("shards %s went to another watcher (%d held runs dropped)", sorted(moves.lost), dropped)
        if moves.taken:
            log.info("took shards %s: loading their window", sorted(moves.taken))
            if not (self.shards - moves.taken):
                self._last_scan = time.monotonic()  # its first scan starts now
            self._window.take(moves.taken)
            self._wake.set()

    def _notice(self, what: str) -> None:
        if what == RUNS_CHANGED:
            self._changed.set()

    async def _scan(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._wake.clear()
            self._changed.clear()
            await self._guarded("scan", self._scan_once)
            await self._until_next_scan(stop)

    async def _until_next_scan(self, stop: asyncio.Event) -> None:
        """At once for shards taken; after a change notice (a run created, retried, rescheduled: by this
        process, or by any on PostgreSQL), at most every SCAN_FLOOR, so that a run due soon is held in time
        however often runs change; else after the scan interval."""
        started = time.monotonic()
        interval = self.config.scan_interval.total_seconds()
        while not (stop.is_set() or self._wake.is_set()):
            waited = time.monotonic() - started
            if waited >= interval or (self._changed.is_set() and waited >= SCAN_FLOOR):
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), SCAN_POLL)

    def _scan_once(self) -> None:
        added = self._window.scan(self.shards)
        self._last_scan = time.monotonic()
        if added:
            log.debug("holding %d more runs (%d in all)", added, len(self._timer))

    async def _materialize(self, stop: asyncio.Event) -> None:
        """Often, and cheaply (an index on due jobs): a new cron job's next occurrences are held in time."""
        while not stop.is_set():
            if self.shards:
                await self._guarded("cron", self._materialize_once)
            await _sleep(stop, self.config.cron_interval.total_seconds())

    def _materialize_once(self) -> int:
        until = self._clock() + self.config.window
        return self._releaser.hold(self._materializer.materialize(until, self.shards))

    async def _release(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if self.shards:
                released = await self._guarded(
                    "release", self._releaser.release_due, idle_proves_nothing=True
                )
                if released:
                    continue  # more may be due already
            delay = 0.05
            next_release = self._timer.next_release()
            if next_release is not None:
                delay = min(delay, max((next_release - self._clock()).total_seconds(), 0.0))
            await _sleep(stop, delay)

    async def _sweep(self, stop: asyncio.Event) -> None:
        rounds = 0
        while not stop.is_set():
            if self.leading:
                await self._guarded("sweep", lambda: self._releaser.hold(self._sweeper.sweep_lost()))
                if rounds % 30 == 0:
                    await self._guarded(
                        "requeue", lambda: self._sweeper.requeue_stale(self.config.requeue_after)
                    )
                rounds += 1
            await _sleep(stop, self.config.sweep_interval.total_seconds())

    async def _maintain(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if self.leading:
                await self._guarded("maintenance", lambda: self._store.maintain_partitions(self._clock()))
            await _sleep(stop, self.config.maintenance_interval.total_seconds())

    async def _report_scans(self, stop: asyncio.Event) -> None:
        """A watcher holding shards whose last scan is older than two intervals (and a margin) is not ready:
        runs created since then are not held. One without shards has nothing to scan."""
        stale_after = 2 * self.config.scan_interval.total_seconds() + SCAN_MARGIN
        while not stop.is_set():
            age = time.monotonic() - self._last_scan
            WATCHER_SCAN_AGE.set(age)
            WATCHER_SHARDS.set(len(self.shards))
            WATCHER_LEADING.set(1 if self.leading else 0)
            if not self.shards:
                self.readiness.report(SCANS, True, "holding no shard")
            elif age > stale_after:
                self.readiness.report(SCANS, False, f"last scan {age:.0f} s ago")
            else:
                self.readiness.report(SCANS, True, "scanning")
            await _sleep(stop, 1.0)

    async def _measure_backlog(self, stop: asyncio.Event) -> None:
        """The waiting runs per queue and the oldest one's age, read by the leading watcher alone, every
        BACKLOG_INTERVAL (one grouped read; nothing per run)."""
        seen: set[str] = set()
        measured: float | None = None
        while not stop.is_set():
            if self.leading:
                now = self._clock()
                try:
                    waiting = await asyncio.to_thread(self._store.backlog, now)
                except JobmeshError as error:
                    log.debug("backlog not measured: %s", error)
                else:
                    set_backlog(waiting, now, seen)
                    measured = time.monotonic()
            elif seen:
                clear_backlog(seen)
            if measured is not None:
                BACKLOG_AGE.set(time.monotonic() - measured)
            await _sleep(stop, BACKLOG_INTERVAL if measured is not None else 1.0)

    async def _guarded(
        self, what: str, work: Callable[[], int | object], *, idle_proves_nothing: bool = False
    ) -> int:
        """`work`, its failures logged once an outage. `idle_proves_nothing`: a result of 0 (nothing to do,
        the store not asked) does not end an outage."""
        outage = self._outages.setdefault(what, OutageLog(log, what))
        try:
            result = await asyncio.to_thread(work)
        except JobmeshError as error:
            outage.failed(error)
            return 0
        if result != 0 or not idle_proves_nothing:
            outage.succeeded()
        return result if isinstance(result, int) else 0


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
