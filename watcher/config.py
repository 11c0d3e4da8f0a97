"""The watcher's configuration: a frozen value (the process wiring builds it from the settings)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from datetime import timedelta

from jobmesh.core.errors import InvalidConfig


def default_watcher_id() -> str:
    return f"watcher-{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class WatcherConfig:
    watcher_id: str = field(default_factory=default_watcher_id)
    # How often the database is scanned, and how far ahead: runs due within the window wait in memory.
    scan_interval: timedelta = timedelta(seconds=20)
    window: timedelta = timedelta(minutes=5)
    # Runs are handed to the queue this much ahead of their time; executors wait for the exact instant.
    lead: timedelta = timedelta(milliseconds=500)
    # How often cron jobs are asked for occurrences due within the window (new jobs are found this fast).
    cron_interval: timedelta = timedelta(seconds=1)
    # The singleton duties' lease (sweeper, requeue, partition maintenance): one watcher does them.
    lease_ttl: timedelta = timedelta(seconds=5)
    lease_renew: timedelta = timedelta(seconds=1)
    # Each shard's lease (watcher/shards.py): a dead watcher's shards are taken this long after its last
    # renewal, and their runs released at once, so a run due in the gap starts within the 2 s promise.
    shard_lease_ttl: timedelta = timedelta(milliseconds=1500)
    shard_lease_renew: timedelta = timedelta(milliseconds=500)
    # Scans read only what changed; this often they read the held shards' whole window again.
    reconcile_interval: timedelta = timedelta(minutes=5)
    sweep_interval: timedelta = timedelta(seconds=1)
    # A QUEUED run nobody claimed for this long is sent again (its message may be gone with a wiped queue).
    requeue_after: timedelta = timedelta(minutes=5)
    maintenance_interval: timedelta = timedelta(hours=1)
    release_batch: int = 5000
    # HOST:PORT of HTTP /livez and /readyz (processes/health_endpoint.py); None: not served.
    health_listen: str | None = None

    def __post_init__(self) -> None:
        if not self.watcher_id:
            raise InvalidConfig("watcher_id", "must not be empty")
        for name in (
            "scan_interval",
            "window",
            "cron_interval",
            "lease_ttl",
            "lease_renew",
            "shard_lease_ttl",
            "shard_lease_renew",
            "reconcile_interval",
            "sweep_interval",
            "requeue_after",
            "maintenance_interval",
        ):
            if getattr(self, name) <= timedelta(0):
                raise InvalidConfig(name, "must be longer than zero")
        if self.lead < timedelta(0):
            raise InvalidConfig("lead", "must not be negative")
        if self.lease_ttl <= self.lease_renew:
            raise InvalidConfig(
                "lease_ttl",
                f"must be longer than the lease renewal interval ({self.lease_renew.total_seconds():g}s)",
            )
        if self.shard_lease_ttl <= self.shard_lease_renew:
            raise InvalidConfig(
                "shard_lease_ttl",
                "must be longer than the shard lease renewal interval"
                f" ({self.shard_lease_renew.total_seconds():g}s)",
            )
        if self.lead >= self.window:
            raise InvalidConfig("lead", f"must be shorter than the window ({self.window.total_seconds():g}s)")
        if self.release_batch < 1:
            raise InvalidConfig("release_batch", "must be at least 1")
