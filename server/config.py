"""The server's configuration: a frozen value (the process wiring builds it from the settings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from jobmesh.core.definitions import SchedulingPolicy
from jobmesh.core.errors import InvalidConfig

DEFAULT_LISTEN = "127.0.0.1:50051"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    listen: str = DEFAULT_LISTEN  # host:port; port 0 picks a free port
    policy: SchedulingPolicy = field(default_factory=SchedulingPolicy)
    # Executors heartbeat this often (the server's welcome tells them).
    heartbeat_interval: timedelta = timedelta(seconds=3)

    def __post_init__(self) -> None:
        if not self.listen:
            raise InvalidConfig("listen", "the address is empty")
        if self.heartbeat_interval <= timedelta(0):
            raise InvalidConfig("heartbeat_interval", "must be longer than zero")
