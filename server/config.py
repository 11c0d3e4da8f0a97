"""The server's configuration: a frozen value (the process wiring builds it from the settings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from jobmesh.core.definitions import SchedulingPolicy
from jobmesh.core.errors import InvalidConfig
from jobmesh.server.feed import FEED_PAGE
from jobmesh.server.tls import ServerTls

DEFAULT_LISTEN = "127.0.0.1:50051"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    listen: str = DEFAULT_LISTEN  # host:port; port 0 picks a free port
    # None: plaintext. Otherwise TLS on `listen` (and on `executor_listen`), from files read again on change.
    tls: ServerTls | None = None
    # A second address, for executors alone: TLS that requires a client certificate verified by the client
    # CA. With it, `ExecutorControl` is refused on `listen` (see server.tls).
    executor_listen: str | None = None
    # True: one of several workers on `listen` (SO_REUSEPORT); otherwise a port already taken fails.
    share_port: bool = False
    policy: SchedulingPolicy = field(default_factory=SchedulingPolicy)
    # Executors heartbeat this often (the server's welcome tells them).
    heartbeat_interval: timedelta = timedelta(seconds=3)
    # How often the sessions of the executors whose streams this server holds are renewed in the database
    # (heartbeat answers wait for the next renewal).
    session_renewal_interval: timedelta = timedelta(seconds=1)
    # Jobs in creation at once; past it creates are refused RESOURCE_EXHAUSTED, to retry after `retry_after`.
    max_pending_creates: int = 5000
    retry_after: timedelta = timedelta(seconds=1)
    # Creates are refused too while executors' messages (claims, results) wait longer than this in the server.
    max_stream_lag: timedelta = timedelta(seconds=1)
    # Live streams (`WatchRuns`, `TailRunLogs`) open at once: in all, and from one client address.
    max_live_streams: int = 4096
    max_live_streams_per_client: int = 256
    # Changes a `WatchRuns` stream may hold unsent before it is cut (its reader resumes from its token).
    watch_buffer_runs: int = 10_000

    def __post_init__(self) -> None:
        if not self.listen:
            raise InvalidConfig("listen", "the address is empty")
        if self.executor_listen is not None and (self.tls is None or self.tls.client_ca is None):
            raise InvalidConfig(
                "executor_listen", "executors are served with client certificates: give the TLS files and CA"
            )
        if self.heartbeat_interval <= timedelta(0):
            raise InvalidConfig("heartbeat_interval", "must be longer than zero")
        if not timedelta(0) < self.session_renewal_interval <= timedelta(seconds=1):
            raise InvalidConfig(
                "session_renewal_interval",
                "must be longer than zero and at most 1s (a third of the shortest heartbeat timeout)",
            )
        for duration in ("retry_after", "max_stream_lag"):
            if getattr(self, duration) <= timedelta(0):
                raise InvalidConfig(duration, "must be longer than zero")
        for name in ("max_live_streams", "max_live_streams_per_client", "max_pending_creates"):
            if getattr(self, name) < 1:
                raise InvalidConfig(name, "must be at least 1")
        if self.watch_buffer_runs < FEED_PAGE:
            raise InvalidConfig(
                "watch_buffer_runs", f"must be at least {FEED_PAGE}, the changes the feed reads at once"
            )
