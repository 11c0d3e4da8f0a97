"""`jobmesh.v1.ExecutorControl`: the executors' stream.

The contract is fixed; the claim, heartbeat and report handling arrives with the scheduling pipeline. Until
then an executor that connects is told so plainly instead of being left waiting.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from jobmesh.v1 import executor_control_pb2 as pb
from jobmesh.v1 import executor_control_pb2_grpc


class ExecutorControl(executor_control_pb2_grpc.ExecutorControlServicer):
    async def Connect(
        self, request_iterator: AsyncIterator[pb.ConnectRequest], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.ConnectResponse]:
        await context.abort(
            grpc.StatusCode.UNIMPLEMENTED, "executor streams are not served by this server yet"
        )
        yield pb.ConnectResponse()  # pragma: no cover - abort raises
