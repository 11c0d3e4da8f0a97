"""What both adapters agree on: the topics, a run's bytes, key and headers, and the order of the lanes.

Runs travel keyed by job on one topic per (executor queue, priority lane): `jobmesh.runs.{queue}.{lane}`; runs
whose retries are spent are copied to `jobmesh.runs.dead-letter`.
"""

from __future__ import annotations

from collections.abc import Mapping

from google.protobuf.message import DecodeError

from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.attempts import AttemptRef
from jobmesh.v1 import job_pb2

LANES = ("high", "normal", "low")
DEAD_LETTER_TOPIC = "jobmesh.runs.dead-letter"
CONTENT_TYPE_HEADER = "content-type"
CONTENT_TYPE = "application/x-protobuf; messageType=jobmesh.control.v1.DispatchedRun"
# What messages published before the executor protocol had a package of its own say: the same bytes (the
# message kept its fields), still on the topics when a mesh is upgraded, so they are read as runs too.
LEGACY_CONTENT_TYPES = frozenset({"application/x-protobuf; messageType=jobmesh.v1.DispatchedRun"})
# Every LOW_FIRST_EVERY-th poll takes the low lane first, so a busy high lane cannot starve it.
LOW_FIRST_EVERY = 4


# A run handed to the queue this long after it was due (a backlog: the queue or the server was away) goes one
# lane below its priority's: it has missed the 2 s start promise already, and yields to the runs that can
# still keep it. A run sent again a second after a failed publish still can, and keeps its lane.
LATE_AFTER_NS = 2_000_000_000


def lane_of(run: dispatch_pb2.DispatchedRun) -> str:
    """The run's priority lane, or the one below it when the run was long late when dispatched. A backlog
    that comes out at once (Kafka back after 30 s: 12,000 runs at 400 a second) would otherwise sit in front
    of every run due after it, on the same partitions, and make those late too while it drains; below them,
    it drains with what the executors have to spare, and with a share of the polls (`LaneOrder`)."""
    lane = {job_pb2.PRIORITY_HIGH: "high", job_pb2.PRIORITY_LOW: "low"}.get(run.priority, "normal")
    due, dispatched = run.due_time.ToNanoseconds(), run.dispatch_time.ToNanoseconds()
    if due and dispatched - due > LATE_AFTER_NS:
        return LANES[min(LANES.index(lane) + 1, len(LANES) - 1)]
    return lane


def topic_of(queue: str, lane: str) -> str:
    return f"jobmesh.runs.{queue or 'default'}.{lane}"


class MalformedMessage(ValueError):
    """A message on a lane that is not a usable DispatchedRun."""


def job_key(run: dispatch_pb2.DispatchedRun) -> str:
    """The job id of the run: the Kafka key, so that a job's runs stay in order on one partition."""
    ref = AttemptRef.from_proto_or_none(run.attempt)
    return ref.job_id if ref is not None else run.attempt.run  # not a run name: still a stable key


def encode(run: dispatch_pb2.DispatchedRun) -> bytes:
    return run.SerializeToString()


def decode(value: bytes | None, content_type: str | None) -> dispatch_pb2.DispatchedRun:
    """The run in a message; MalformedMessage when it is something else (another producer, garbage)."""
    if content_type is not None and content_type != CONTENT_TYPE and content_type not in LEGACY_CONTENT_TYPES:
        raise MalformedMessage(f"content type {content_type!r}")
    try:
        run = dispatch_pb2.DispatchedRun.FromString(value or b"")
    except DecodeError as exc:
        raise MalformedMessage(f"not a DispatchedRun: {exc}") from exc
    # Protobuf parses many byte strings (and the empty one) as a valid message: a run must name its attempt.
    if not run.attempt.run:
        raise MalformedMessage("no attempt.run")
    if AttemptRef.from_proto_or_none(run.attempt) is None:
        raise MalformedMessage(f"not an attempt of a run: {run.attempt.run[:200]!r} #{run.attempt.attempt}")
    return run


Headers = list[tuple[str, str | bytes | None]]
_PLAIN_HEADERS: Headers = [(CONTENT_TYPE_HEADER, CONTENT_TYPE)]


def headers_of(run: dispatch_pb2.DispatchedRun) -> Headers:
    """The message's headers: its content type and the run's own trace context (`traceparent`, ...), which
    the span that publishes it wrote on it. Untraced, one shared list (never changed): nothing is built per
    message."""
    if not run.trace_context:
        return _PLAIN_HEADERS
    return [*_PLAIN_HEADERS, *run.trace_context.items()]


def trace_context_of(headers: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name != CONTENT_TYPE_HEADER}


class LaneOrder:
    """The lane order of successive polls: high, normal, low, except every Nth poll, which takes low first."""

    def __init__(self, low_first_every: int = LOW_FIRST_EVERY) -> None:
        self._every = low_first_every
        self._polls = 0

    def next(self) -> tuple[str, ...]:
        self._polls += 1
        if self._polls % self._every == 0:
            return ("low", *(lane for lane in LANES if lane != "low"))
        return LANES
