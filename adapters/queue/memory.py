"""The in-process adapter of the queue port, for `jobmesh dev` (server, watcher and executors in one process).

Kafka's semantics, scaled down: an append-only log per topic holding encoded runs, a cursor per (group, topic)
so that each consumer group gets every message, and the consumers of one group share the work. A delivery
comes back when its consumer closes without committing it, as after a Kafka rebalance. Records every group
has committed are dropped, so a long dev session does not grow without bound.
"""

from __future__ import annotations

import heapq
import logging
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from jobmesh.adapters.queue import codec
from jobmesh.adapters.queue.codec import DEAD_LETTER_TOPIC, LANES, lane_of, topic_of
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.ports.queue import Delivery

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Record:
    value: bytes
    headers: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class MemoryPosition:
    """The commit handle of one in-process delivery (`Delivery.token`)."""

    topic: str
    offset: int


@dataclass(slots=True)
class _Cursor:
    """One group's progress on one topic."""

    next: int
    redeliver: list[int] = field(default_factory=list)  # a heap: oldest first
    outstanding: set[int] = field(default_factory=set)  # delivered, not committed

    def low_water(self) -> int:
        return min([self.next, *self.redeliver[:1], *self.outstanding])


@dataclass(slots=True)
class _Log:
    records: dict[int, _Record] = field(default_factory=dict)
    start: int = 0  # records below were dropped: every group had committed them
    end: int = 0
    cursors: dict[str, _Cursor] = field(default_factory=dict)  # by group


