"""The watcher's readiness: its lease (reachable, to lead or to stand by) and, holding shards, the freshness
of its scans. A watcher that cannot reach its lease, or one whose scans have failed for longer than two scan
intervals and a margin, is not ready; one holding no shard has nothing to scan and is ready."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import pytest

from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.readiness import NOT_CHECKED, Readiness
from jobmesh.core.shards import SHARDS
from jobmesh.watcher import service
from jobmesh.watcher.config import WatcherConfig
from jobmesh.watcher.service import LEASE, LEASE_HELD, SCANS, Watcher
from jobmesh.watcher.shards import shard_lease
from tests.support import AT_ONCE, arrives

# The watcher reports its scans once a second.
SCANS_REPORTED = 1.0


def _config() -> WatcherConfig:
    return WatcherConfig(
        watcher_id="watcher-1",
        lease_renew=timedelta(milliseconds=50),
        scan_interval=timedelta(milliseconds=100),
    )


@asynccontextmanager
async def running(store: SqlStore, readiness: Readiness | None = None) -> AsyncIterator[Watcher]:
    """A watcher (`watcher-1`) running on `store`, reporting to `readiness` (one of its own when None)."""
    signals = open_signals("memory://watcher-readiness")
    watcher = Watcher(_config(), store, MemoryRunQueue(), signals, readiness=readiness)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    try:
        yield watcher
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def _state(readiness: Readiness, name: str) -> tuple[bool, str]:
    [state] = [state for state in readiness.states() if state.name == name]
    return state.up, state.detail


class Outage:
    """Makes one of the store's methods raise StoreUnavailable while `on`."""

    def __init__(self, store: SqlStore, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.on = True
        self.error = StoreUnavailable("connection refused")
        working = getattr(store, method)

        def failing(*args: object, **kwargs: object) -> object:
            if self.on:
                raise self.error
            return working(*args, **kwargs)

        monkeypatch.setattr(store, method, failing)


def test_a_new_watcher_is_not_ready_before_it_reached_its_lease(store: SqlStore) -> None:
    readiness = Readiness("watcher")
    Watcher(_config(), store, MemoryRunQueue(), open_signals("memory://w"), readiness=readiness)
    assert [state.name for state in readiness.states()] == [LEASE_HELD, SCANS]
    assert not readiness.ready()


def test_a_lease_that_cannot_be_reached_is_down_and_logged_once(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    outage = Outage(store, "try_lease", monkeypatch)

    async def scenario() -> None:
        async with running(store) as watcher:
            await arrives(lambda: _state(watcher.readiness, LEASE_HELD)[1] != NOT_CHECKED, AT_ONCE, "a try")
            up, detail = _state(watcher.readiness, LEASE_HELD)
            assert not up
            assert detail == f"cannot reach the lease: {outage.error}"
            assert not watcher.readiness.ready()
            assert not watcher.leading
            await asyncio.sleep(0.5)  # ten renewals, all failed
            assert not _state(watcher.readiness, LEASE_HELD)[0]

            outage.on = False
            await arrives(watcher.readiness.ready, AT_ONCE, "ready with its lease reachable")
            assert _state(watcher.readiness, LEASE_HELD) == (True, "leading")

    asyncio.run(scenario())
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if "lease" in r.getMessage()]
    assert [line for line in lines if line[0] >= logging.WARNING] == [
        (logging.WARNING, f"watcher: lease is unreachable: cannot reach the lease: {outage.error}")
    ]
    assert lines.count((logging.INFO, "watcher: lease is reachable")) == 1


def test_a_leader_whose_scans_fail_past_the_limit_is_not_ready(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stale after two scan intervals (0.2 s) and no margin: the next report (within a second) says so.
    monkeypatch.setattr(service, "SCAN_MARGIN", 0.0)
    outage = Outage(store, "due_runs", monkeypatch)

    async def scenario() -> None:
        async with running(store) as watcher:
            await arrives(lambda: watcher.leading, AT_ONCE, "the lead")
            await arrives(
                lambda: not _state(watcher.readiness, SCANS)[0], SCANS_REPORTED + AT_ONCE, "stale scans"
            )
            assert _state(watcher.readiness, SCANS)[1].startswith("last scan ")
            assert _state(watcher.readiness, LEASE_HELD) == (True, "leading")  # the lease is not the scans
            assert not watcher.readiness.ready()

            outage.on = False
            await arrives(watcher.readiness.ready, SCANS_REPORTED + AT_ONCE, "fresh scans")
            assert _state(watcher.readiness, SCANS) == (True, "scanning")

    asyncio.run(scenario())


def test_a_leader_scanning_within_the_limit_stays_ready(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "SCAN_MARGIN", 0.0)

    async def scenario() -> None:
        async with running(store) as watcher:
            await arrives(lambda: watcher.leading, AT_ONCE, "the lead")
            # A report of the scans past the lead: it found the last scan a tenth of a second old.
            await asyncio.sleep(SCANS_REPORTED + 0.1)
            assert watcher.readiness.ready()
            assert _state(watcher.readiness, SCANS) == (True, "scanning")
            assert _state(watcher.readiness, LEASE_HELD) == (True, "leading")

    asyncio.run(scenario())


def test_a_standby_is_ready_standing_by_and_says_so_once_it_leads(store: SqlStore) -> None:
    """Standing by for the singleton lease and holding no shard (another watcher holds them all)."""
    shards = [shard_lease(shard) for shard in range(SHARDS)]
    now = datetime.now(UTC)
    assert store.try_lease(LEASE, "watcher-0", timedelta(minutes=1), now)
    assert len(store.try_leases(shards, "watcher-0", timedelta(minutes=1), now)) == SHARDS

    async def scenario() -> None:
        async with running(store) as watcher:
            await arrives(watcher.readiness.ready, AT_ONCE, "a ready standby")
            assert not watcher.leading
            assert _state(watcher.readiness, LEASE_HELD) == (True, "standing by")
            assert _state(watcher.readiness, SCANS) == (True, "holding no shard")

            store.release_lease(LEASE, "watcher-0")
            for name in shards:
                store.release_lease(name, "watcher-0")
            await arrives(lambda: watcher.leading, AT_ONCE, "the takeover")
            await arrives(
                lambda: _state(watcher.readiness, LEASE_HELD) == (True, "leading"), AT_ONCE, "lease: leading"
            )
            await arrives(
                lambda: _state(watcher.readiness, SCANS) == (True, "scanning"),
                SCANS_REPORTED + AT_ONCE,
                "scans: scanning",
            )
            assert watcher.readiness.ready()

    asyncio.run(scenario())


def test_the_watcher_reports_to_the_process_readiness(store: SqlStore) -> None:
    """In `jobmesh dev` one readiness holds the server's dependencies and the watcher's."""
    readiness = Readiness("dev", expected=("store",))
    readiness.report("store", True)

    async def scenario() -> None:
        async with running(store, readiness) as watcher:
            assert watcher.readiness is readiness
            await arrives(readiness.ready, AT_ONCE, "the process ready with its watcher")
            assert [state.name for state in readiness.states()] == [LEASE_HELD, SCANS, "store"]
            readiness.report("store", False, "StoreUnavailable: refused")
            assert not readiness.ready()

    asyncio.run(scenario())
