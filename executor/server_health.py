"""Whether the server this executor reaches can take its claims: the server's gRPC health, asked as a
readiness probe (`core/readiness.py`). An executor's stream can stay up while its server's database is away,
and the executor is then not ready either: it runs what it holds, and can take nothing new."""

from __future__ import annotations

from grpc_health.v1 import health_pb2, health_pb2_grpc

from jobmesh.executor.config import ExecutorConfig
from jobmesh.transport.tls import channel

ANSWER_TIMEOUT_S = 1.5  # under the probe's own timeout (core/readiness.py)


class ServerNotServing(Exception):
    """The server answered its health check with another status than SERVING."""


class ServerHealth:
    def __init__(self, config: ExecutorConfig) -> None:
        self._config = config
        self._channel = channel(config.server, config.tls)
        self._stub = health_pb2_grpc.HealthStub(self._channel)

    def check(self) -> None:
        """Returns when the server says SERVING; raises otherwise (an RpcError when it does not answer)."""
        answer = self._stub.Check(
            health_pb2.HealthCheckRequest(),
            timeout=ANSWER_TIMEOUT_S,
            metadata=self._config.call_token.metadata(),  # health may be closed to callers without one
        )
        if answer.status != health_pb2.HealthCheckResponse.SERVING:
            status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
            raise ServerNotServing(f"the server {self._config.server} says {status}")

    def close(self) -> None:
        self._channel.close()
