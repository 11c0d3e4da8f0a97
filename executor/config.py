"""Executor configuration: a frozen value built from flags and `JOBMESH_*` environment variables."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields

DEFAULT_SERVER = "127.0.0.1:50051"
CONSUMER_GROUP = "jobmesh-executors"


def new_executor_id() -> str:
    """Unique per process and readable on the dashboard: `host-pid-random`."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


@dataclass(frozen=True, slots=True)
class ExecutorConfig:
    """Durations are in seconds."""

    server: str = DEFAULT_SERVER  # host:port of an ExecutorControl server (or the Envoy in front of many)
    queue_url: str = "memory://"  # see jobmesh.adapters.queue.factory
    signals_url: str = "memory://"  # see jobmesh.adapters.signals.factory
    queues: tuple[str, ...] = ("default",)
    concurrency: int = 16  # attempts held at once, those waiting for their start time included
    executor_id: str = field(default_factory=new_executor_id)
    hostname: str = field(default_factory=socket.gethostname)
    # Empty: one group per set of queues (`jobmesh-executors.QUEUE+QUEUE`), so executors serving other queues
    # never rebalance the group of these.
    consumer_group: str = ""
    cancel_grace: float = 5.0  # SIGTERM to the process group, SIGKILL this much later
    drain_grace: float = 30.0  # on SIGTERM, running work may finish within this; the rest ends `Drained`
    heartbeat_interval: float = 3.0  # until the server's welcome says otherwise
    fallback_poll_interval: float = 0.3  # stream down: how often the signal bus is asked for cancel keys
    fallback_heartbeat_ttl: float = 30.0  # lifetime of a heartbeat written to the signal bus
    flush_interval: float = 0.15  # logs and progress are batched for this long at most
    flush_lines: int = 500  # ... or until this many lines wait
    max_buffered_log_bytes: int = 8 * 1024 * 1024  # lines beyond this (stream down) are dropped and counted
    max_buffered_results: int = 10_000  # unacknowledged results kept for resending
    reconnect_min: float = 0.1  # reconnect backoff: from this, doubling, with jitter ...
    reconnect_max: float = 2.0  # ... up to this
    connect_timeout: float = 5.0  # from opening the stream to the server's welcome
    keepalive: float = 30.0  # HTTP/2 pings on the stream find a silently dead peer; 0 disables them
    report_timeout: float = 5.0  # at exit: how long to wait for the last results to be acknowledged
    http_timeout: float = 30.0  # webhook timeout when the job has no execution timeout
    poll_timeout: float = 0.2  # longest wait in one queue poll (bounds how fast a drain is noticed)

    @property
    def group(self) -> str:
        return self.consumer_group or f"{CONSUMER_GROUP}.{'+'.join(sorted(self.queues))}"

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if not self.queues or not all(self.queues):
            raise ValueError(f"queues must be non-empty names, not {self.queues!r}")
        if not self.server:
            raise ValueError("the server address is empty")
        for name in ("cancel_grace", "drain_grace", "report_timeout", "keepalive"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        for name in ("heartbeat_interval", "fallback_poll_interval", "flush_interval", "poll_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.reconnect_min <= 0 or self.reconnect_max < self.reconnect_min:
            raise ValueError("need 0 < reconnect_min <= reconnect_max")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> ExecutorConfig:
        """Environment first, then explicit overrides (from flags) that are not None."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for variable, name, parse in _ENVIRONMENT:
            if raw := env.get(variable, "").strip():
                try:
                    values[name] = parse(raw)
                except ValueError as exc:
                    raise ValueError(f"bad {variable}={raw!r}: {exc}") from None
        values.update({key: value for key, value in overrides.items() if value is not None})
        if isinstance(values.get("queues"), str):
            values["queues"] = _names(str(values["queues"]))
        known = {f.name for f in fields(cls)}
        if unknown := set(values) - known:
            raise TypeError(f"unknown executor settings {sorted(unknown)}")
        return cls(**values)  # type: ignore[arg-type]


def _names(raw: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in raw.split(",") if name.strip())


_ENVIRONMENT: tuple[tuple[str, str, Callable[[str], object]], ...] = (
    ("JOBMESH_SERVER", "server", str),
    ("JOBMESH_QUEUE_URL", "queue_url", str),
    ("JOBMESH_SIGNALS_URL", "signals_url", str),
    ("JOBMESH_QUEUES", "queues", _names),
    ("JOBMESH_CONCURRENCY", "concurrency", int),
    ("JOBMESH_EXECUTOR_ID", "executor_id", str),
    ("JOBMESH_CANCEL_GRACE", "cancel_grace", float),
    ("JOBMESH_DRAIN_GRACE", "drain_grace", float),
)
