"""The watcher's metrics: whether it leads, its shards, the age of its last scan, and, while it leads, the
backlog per queue (runs due and not started, and how late the oldest is), all read from what its loops
already do."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from prometheus_client import REGISTRY

from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.definitions import SchedulingPolicy, build_job
from jobmesh.core.ports.store import NewJob
from jobmesh.v1 import job_pb2
from jobmesh.watcher.config import WatcherConfig
from jobmesh.watcher.service import Watcher


def value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_a_leading_watcher_reports_its_lease_shards_scans_and_the_backlog(store: SqlStore) -> None:
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    late = datetime.now(UTC) - timedelta(seconds=30)
    spec = job_pb2.Job(target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])), queue=queue)
    spec.schedule.run_at.FromDatetime(late)
    record, first = build_job("waiting", spec, late, SchedulingPolicy())
    store.create_jobs([NewJob(record, first)])
    config = WatcherConfig(watcher_id="watcher-metrics", lease_renew=timedelta(seconds=0.05))
    watcher = Watcher(config, store, MemoryRunQueue(), open_signals("memory://watcher-metrics"))

    async def scenario() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(watcher.run(stop))
        try:
            async with asyncio.timeout(30):
                while value("jobmesh_runs_waiting", queue=queue) != 1:  # dispatched, and nobody claims it
                    await asyncio.sleep(0.05)
        finally:
            stop.set()
            await asyncio.wait_for(running, 30)

    asyncio.run(scenario())
    assert (value("jobmesh_runs_waiting_oldest_seconds", queue=queue) or 0) >= 30
    assert value("jobmesh_watcher_leading") == 1
    assert (value("jobmesh_watcher_shards_held") or 0) > 0
    assert (value("jobmesh_watcher_last_scan_age_seconds") or 99) < 10
