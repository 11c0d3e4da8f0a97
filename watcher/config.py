"""Watcher settings: a frozen value from flags and `JOBMESH_*` environment variables."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta


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
    lease_ttl: timedelta = timedelta(seconds=5)
    lease_renew: timedelta = timedelta(seconds=1)
    sweep_interval: timedelta = timedelta(seconds=1)
    # A QUEUED run nobody claimed for this long is sent again (its message may be gone with a wiped queue).
    requeue_after: timedelta = timedelta(minutes=5)
    maintenance_interval: timedelta = timedelta(hours=1)
    release_batch: int = 5000

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> WatcherConfig:
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        if env.get("JOBMESH_WATCHER_ID"):
            values["watcher_id"] = env["JOBMESH_WATCHER_ID"]
        for name in ("scan_interval", "window", "lead", "lease_ttl", "sweep_interval", "requeue_after"):
            raw = env.get(f"JOBMESH_WATCHER_{name.upper()}")
            if raw:
                values[name] = timedelta(seconds=float(raw))
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)  # type: ignore[arg-type]
