"""Whether this executor can take the mesh's runs, as its server tells it (executor protocol: the refusal
`QUEUE_UNREACHABLE`, and `ExecutorWelcome.queue_kind`). An executor whose queue cannot be the mesh's would
connect and wait for ever, its runs never coming: it stops at its first connection instead, saying why
(`Executor.run()` logs and raises QueueUnreachable).
"""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.errors import InvalidConfig

QUEUE_UNREACHABLE = "QUEUE_UNREACHABLE"  # jobmesh.v1.ErrorReason


class QueueUnreachable(InvalidConfig):
    """This executor's queue (`queue_url`) cannot be the one its mesh queues runs on."""

    def __init__(self, message: str) -> None:
        super().__init__("queue_url", message)


def refusal_of(error: BaseException) -> QueueUnreachable | None:
    """The server's refusal of an executor outside its process (`FAILED_PRECONDITION`, reason
    `QUEUE_UNREACHABLE`), with the server's words; None for any other error."""
    if not isinstance(error, grpc.aio.AioRpcError) or error.code() != grpc.StatusCode.FAILED_PRECONDITION:
        return None
    try:
        status = rpc_status.from_call(error)
    except ValueError:  # details that contradict the status: not a refusal of ours
        return None
    info = error_details_pb2.ErrorInfo()
    for detail in status.details if status is not None else ():
        if detail.Is(info.DESCRIPTOR):
            detail.Unpack(info)
    if info.reason != QUEUE_UNREACHABLE:
        return None
    return QueueUnreachable(f"the server refused this executor: {error.details()}")


def mismatch_of(welcome: pb.ExecutorWelcome, in_process_queue: str, server: str) -> QueueUnreachable | None:
    """Whether the mesh's queue, as the welcome names it, is one that this executor's queue cannot be: an
    in-process queue (`in_process_queue`, its identity) against Kafka. None when it can be, or is not said."""
    if welcome.queue_kind == pb.QUEUE_KIND_KAFKA and in_process_queue:
        return QueueUnreachable(
            f"the mesh at {server} queues its runs on Kafka, and this executor reads an in-process queue"
            " (memory://), where none of them arrives: give it the mesh's queue URL"
            " (`jobmesh executor --queue-url kafka://HOST:PORT`, or JOBMESH_QUEUE_URL)"
        )
    return None