class _Broker:
    """Logs and cursors. Every method takes the lock; `changed` wakes pollers on new or returned records."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self._logs: dict[str, _Log] = {}

    def append(self, topic: str, records: Sequence[_Record]) -> None:
        with self.changed:
            topic_log = self._logs.setdefault(topic, _Log())
            for record in records:
                topic_log.records[topic_log.end] = record
                topic_log.end += 1
            self.changed.notify_all()

    def subscribe(self, group: str, topics: Sequence[str]) -> None:
        with self.changed:
            for topic in topics:
                topic_log = self._logs.setdefault(topic, _Log())
                topic_log.cursors.setdefault(group, _Cursor(next=topic_log.start))

    def take_locked(self, group: str, topic: str, max_items: int) -> list[tuple[int, _Record]]:
        """Up to `max_items` records of `topic` for `group`: returned ones first. Call with `changed` held."""
        topic_log = self._logs[topic]
        cursor = topic_log.cursors[group]
        taken: list[int] = []
        while cursor.redeliver and len(taken) < max_items:
            taken.append(heapq.heappop(cursor.redeliver))
        while cursor.next < topic_log.end and len(taken) < max_items:
            taken.append(cursor.next)
            cursor.next += 1
        cursor.outstanding.update(taken)
        return [(offset, topic_log.records[offset]) for offset in taken]

    def ack(self, group: str, positions: Sequence[MemoryPosition]) -> None:
        with self.changed:
            for position in positions:
                self._logs[position.topic].cursors[group].outstanding.discard(position.offset)
            for topic in {position.topic for position in positions}:
                self._trim(self._logs[topic])

    def release(self, group: str, positions: Sequence[MemoryPosition]) -> None:
        with self.changed:
            for position in positions:
                cursor = self._logs[position.topic].cursors[group]
                if position.offset in cursor.outstanding:
                    cursor.outstanding.discard(position.offset)
                    heapq.heappush(cursor.redeliver, position.offset)
            self.changed.notify_all()

    def records(self, topic: str) -> list[_Record]:
        with self.changed:
            topic_log = self._logs.get(topic, _Log())
            return [topic_log.records[offset] for offset in range(topic_log.start, topic_log.end)]

    @staticmethod
    def _trim(topic_log: _Log) -> None:
        low = min(cursor.low_water() for cursor in topic_log.cursors.values())
        for offset in range(topic_log.start, low):
            del topic_log.records[offset]
        topic_log.start = max(topic_log.start, low)


class MemoryRunConsumer:
    """A RunConsumer on the in-process broker. Not thread-safe: one thread polls and commits."""

    def __init__(self, broker: _Broker, group: str, queues: Sequence[str]) -> None:
        self._broker = broker
        self._group = group
        self._topics = {lane: [topic_of(queue, lane) for queue in queues] for lane in LANES}
        broker.subscribe(group, [topic for topics in self._topics.values() for topic in topics])
        self._order = codec.LaneOrder()
        self._in_flight: set[MemoryPosition] = set()
        self._closed = False

    def poll(self, max_items: int, timeout: float) -> list[Delivery]:
        if self._closed:
            raise RuntimeError("the consumer is closed")
        deadline = time.monotonic() + timeout
        order = self._order.next()
        with self._broker.changed:
            taken = self._take_locked(order, max_items)
            while not taken and max_items > 0 and (remaining := deadline - time.monotonic()) > 0:
                self._broker.changed.wait(remaining)
                taken = self._take_locked(order, max_items)
        return self._deliveries(taken)

    def commit(self, deliveries: Sequence[Delivery]) -> None:
        positions = []
        for delivery in deliveries:
            if not isinstance(delivery.token, MemoryPosition):
                raise TypeError(f"not an in-process delivery: {delivery.token!r}")
            positions.append(delivery.token)
        self._broker.ack(self._group, positions)
        self._in_flight.difference_update(positions)

    def step_aside(self) -> None:
        """Nothing to do: the group's members share one cursor, so what this one does not take, another
        member takes."""

    def rejoin(self) -> None:
        """Nothing to do (see `step_aside`)."""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # As a Kafka rebalance would: what was delivered but not committed goes to the group's next consumer.
        self._broker.release(self._group, sorted(self._in_flight, key=lambda p: (p.topic, p.offset)))
        self._in_flight.clear()

    def _take_locked(self, order: Sequence[str], max_items: int) -> list[tuple[str, str, int, _Record]]:
        taken: list[tuple[str, str, int, _Record]] = []
        for lane in order:
            for topic in self._topics[lane]:
                records = self._broker.take_locked(self._group, topic, max_items - len(taken))
                taken += [(lane, topic, offset, record) for offset, record in records]
        return taken

    def _deliveries(self, taken: Sequence[tuple[str, str, int, _Record]]) -> list[Delivery]:
        deliveries, malformed = [], []
        for lane, topic, offset, record in taken:
            position = MemoryPosition(topic, offset)
            try:
                run = codec.decode(record.value, record.headers.get(codec.CONTENT_TYPE_HEADER))
            except codec.MalformedMessage as exc:
                log.warning("skipping malformed message %s@%d: %s", topic, offset, exc)
                malformed.append(position)
                continue
            self._in_flight.add(position)
            trace_context = codec.trace_context_of(record.headers)
            deliveries.append(Delivery(run=run, lane=lane, token=position, trace_context=trace_context))
        if malformed:
            self._broker.ack(self._group, malformed)
        return deliveries


class MemoryRunQueue:
    """The run queue in this process. Thread-safe; holds no outside resources."""

    durable = False

    def __init__(self) -> None:
        self._broker = _Broker()
        self.in_process_id = secrets.token_hex(8)

    def publish(self, runs: Sequence[dispatch_pb2.DispatchedRun], *, timeout: float = 5.0) -> None:
        by_topic: dict[str, list[dispatch_pb2.DispatchedRun]] = {}
        for run in runs:
            by_topic.setdefault(topic_of(run.queue, lane_of(run)), []).append(run)
        for topic, topic_runs in by_topic.items():
            self._append(topic, topic_runs)

    def publish_dead_letters(
        self, runs: Sequence[dispatch_pb2.DispatchedRun], *, timeout: float = 5.0
    ) -> None:
        self._append(DEAD_LETTER_TOPIC, runs)

    def publish_raw(self, topic: str, value: bytes, headers: Mapping[str, str] | None = None) -> None:
        """Appends any bytes to a topic, as another producer could (for tests of malformed messages)."""
        self._broker.append(topic, [_Record(value, dict(headers or {}))])

    def consumer(self, group: str, queues: Sequence[str], *, member: str = "") -> MemoryRunConsumer:
        del member  # one process: no member outlives its consumer
        if not queues:
            raise ValueError("a consumer needs at least one executor queue")
        return MemoryRunConsumer(self._broker, group, queues)

    def dead_letters(self) -> list[dispatch_pb2.DispatchedRun]:
        """Every run copied to the dead-letter topic, oldest first."""
        records = self._broker.records(DEAD_LETTER_TOPIC)
        return [dispatch_pb2.DispatchedRun.FromString(record.value) for record in records]

    def check_reachable(self) -> None:
        """In this process's memory: always reachable."""

    def close(self) -> None:
        """Nothing to release: the queue may be shared by other components of the process (see factory)."""

    def _append(self, topic: str, runs: Sequence[dispatch_pb2.DispatchedRun]) -> None:
        self._broker.append(topic, [_Record(codec.encode(run), _headers(run)) for run in runs])


_PLAIN_HEADERS: Mapping[str, str] = {codec.CONTENT_TYPE_HEADER: codec.CONTENT_TYPE}


def _headers(run: dispatch_pb2.DispatchedRun) -> Mapping[str, str]:
    """The message's headers (as `codec.headers_of`); untraced, one shared mapping (records never change
    theirs)."""
    return {**_PLAIN_HEADERS, **run.trace_context} if run.trace_context else _PLAIN_HEADERS
