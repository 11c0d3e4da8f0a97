"""Assembles the gRPC server: the jobmesh services, health and reflection, on one listening address."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from jobmesh.core.cancels import CancelRouter
from jobmesh.core.dispatch import Dispatcher
from jobmesh.core.lifecycle import AttemptLifecycle
from jobmesh.core.limits import MAX_GRPC_MESSAGE_BYTES
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.ports.queue import RunQueue
from jobmesh.core.ports.signals import SignalBus
from jobmesh.core.timestamps import utcnow
from jobmesh.server.api.executor_control import ExecutorControl, new_server_id
from jobmesh.server.api.job_service import JobService
from jobmesh.server.api.search_service import SearchService
from jobmesh.server.attempt_reports import AttemptReports
from jobmesh.server.bypass import BackgroundDispatcher
from jobmesh.server.config import ServerConfig
from jobmesh.server.job_commands import JobCommands
from jobmesh.server.job_queries import JobQueries
from jobmesh.server.sessions import Sessions
from jobmesh.v1 import (
    executor_control_pb2,
    executor_control_pb2_grpc,
    job_service_pb2,
    job_service_pb2_grpc,
    search_service_pb2,
    search_service_pb2_grpc,
)

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    job_service_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
    search_service_pb2.DESCRIPTOR.services_by_name["SearchService"].full_name,
    executor_control_pb2.DESCRIPTOR.services_by_name["ExecutorControl"].full_name,
)


@dataclass
class RunningServer:
    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    sessions: Sessions
    bypass: BackgroundDispatcher
    control: ExecutorControl

    async def stop(self, grace: float = 5.0) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        self.sessions.close()
        self.control.close()
        await asyncio.to_thread(self.bypass.close)


async def start_server(
    config: ServerConfig, store: SchedulerStore, queue: RunQueue, signals: SignalBus
) -> RunningServer:
    """Starts serving on `config.listen` (port 0 picks a free port) and returns at once."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
            # Executors ping their stream to find a dead peer; allow it even when no data flows.
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
            ("grpc.http2.max_ping_strikes", 0),
        ]
    )
    sessions = Sessions(signals)
    sessions.start()
    cancels = CancelRouter(signals, push_local=sessions.push)
    bypass = BackgroundDispatcher(Dispatcher(store, queue, utcnow))
    commands = JobCommands(store, config.policy, utcnow, dispatcher=bypass, cancels=cancels)
    lifecycle = AttemptLifecycle(store, queue, utcnow)
    reports = AttemptReports(
        store, lifecycle, utcnow, dispatcher=bypass, immediate_threshold=config.policy.immediate_threshold
    )
    control = ExecutorControl(
        reports, sessions, server_id=new_server_id(), heartbeat_interval=config.heartbeat_interval
    )
    job_service_pb2_grpc.add_JobServiceServicer_to_server(JobService(commands), server)
    search_service_pb2_grpc.add_SearchServiceServicer_to_server(SearchService(JobQueries(store)), server)
    executor_control_pb2_grpc.add_ExecutorControlServicer_to_server(control, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
        server,
    )
    port = server.add_insecure_port(config.listen)
    if port == 0:
        raise OSError(f"cannot listen on {config.listen}")
    await server.start()
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, port, health_servicer, sessions, bypass, control)
