"""Assembles the gRPC server: the jobmesh services, health and reflection, on one listening address."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from jobmesh.server.api.executor_control import ExecutorControl
from jobmesh.server.api.job_service import JobService
from jobmesh.server.api.search_service import SearchService
from jobmesh.server.config import ServerConfig
from jobmesh.server.job_commands import JobCommands
from jobmesh.server.job_queries import JobQueries
from jobmesh.server.store.port import Store
from jobmesh.server.timestamps import utcnow
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
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


@dataclass
class RunningServer:
    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer

    async def stop(self, grace: float = 5.0) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)


async def start_server(config: ServerConfig, store: Store) -> RunningServer:
    """Starts serving on `config.listen` (port 0 picks a free port) and returns at once."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ]
    )
    commands = JobCommands(store, config.policy, utcnow)
    job_service_pb2_grpc.add_JobServiceServicer_to_server(JobService(commands), server)
    search_service_pb2_grpc.add_SearchServiceServicer_to_server(SearchService(JobQueries(store)), server)
    executor_control_pb2_grpc.add_ExecutorControlServicer_to_server(ExecutorControl(), server)
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
    return RunningServer(server, port, health_servicer)


async def serve_until_stopped(running: RunningServer, stop: asyncio.Event) -> None:
    await stop.wait()
    log.info("stopping: draining calls")
    await running.stop()
