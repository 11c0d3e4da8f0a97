"""The server's configuration: a frozen value (the process wiring builds it from the settings)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from jobmesh.core.definitions import SchedulingPolicy
from jobmesh.core.errors import InvalidConfig
from jobmesh.core.flow_control import Pacing
from jobmesh.core.names import NAMESPACE
from jobmesh.core.secret_refs import SecretQueues
from jobmesh.server.admission.quotas import QUOTA_NAMES, QuotaLimits, Quotas
from jobmesh.server.api.feed import FEED_PAGE
from jobmesh.server.auth.client_certificates import CertificateGrant
from jobmesh.server.auth.tls import ServerTls

DEFAULT_LISTEN = "127.0.0.1:50051"


def new_server_id() -> str:
    """64 random bits: a server's sessions are released by this id when it dies, so no two may share it."""
    return f"server-{random.randbytes(8).hex()}"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    listen: str = DEFAULT_LISTEN  # host:port; port 0 picks a free port
    # None: plaintext. Otherwise TLS on `listen` (and on `executor_listen`), from files read again on change.
    tls: ServerTls | None = None
    # A second address, for executors alone: TLS that requires a client certificate verified by the client
    # CA. With it, `ExecutorControl` is refused on `listen` (see server.tls).
    executor_listen: str | None = None
    # HOST:PORT of HTTP /livez and /readyz (processes/health_endpoint.py); None: not served.
    health_listen: str | None = None
    # Where executors' reports are journaled while the database is away (server/executors/outage_mode.py);
    # None: they are not, and fail until it is back.
    journal_dir: Path | None = None
    # True: one of several workers on `listen` (SO_REUSEPORT); otherwise a port already taken fails.
    share_port: bool = False
    # The name under which this server holds its executors' sessions in the store; empty: a new one
    # (`new_server_id`) at start. A parent of server workers names each, to release a dead one's.
    server_id: str = ""
    policy: SchedulingPolicy = field(default_factory=SchedulingPolicy)
    # Executors heartbeat this often (the server's welcome tells them).
    heartbeat_interval: timedelta = timedelta(seconds=3)
    # How often the sessions of the executors whose streams this server holds are renewed in the database
    # (heartbeat answers wait for the next renewal).
    session_renewal_interval: timedelta = timedelta(seconds=1)
    # Jobs in creation at once; past it creates are refused RESOURCE_EXHAUSTED, to retry after `retry_after`.
    max_pending_creates: int = 5000
    retry_after: timedelta = timedelta(seconds=1)
    # Creates are refused too while executors' claims wait longer than this for their answer in the server.
    max_stream_lag: timedelta = timedelta(seconds=1)
    # ... and while the event loop runs later than this (the process is out of CPU: answers wait too).
    max_loop_lag: timedelta = timedelta(seconds=1)
    # Live streams (`WatchRuns`, `TailRunLogs`) open at once: in all, and from one client address.
    max_live_streams: int = 4096
    max_live_streams_per_client: int = 256
    # ... and for one authenticated caller (a token's subject).
    max_live_streams_per_caller: int = 64
    # Changes a `WatchRuns` stream may hold unsent before it is cut (its reader resumes from its token).
    watch_buffer_runs: int = 10_000
    # On: every call needs a valid credential (but those to `open_services`); off: none is checked.
    authentication: bool = False
    open_services: frozenset[str] = frozenset({"health", "reflection"})
    # Executors known by their verified client certificate on `executor_listen`: name → queues
    # (server/auth/client_certificates.py).
    executor_certificates: Mapping[str, CertificateGrant] | None = None
    # The secrets a job may reference on some queues of their namespace only (core/secret_refs.py).
    secret_queues: SecretQueues = field(default_factory=SecretQueues)
    # Opaque bearer tokens: a file of their SHA-256 hashes (server/auth/opaque_tokens.py).
    token_hashes_file: Path | None = None
    # JWT bearer tokens: verified against these public keys (PEM) or this JWKS file, for this issuer and
    # audience, signed with one of these algorithms.
    jwt_public_keys: tuple[Path, ...] = ()
    jwt_jwks_file: Path | None = None
    jwt_issuer: str = ""
    jwt_audience: str = ""
    jwt_algorithms: frozenset[str] = frozenset({"RS256", "ES256", "EdDSA"})
    jwt_leeway: timedelta = timedelta(seconds=30)
    # Quotas per namespace (server/admission/quotas.py; 0: none): jobs and cron jobs held, the shortest
    # interval between a cron job's runs, the runs per minute the API starts, and the log bytes one attempt
    # may leave.
    quota_jobs: int = 0
    quota_cron_jobs: int = 1000
    quota_min_cron_interval: timedelta = timedelta(seconds=1)
    quota_runs_per_minute: int = 0
    quota_attempt_log_bytes: int = 16 * 1024 * 1024
    # ... but in these namespaces: namespace → quota (a field of `Quotas`) → its own limit there.
    namespace_quotas: Mapping[str, Mapping[str, int | timedelta]] = field(default_factory=dict)
    # Requests one authenticated caller may send: on average a second, and at once.
    caller_rate: float = 1000.0
    caller_burst: int = 2000
    # Runs a second each queue may start, across the mesh (core/flow_control.py); queues absent: no limit.
    queue_rate_limits: Mapping[str, Pacing] = field(default_factory=dict)
    # Runs of each queue that may be held (RUNNING or CANCELLING) at once, across the mesh; absent: no limit.
    queue_concurrency_limits: Mapping[str, int] = field(default_factory=dict)

    @property
    def quotas(self) -> QuotaLimits:
        defaults = Quotas(
            self.quota_jobs,
            self.quota_cron_jobs,
            self.quota_min_cron_interval,
            self.quota_runs_per_minute,
            self.quota_attempt_log_bytes,
        )
        own = {namespace: defaults.overridden(limits) for namespace, limits in self.namespace_quotas.items()}
        return QuotaLimits(defaults, own)

    @property
    def secret_files(self) -> tuple[Path, ...]:
        """What a process sharing this server's machine must keep from its commands: its TLS key and token
        file."""
        found = (self.tls.private_key if self.tls else None, self.token_hashes_file)
        return tuple(path for path in found if path is not None)

    @property
    def verifies_jwts(self) -> bool:
        return bool(self.jwt_public_keys) or self.jwt_jwks_file is not None

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
        for duration in ("retry_after", "max_stream_lag", "max_loop_lag"):
            if getattr(self, duration) <= timedelta(0):
                raise InvalidConfig(duration, "must be longer than zero")
        self._check_authentication()
        self._check_namespace_quotas()
        for name in (
            "max_live_streams",
            "max_live_streams_per_client",
            "max_live_streams_per_caller",
            "max_pending_creates",
            "caller_burst",
        ):
            if getattr(self, name) < 1:
                raise InvalidConfig(name, "must be at least 1")
        if self.watch_buffer_runs < FEED_PAGE:
            raise InvalidConfig(
                "watch_buffer_runs", f"must be at least {FEED_PAGE}, the changes the feed reads at once"
            )

    def _check_namespace_quotas(self) -> None:
        for namespace, limits in self.namespace_quotas.items():
            if not NAMESPACE.match(namespace):
                raise InvalidConfig("namespace_quotas", f"{namespace[:100]!r} is not a namespace")
            if unknown := sorted(set(limits) - set(QUOTA_NAMES)):
                raise InvalidConfig(
                    "namespace_quotas",
                    f"{unknown[0][:100]!r} is not a quota: one of {', '.join(QUOTA_NAMES)}",
                )

    def _check_authentication(self) -> None:
        if self.verifies_jwts and not (self.jwt_issuer and self.jwt_audience):
            raise InvalidConfig("jwt_issuer", "JWTs are checked against an issuer and an audience: give both")
        for name in ("jwt_issuer", "jwt_audience"):
            if getattr(self, name) and not self.verifies_jwts:
                raise InvalidConfig(name, "JWTs need public keys or a JWKS file to be checked with")
        if self.executor_certificates is not None and self.executor_listen is None:
            raise InvalidConfig(
                "executor_certificates", "client certificates are verified on the executor address alone"
            )
        tokens = self.verifies_jwts or self.token_hashes_file is not None
        if self.authentication and not (tokens or self.executor_certificates is not None):
            raise InvalidConfig(
                "authentication", "needs a credential source: a token file, JWT keys or executor certificates"
            )
        if self.caller_rate <= 0:
            raise InvalidConfig("caller_rate", "must be above zero")
        if self.open_services - {"health", "reflection"}:
            raise InvalidConfig("open_services", "only health and reflection may be open")
