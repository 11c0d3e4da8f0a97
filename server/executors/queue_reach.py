"""Whether an executor can take this server's runs. Every executor is told where the mesh queues them
(`ExecutorWelcome.queue_kind`); a server whose queue lives in its own process (`jobmesh dev`'s in-process
queue) serves only the executors inside that process, which name that queue in their hello, and refuses any
other at once with what to change: it would connect and wait for ever, its runs never coming.
"""

from __future__ import annotations

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.errors import FailedPrecondition

QUEUE_UNREACHABLE = "QUEUE_UNREACHABLE"
OUTSIDE_EXECUTORS_FIX = (
    "this mesh queues its runs in its server's own memory (an in-process queue, as `jobmesh dev` has by"
    " default), which no executor outside that process can read: run them on the mesh's own executor"
    " (`jobmesh dev --handlers MODULE:ATTR` serves Python handlers), or start the mesh on Kafka and Redis"
    " (`--queue-url kafka://HOST:PORT --signals-url redis://HOST:PORT/DB`, or JOBMESH_QUEUE_URL and"
    " JOBMESH_SIGNALS_URL) and give this executor the same"
)


def queue_kind(in_process_queue: str) -> pb.QueueKind.ValueType:
    """The kind of the server's queue, from its `in_process_id` (empty: a broker, Kafka)."""
    return pb.QUEUE_KIND_IN_PROCESS if in_process_queue else pb.QUEUE_KIND_KAFKA


def refuse_unreachable(hello: pb.ExecutorHello, in_process_queue: str) -> None:
    """Raises FailedPrecondition when the server's queue is in-process and the executor is not inside its
    process (its hello names another queue, or none)."""
    if in_process_queue and hello.in_process_queue != in_process_queue:
        raise FailedPrecondition(
            OUTSIDE_EXECUTORS_FIX, reason=QUEUE_UNREACHABLE, metadata={"queue_kind": "IN_PROCESS"}
        )
