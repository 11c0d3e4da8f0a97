"""Server configuration: a frozen value built from flags and `JOBMESH_*` environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

DEFAULT_LISTEN = "127.0.0.1:50051"


def default_sqlite_url() -> str:
    data = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "jobmesh"
    return f"sqlite:///{data / 'dev.sqlite3'}"


@dataclass(frozen=True, slots=True)
class SchedulingPolicy:
    """Rules the write path applies when it creates runs."""

    # A run due within this is created and handed to the queue at once (the immediate bypass).
    immediate_threshold: timedelta = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    listen: str = DEFAULT_LISTEN
    database_url: str = field(default_factory=default_sqlite_url)
    retention_days: int = 30
    partition_ahead_days: int = 7
    # The run queue and the signal bus: `memory://NAME` in one process, else Kafka and Redis.
    queue_url: str = "memory://dev"
    signals_url: str = "memory://dev"
    policy: SchedulingPolicy = field(default_factory=SchedulingPolicy)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> ServerConfig:
        """Environment first, then explicit overrides (from flags) that are not None."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        if env.get("JOBMESH_LISTEN"):
            values["listen"] = env["JOBMESH_LISTEN"]
        if env.get("JOBMESH_DATABASE_URL"):
            values["database_url"] = env["JOBMESH_DATABASE_URL"]
        queue_url = env.get("JOBMESH_QUEUE_URL") or _prefixed("kafka://", env.get("JOBMESH_KAFKA_BOOTSTRAP"))
        if queue_url:
            values["queue_url"] = queue_url
        signals_url = env.get("JOBMESH_SIGNALS_URL") or env.get("JOBMESH_REDIS_URL")
        if signals_url:
            values["signals_url"] = signals_url
        if env.get("JOBMESH_RETENTION_DAYS"):
            values["retention_days"] = int(env["JOBMESH_RETENTION_DAYS"])
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)  # type: ignore[arg-type]


def _prefixed(prefix: str, value: str | None) -> str | None:
    return f"{prefix}{value}" if value else None
