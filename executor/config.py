"""The executor's configuration: a frozen value (the process wiring builds it from the settings)."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from jobmesh.core.call_token import CallToken
from jobmesh.core.errors import InvalidConfig
from jobmesh.core.secret_refs import SecretQueues
from jobmesh.executor import sandbox
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.executor.sandbox import AUTO, ISOLATION_MODES, JobLimits
from jobmesh.executor.secrets import DEFAULT_SECRET_SOURCE
from jobmesh.transport.tls import ChannelTls

DEFAULT_SERVER = "127.0.0.1:50051"
CONSUMER_GROUP = "jobmesh-executors"


def new_executor_id() -> str:
    """Unique per process and readable on the dashboard: `host-pid-random`."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


@dataclass(frozen=True, slots=True)
class ExecutorConfig:
    server: str = DEFAULT_SERVER  # host:port of an ExecutorControl server (or the proxy in front of many)
    tls: ChannelTls | None = None  # None: plaintext to the server
    queue_url: str = "memory://"  # see jobmesh.adapters.queue.factory
    signals_url: str = "memory://"  # see jobmesh.adapters.signals.factory
    queues: tuple[str, ...] = ("default",)
    # HOST:PORT of HTTP /livez and /readyz (processes/health_endpoint.py); None: not served.
    health_listen: str | None = None
    concurrency: int = 16  # attempts held at once, those waiting for their start time included
    executor_id: str = field(default_factory=new_executor_id)
    hostname: str = field(default_factory=socket.gethostname)
    # The bearer token presented to the server (its grant binds `executor_id`), or a file that holds it.
    token: str = field(default="", repr=False)
    token_file: Path | None = None
    # Empty: one group per set of queues (`jobmesh-executors.QUEUE+QUEUE`), so executors serving other queues
    # never rebalance the group of these.
    consumer_group: str = ""
    cancel_grace: timedelta = timedelta(seconds=5)  # SIGTERM to the process group, SIGKILL this much later
    drain_grace: timedelta = timedelta(seconds=30)  # on SIGTERM, running work may finish within this
    heartbeat_interval: timedelta = timedelta(seconds=3)  # until the server's welcome says otherwise
    # Stream down: how often the signal bus is asked for cancel keys, and the life of a heartbeat left there.
    fallback_poll_interval: timedelta = timedelta(milliseconds=300)
    fallback_heartbeat_ttl: timedelta = timedelta(seconds=30)
    flush_interval: timedelta = timedelta(milliseconds=150)  # logs and progress are batched this long at most
    flush_lines: int = 500  # ... or until this many lines wait
    # Log lines waiting to be sent: a command's output waits while this is full (see executor/log_buffer).
    max_buffered_log_bytes: int = 4 * 1024 * 1024
    # What one attempt may leave in its run's log; past it, lines are counted and a marker says so.
    attempt_log_bytes: int = 10 * 1024 * 1024
    attempt_log_lines: int = 100_000
    max_buffered_results: int = 10_000  # unacknowledged results kept for resending
    reconnect_min: timedelta = timedelta(
        milliseconds=100
    )  # reconnect backoff: from this, doubling, jittered,
    reconnect_max: timedelta = timedelta(seconds=2)  # ... up to this
    connect_timeout: timedelta = timedelta(seconds=5)  # from opening the stream to the server's welcome
    keepalive: timedelta = timedelta(seconds=30)  # HTTP/2 pings find a silently dead peer; zero disables them
    report_timeout: timedelta = timedelta(
        seconds=5
    )  # at exit: how long the last results may take to be acked
    http_timeout: timedelta = timedelta(seconds=30)  # webhook timeout when the job has no execution timeout
    poll_timeout: timedelta = timedelta(
        milliseconds=200
    )  # longest wait in one queue poll (bounds drain notice)
    # What it runs: by default no command, and HTTP to public addresses only (`jobmesh dev`: anything).
    policy: ExecutionPolicy = field(default_factory=ExecutionPolicy)
    secrets: str = DEFAULT_SECRET_SOURCE  # where `secret://NAME` resolves: `env:PREFIX` or `file:PATH`
    # The secrets granted to some queues of their namespace only: refused to a job of another queue.
    secret_queues: SecretQueues = field(default_factory=SecretQueues)
    # How commands are kept apart from this executor (executor/sandbox.py): the mode, the user they run as
    # ("": `nobody` when this process is root, else its own user), and their limits (0: none).
    isolation: str = AUTO
    job_user: str = ""
    job_memory: int = sandbox.DEFAULT_MEMORY
    job_cpu_seconds: int = sandbox.DEFAULT_CPU_SECONDS
    job_processes: int = sandbox.DEFAULT_PROCESSES
    job_file_size: int = sandbox.DEFAULT_FILE_SIZE
    # Files no command may read besides this executor's own credentials (`jobmesh dev`: its server's).
    hidden_files: tuple[Path, ...] = ()

    @property
    def call_token(self) -> CallToken:
        return CallToken(self.token, self.token_file)

    @property
    def job_limits(self) -> JobLimits:
        return JobLimits(self.job_memory, self.job_cpu_seconds, self.job_processes, self.job_file_size)

    @property
    def credential_files(self) -> tuple[Path, ...]:
        """This executor's own secrets on disk, which its commands must not read."""
        found = [self.token_file, *self.hidden_files]
        if self.tls is not None:
            found.append(self.tls.client_key)
        kind, _, where = self.secrets.partition(":")
        if kind == "file":
            found.append(Path(where))
        return tuple(path for path in found if path is not None)

    @property
    def group(self) -> str:
        return self.consumer_group or f"{CONSUMER_GROUP}.{'+'.join(sorted(self.queues))}"

    def __post_init__(self) -> None:
        for name in ("max_buffered_log_bytes", "attempt_log_bytes", "attempt_log_lines"):
            if getattr(self, name) < 1:
                raise InvalidConfig(name, "must be at least 1")
        self._check_isolation()
        if self.concurrency < 1:
            raise InvalidConfig("concurrency", f"must be at least 1, not {self.concurrency}")
        if not self.queues or not all(self.queues):
            raise InvalidConfig("queues", f"must be non-empty names, not {self.queues!r}")
        if not self.server:
            raise InvalidConfig("server", "the address is empty")
        if not self.executor_id:
            raise InvalidConfig("executor_id", "must not be empty")
        if self.token and self.token_file is not None:
            raise InvalidConfig("token", "give a token or a token file, not both")
        for name in ("cancel_grace", "drain_grace", "report_timeout", "keepalive"):
            if getattr(self, name) < timedelta(0):
                raise InvalidConfig(name, "must not be negative")
        for name in (
            "heartbeat_interval",
            "fallback_poll_interval",
            "fallback_heartbeat_ttl",
            "flush_interval",
            "connect_timeout",
            "http_timeout",
            "poll_timeout",
        ):
            if getattr(self, name) <= timedelta(0):
                raise InvalidConfig(name, "must be longer than zero")
        if self.reconnect_min <= timedelta(0) or self.reconnect_max < self.reconnect_min:
            raise InvalidConfig("reconnect_min", "need 0 < reconnect_min <= reconnect_max")

    def _check_isolation(self) -> None:
        if self.isolation not in ISOLATION_MODES:
            raise InvalidConfig("isolation", f"expected one of {', '.join(ISOLATION_MODES)}")
        for name in ("job_memory", "job_cpu_seconds", "job_processes", "job_file_size"):
            if getattr(self, name) < 0:
                raise InvalidConfig(name, "must not be negative (0: no limit)")
