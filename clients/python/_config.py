"""How a client reaches the server: its address, TLS, token, default deadline and retry policy, as frozen
values."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from jobmesh.transport.tls import ChannelTls

__all__ = ["DEFAULT_TARGET", "ClientConfig", "RetryConfig"]

DEFAULT_TARGET = "127.0.0.1:50051"


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """Retries of a call the server refused as `UNAVAILABLE` or `RESOURCE_EXHAUSTED`: exponential backoff
    from `initial_interval`, times `multiplier` each time up to `max_interval`, each delay spread by up to
    `jitter` of itself. A `RetryInfo` from the server replaces the backoff: the retry waits at least that
    long. `max_attempts` counts the first call; 1 turns retries off. Only calls that are safe to repeat are
    retried: reads, the verbs that set a state, and creates, run-nows and replays (which carry a
    `request_id`); never a delete. Streams cut by the server are opened again under the same policy."""

    max_attempts: int = 5
    initial_interval: timedelta = timedelta(milliseconds=100)
    multiplier: float = 2.0
    max_interval: timedelta = timedelta(seconds=5)
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {self.max_attempts}")
        if self.initial_interval <= timedelta(0) or self.max_interval < self.initial_interval:
            raise ValueError("need 0 < initial_interval <= max_interval")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be at least 1, not {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, not {self.jitter}")


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """`target`: `HOST:PORT` of the server (or the proxy in front of it). `tls`: None for plaintext.
    `token`: a bearer token sent with every call (`authorization: Bearer TOKEN`). `deadline`: the default
    limit of a unary call (each attempt); streams have none unless given one."""

    target: str = DEFAULT_TARGET
    tls: ChannelTls | None = None
    token: str | None = field(default=None, repr=False)
    deadline: timedelta = timedelta(seconds=30)
    retry: RetryConfig = field(default_factory=RetryConfig)

    def __post_init__(self) -> None:
        if not self.target:
            raise ValueError("the server's address is empty")
        if self.deadline <= timedelta(0):
            raise ValueError("deadline must be longer than zero")
        if self.token is not None and (not self.token.strip() or "\n" in self.token):
            raise ValueError("the token is empty or spans lines")

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token.strip()}"),) if self.token else ()
