"""The watcher process's loops: one that fails ends the watcher (its lease is let go, so a standby takes over)
instead of leaving it leading with, say, nothing released any more."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.ports.queue import RunQueue
from jobmesh.watcher.config import WatcherConfig
from jobmesh.watcher.service import LEASE, Watcher


class _Broken(Exception):
    pass


def _watcher(store: SqlStore, queue: RunQueue) -> Watcher:
    config = WatcherConfig(watcher_id="watcher-1", lease_renew=timedelta(seconds=0.05))
    return Watcher(config, store, queue, open_signals("memory://watcher-service"))


def test_a_loop_that_fails_ends_the_watcher_with_its_error_and_lets_the_lease_go(store: SqlStore) -> None:
    watcher = _watcher(store, MemoryRunQueue())

    def broken() -> int:
        raise _Broken("a bug in the release loop")

    watcher._releaser.release_due = broken  # type: ignore[method-assign]

    async def scenario() -> None:
        stop = asyncio.Event()
        with pytest.raises(_Broken):
            await asyncio.wait_for(watcher.run(stop), 30)  # before the fix: waited for a stop
        assert not stop.is_set()

    asyncio.run(scenario())
    assert store.try_lease(LEASE, "watcher-2", timedelta(seconds=10), datetime.now(UTC)), "the lease was kept"


def test_a_stop_ends_the_watcher_quietly(store: SqlStore) -> None:
    watcher = _watcher(store, MemoryRunQueue())

    async def scenario() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(watcher.run(stop))
        while not watcher.leading:
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(running, 30)

    asyncio.run(scenario())
