"""The queue port. Its adapters (Kafka, in-process) are in `jobmesh.adapters.queue`, chosen by URL.

Runs travel as `jobmesh.control.v1.DispatchedRun` messages, by executor queue and priority lane (high,
normal, low); runs whose retries are spent are copied to a dead-letter topic. The queue holds nothing that
cannot be rebuilt from the database (invariant 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from jobmesh.control.v1 import dispatch_pb2


class QueueUnavailable(Exception):
    """The broker could not take or give messages in time; the caller falls back (the watcher retries)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message taken from the queue. `token` is the adapter's handle for committing it. `trace_context` is
    the publisher's W3C trace context (`traceparent`, ...; empty if it had none), for the executor's span."""

    run: dispatch_pb2.DispatchedRun
    lane: str
    token: object
    trace_context: Mapping[str, str] = field(default_factory=dict)


class RunConsumer(Protocol):
    def poll(self, max_items: int, timeout: float) -> list[Delivery]:
        """Up to `max_items` runs, waiting at most `timeout` seconds for the first. High lane first, then
        normal, then low, yet low is never starved (a share of polls takes it first). Malformed messages are
        skipped (and committed) with a warning."""
        ...

    def commit(self, deliveries: Sequence[Delivery]) -> None:
        """Marks these as done for the consumer group: they will not be delivered to it again. Called only
        after the claim is recorded; uncommitted ones come back after a crash or rebalance."""
        ...

    def step_aside(self) -> None:
        """Takes nothing until `rejoin`, and what the group holds for this consumer goes to its other
        members meanwhile (an executor whose slots are all busy must not hold runs that others could start).
        Called only when every delivery is committed or given up."""
        ...

    def rejoin(self) -> None:
        """Takes runs again after `step_aside`."""
        ...

    def close(self) -> None: ...


class RunQueue(Protocol):
    # False when the messages live in this process only (the in-process queue): whatever was QUEUED before
    # the process started is gone, and the watcher sends it again at once rather than after `requeue_after`.
    durable: bool
    # Who can take its runs: empty for a broker that any process may reach (Kafka); for the in-process queue,
    # an identity of its own, which only the components of this process know (an executor's hello names it,
    # and its server refuses an executor that does not: `jobmesh.control.v1.ExecutorHello.in_process_queue`).
    in_process_id: str

    def publish(self, runs: Sequence[dispatch_pb2.DispatchedRun], *, timeout: float = 5.0) -> None:
        """Sends the runs (each to its queue's lane topic, keyed by job) and returns once the broker has them
        all; raises QueueUnavailable when it cannot within `timeout`. Idempotent producer: a retry inside
        the adapter never duplicates."""
        ...

    def publish_dead_letters(
        self, runs: Sequence[dispatch_pb2.DispatchedRun], *, timeout: float = 5.0
    ) -> None:
        """Copies runs whose retries are spent to the dead-letter topic; raises QueueUnavailable."""
        ...

    def consumer(self, group: str, queues: Sequence[str], *, member: str = "") -> RunConsumer:
        """A consumer in `group` of every lane of the given executor queues. `member`: a name only this
        consumer uses in the group (the executor's own); a member that comes back under the same name (after
        the broker or the executor restarted) takes its share again at once, without waiting for the group to
        time the old one out."""
        ...

    def check_reachable(self) -> None:
        """Returns when the broker answers (a readiness probe); raises QueueUnavailable when it does not."""
        ...

    def close(self) -> None: ...
