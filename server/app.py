"""Assembles the gRPC server: the jobmesh services, health and reflection, on its listening address (and on
the executors' own address when it has one: see server.tls)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from jobmesh.control.v1 import executor_control_pb2, executor_control_pb2_grpc
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.cancels import CANCEL_NOTICE_STATES, CancelRouter
from jobmesh.core.dispatch import Dispatcher
from jobmesh.core.hooks import NO_HOOKS, RunHooks
from jobmesh.core.lifecycle import AttemptLifecycle
from jobmesh.core.limits import MAX_GRPC_MESSAGE_BYTES
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.ports.queue import RunQueue
from jobmesh.core.ports.signals import SignalBus
from jobmesh.core.readiness import Readiness
from jobmesh.core.timestamps import utcnow
from jobmesh.server.admission.caller_rates import CallerRates
from jobmesh.server.admission.log_limits import AttemptLogCaps
from jobmesh.server.admission.quotas import NamespaceQuotas, QuotaLimits
from jobmesh.server.admission.stream_slots import StreamSlots
from jobmesh.server.api.bulk_commands import BulkCommands
from jobmesh.server.api.bypass import BackgroundDispatcher
from jobmesh.server.api.count_feed import CountFeed
from jobmesh.server.api.feed import RunFeed
from jobmesh.server.api.job_commands import JobCommands
from jobmesh.server.api.job_queries import JobQueries
from jobmesh.server.api.job_service import JobService
from jobmesh.server.api.malformed import MalformedRequests
from jobmesh.server.api.reflection import enable_reflection
from jobmesh.server.api.search_service import SearchService
from jobmesh.server.auth.authentication import HEALTH_SERVICE, REFLECTION_SERVICE, Authentication
from jobmesh.server.auth.client_certificates import ClientCertificates
from jobmesh.server.auth.jwt_tokens import JwtConfig, JwtTokens
from jobmesh.server.auth.opaque_tokens import OpaqueTokens
from jobmesh.server.auth.tls import ExecutorCertificateRequired, server_credentials
from jobmesh.server.config import ServerConfig, new_server_id
from jobmesh.server.executors.attempt_reports import AttemptReports
from jobmesh.server.executors.executor_control import ExecutorControl
from jobmesh.server.executors.outage_journal import OutageJournal
from jobmesh.server.executors.outage_mode import OutageMode, journal_path
from jobmesh.server.executors.session_renewals import SessionRenewals
from jobmesh.server.executors.sessions import Sessions, quiet_limit_of
from jobmesh.server.gauges import ServerGauges
from jobmesh.server.loop_lag import LoopLag
from jobmesh.server.principals import CredentialSource
from jobmesh.server.refusals import RefusalTrail
from jobmesh.server.rpc_metrics import RpcDurations
from jobmesh.server.stream_lag import StreamLag
from jobmesh.server.workers import Workers
from jobmesh.v1 import job_service_pb2, job_service_pb2_grpc, search_service_pb2, search_service_pb2_grpc

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    job_service_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
    search_service_pb2.DESCRIPTOR.services_by_name["SearchService"].full_name,
    executor_control_pb2.DESCRIPTOR.services_by_name["ExecutorControl"].full_name,
)


# Executors ping their stream to find a dead peer: allowed even when no data flows. A taken port is refused
# (no SO_REUSEPORT), unless the server is one of several workers sharing it on purpose.
SERVER_OPTIONS = (
    ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 0),
)


def new_grpc_server(
    *,
    share_port: bool = False,
    authentication: Authentication | None = None,
    certified_executors: bool = False,
) -> grpc.aio.Server:
    """A server with the options and interceptors every jobmesh server has (its services not added yet).
    Authentication comes first: a caller without a valid credential learns nothing, not even that its
    request did not parse. `certified_executors`: ExecutorControl only for calls with a verified client
    certificate."""
    options = [*SERVER_OPTIONS, ("grpc.so_reuseport", int(share_port))]
    interceptors: list[grpc.aio.ServerInterceptor] = [RpcDurations()]  # first: refused calls are timed too
    if authentication is not None:
        interceptors.append(authentication)
    if certified_executors:
        interceptors.append(ExecutorCertificateRequired())
    interceptors.append(MalformedRequests())
    return grpc.aio.server(interceptors=interceptors, options=options)


_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
_OPEN_SERVICES = {"health": HEALTH_SERVICE, "reflection": REFLECTION_SERVICE}


def credential_sources(config: ServerConfig) -> list[CredentialSource]:
    """The configured sources, in the order they are asked."""
    sources: list[CredentialSource] = []
    if config.executor_certificates is not None:
        sources.append(ClientCertificates(config.executor_certificates))
    if config.verifies_jwts:
        jwt = JwtConfig(
            issuer=config.jwt_issuer,
            audience=config.jwt_audience,
            public_keys=config.jwt_public_keys,
            jwks_file=config.jwt_jwks_file,
            algorithms=config.jwt_algorithms,
            leeway=config.jwt_leeway,
        )
        sources.append(JwtTokens(jwt))
    if config.token_hashes_file is not None:
        sources.append(OpaqueTokens(config.token_hashes_file))
    return sources


def authentication_of(config: ServerConfig, store: SchedulerStore) -> Authentication | None:
    """The interceptor that authenticates every call (and writes the refused ones to the audit trail); None
    when authentication is off."""
    if not config.authentication:
        if config.verifies_jwts or config.token_hashes_file or config.executor_certificates:
            log.warning("credential sources are configured but authentication is off: no call is checked")
        return None
    return Authentication(
        credential_sources(config),
        open_services=frozenset(_OPEN_SERVICES[name] for name in config.open_services),
        rates=CallerRates(rate=config.caller_rate, burst=config.caller_burst),
        refusals=RefusalTrail(store, utcnow),
    )


def _log_caps(quotas: QuotaLimits, store: SchedulerStore) -> AttemptLogCaps:
    """The server's cap on an attempt's log: its namespace's quota, found from the store when some
    namespace has one of its own."""

    def namespaces_of(refs: Sequence[AttemptRef]) -> dict[AttemptRef, str]:
        return {ref: found.run.namespace for ref, found in store.attempts(refs).items()}

    own = {namespace: limits.attempt_log_bytes for namespace, limits in quotas.namespaces.items()}
    return AttemptLogCaps(
        quotas.defaults.attempt_log_bytes, utcnow, namespace_limits=own, namespaces_of=namespaces_of
    )


def listen(server: grpc.aio.Server, config: ServerConfig) -> tuple[int, int | None]:
    """Binds `config.listen` (plaintext, or TLS) and the executor address (mutual TLS) when there is one:
    their ports (0 where binding failed)."""
    if config.tls is None:
        return server.add_insecure_port(config.listen), None
    port = server.add_secure_port(
        config.listen, server_credentials(config.tls, require_client_certificate=False)
    )
    if config.executor_listen is None:
        return port, None
    executors = server_credentials(config.tls, require_client_certificate=True)
    return port, server.add_secure_port(config.executor_listen, executors)


@dataclass
class Services:
    """The servicers of one server process, wired to its adapters, and what they hold open."""

    jobs: JobService
    search: SearchService
    control: ExecutorControl
    health: health.aio.HealthServicer
    sessions: Sessions
    renewals: SessionRenewals
    bypass: BackgroundDispatcher
    feed: RunFeed
    counts: CountFeed
    workers: Workers
    stream_lag: StreamLag
    loop_lag: LoopLag
    outage: OutageMode | None = None
    gauges: ServerGauges | None = None

    def add_to(self, server: grpc.aio.Server) -> None:
        """Every service on `server`, with health and reflection (which serves the protos' comments)."""
        job_service_pb2_grpc.add_JobServiceServicer_to_server(self.jobs, server)
        search_service_pb2_grpc.add_SearchServiceServicer_to_server(self.search, server)
        executor_control_pb2_grpc.add_ExecutorControlServicer_to_server(self.control, server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
        enable_reflection(server, (*SERVICE_NAMES, health_name))

    async def serving(self, readiness: Readiness | None = None) -> None:
        """Starts the live feed on the server's loop, then health reports every service SERVING (once the
        server listens), or, given the process's `readiness`, SERVING while it is ready and NOT_SERVING
        while a dependency is away."""
        await self.feed.start()
        self.counts.start()
        self.loop_lag.start()
        if self.gauges is not None:
            self.gauges.start()
        ready = readiness.ready if readiness is not None else lambda: True
        if readiness is not None:
            loop = asyncio.get_running_loop()
            updates: set[asyncio.Task[None]] = set()

            def update() -> None:
                task = loop.create_task(self._follow(ready))
                updates.add(task)
                task.add_done_callback(updates.discard)

            def on_change(_: bool) -> None:
                loop.call_soon_threadsafe(update)

            readiness.listen(on_change)
        await self._follow(ready)

    async def _follow(self, ready: Callable[[], bool]) -> None:
        """Each service's status set from `ready()` read at that moment: of two updates that interleave,
        the later reading wins."""
        for name in ("", *SERVICE_NAMES):
            serving = ready()
            await self.health.set(name, _SERVING if serving else _NOT_SERVING)

    def close(self) -> None:
        self.feed.close()
        self.counts.close()
        self.renewals.close()
        self.sessions.close()
        self.control.close()
        self.bypass.close()
        self.workers.close()
        if self.outage is not None:
            self.outage.close()


def build_services(
    config: ServerConfig,
    store: SchedulerStore,
    queue: RunQueue,
    signals: SignalBus,
    hooks: RunHooks = NO_HOOKS,
) -> Services:
    sessions = Sessions(signals)
    sessions.start()
    cancels = CancelRouter(signals, push_local=sessions.push)
    bypass = BackgroundDispatcher(Dispatcher(store, queue, utcnow, hooks))
    server_id = config.server_id or new_server_id()
    outage = _outage_mode(config, signals, server_id)
    commands = JobCommands(
        store,
        config.policy,
        utcnow,
        dispatcher=bypass,
        cancels=cancels,
        secret_queues=config.secret_queues,
        fenced=outage.fenced if outage is not None else None,
        hooks=hooks,
    )
    lifecycle = AttemptLifecycle(store, queue, utcnow, hooks=hooks)
    reports = AttemptReports(
        store,
        lifecycle,
        utcnow,
        dispatcher=bypass,
        immediate_threshold=config.policy.immediate_threshold,
        outage=outage,
        queue_rates=config.queue_rate_limits,
        queue_limits=config.queue_concurrency_limits,
    )
    if outage is not None:
        outage.start(reports.apply_journaled)
    renewals = SessionRenewals(
        store,
        sessions,
        utcnow,
        server_id=server_id,
        interval=config.session_renewal_interval,
        stale_after=quiet_limit_of(config.heartbeat_interval),
        answers_while_away=outage is not None,
    )
    renewals.start()
    stream_lag = StreamLag()
    control = ExecutorControl(
        reports,
        sessions,
        renewals,
        stream_lag,
        server_id=server_id,
        heartbeat_interval=config.heartbeat_interval,
        in_process_queue=queue.in_process_id,
        log_caps=_log_caps(config.quotas, store),
    )
    loop_lag = LoopLag()
    workers = Workers(
        stream_lag,
        loop_lag,
        max_pending_creates=config.max_pending_creates,
        max_stream_lag=config.max_stream_lag,
        max_loop_lag=config.max_loop_lag,
        retry_after=config.retry_after,
    )
    feed = RunFeed(store, reads=workers.read, watcher_capacity=config.watch_buffer_runs)
    feed.listen(sessions.push_cancelling, CANCEL_NOTICE_STATES)
    counts = CountFeed(store, reads=workers.read)
    feed.listen(counts.runs_changed, frozenset())  # what the feed reads anyway: it reads for nobody else
    slots = StreamSlots(
        total=config.max_live_streams,
        per_client=config.max_live_streams_per_client,
        per_caller=config.max_live_streams_per_caller,
    )
    queries = JobQueries(store)
    quotas = NamespaceQuotas(config.quotas, store)
    return Services(
        JobService(commands, workers, quotas, BulkCommands(store, commands, queries, quotas.admit_runs)),
        SearchService(queries, workers, feed, slots, counts),
        control,
        health.aio.HealthServicer(),
        sessions,
        renewals,
        bypass,
        feed,
        counts,
        workers,
        stream_lag,
        loop_lag,
        outage,
        ServerGauges(
            executors=lambda: len(sessions.executor_ids()),
            loop_lag=loop_lag,
            stream_lag=stream_lag,
            pending_creates=lambda: workers.pending_creates,
        ),
    )


def _outage_mode(config: ServerConfig, signals: SignalBus, server_id: str) -> OutageMode | None:
    """Its journal, opened for this server process alone, when the config names a folder for it."""
    if config.journal_dir is None:
        return None
    journal = OutageJournal(journal_path(config.journal_dir, server_id))
    journal.open()
    return OutageMode(journal, signals)


@dataclass
class RunningServer:
    server: grpc.aio.Server
    port: int
    services: Services
    executor_port: int | None = None  # the executor address's, when there is one
    authentication: Authentication | None = None

    async def stop(self, grace: float = 5.0) -> None:
        await self.services.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        await self.services.loop_lag.stop()
        if self.services.gauges is not None:
            await self.services.gauges.stop()
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """What uses the store is done with it: the store may be closed next."""
        self.services.close()
        if self.authentication is not None:
            self.authentication.close()


async def start_server(
    config: ServerConfig,
    store: SchedulerStore,
    queue: RunQueue,
    signals: SignalBus,
    readiness: Readiness | None = None,
    *,
    hooks: RunHooks = NO_HOOKS,
) -> RunningServer:
    """Starts serving on `config.listen` (port 0 picks a free port) and returns at once. gRPC health follows
    `readiness` when given (else it says SERVING while the server runs). `hooks` observe the runs' hops."""
    authentication = authentication_of(config, store)
    server = new_grpc_server(
        share_port=config.share_port,
        authentication=authentication,
        certified_executors=config.executor_listen is not None,
    )
    services = build_services(config, store, queue, signals, hooks)
    services.add_to(server)
    try:
        port, executor_port = listen(server, config)
    except BaseException:
        services.close()
        raise
    for bound, address in ((port, config.listen), (executor_port, config.executor_listen)):
        if bound == 0:
            services.close()
            raise OSError(f"cannot listen on {address}")
    await services.serving(readiness)  # the feed reads before the first stream can come
    await server.start()
    return RunningServer(server, port, services, executor_port, authentication)
