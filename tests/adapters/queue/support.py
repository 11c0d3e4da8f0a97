"""Builders and helpers for the queue suites: runs, a backend handle per adapter, draining consumers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from jobmesh.adapters.queue.codec import CONTENT_TYPE, CONTENT_TYPE_HEADER, DEAD_LETTER_TOPIC
from jobmesh.adapters.queue.kafka import PRODUCER_SETTINGS
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.ports.queue import Delivery, RunConsumer, RunQueue
from jobmesh.v1 import job_pb2

PRIORITIES = {"high": job_pb2.PRIORITY_HIGH, "normal": job_pb2.PRIORITY_NORMAL, "low": job_pb2.PRIORITY_LOW}
# Long enough for a Kafka consumer group to join (~1-3 s with the adapter's settings).
DRAIN_TIMEOUT = 20.0


def make_run(
    queue: str, job: str, run: str, *, lane: str = "normal", attempt: int = 1
) -> dispatch_pb2.DispatchedRun:
    """A fully populated DispatchedRun, so a round trip that drops a field shows."""
    message = dispatch_pb2.DispatchedRun(priority=PRIORITIES[lane], queue=queue)
    message.attempt.run = f"jobs/{job}/runs/{run}"
    message.attempt.attempt = attempt
    message.target.command.argv.extend(["echo", run])
    message.target.command.env["RUN"] = run
    message.due_time.FromDatetime(datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC))
    message.execution_timeout.FromTimedelta(timedelta(minutes=5))
    message.heartbeat_timeout.FromTimedelta(timedelta(seconds=15))
    message.dispatch_time.FromDatetime(datetime(2030, 1, 2, 3, 4, 4, tzinfo=UTC))
    return message


def names(deliveries: Sequence[Delivery]) -> list[str]:
    return [delivery.run.attempt.run for delivery in deliveries]


def drain(consumer: RunConsumer, count: int, timeout: float = DRAIN_TIMEOUT) -> list[Delivery]:
    """Polls until `count` deliveries came (or the time is up: the caller's assertion then shows it)."""
    deadline = time.monotonic() + timeout
    got: list[Delivery] = []
    while len(got) < count and (remaining := deadline - time.monotonic()) > 0:
        got += consumer.poll(count - len(got), min(remaining, 1.0))
    return got


def drain_until(consumer: RunConsumer, run_name: str, timeout: float = DRAIN_TIMEOUT) -> list[Delivery]:
    """Every delivery up to and including the run named `run_name`."""
    deadline = time.monotonic() + timeout
    got: list[Delivery] = []
    while run_name not in names(got) and (remaining := deadline - time.monotonic()) > 0:
        got += consumer.poll(100, min(remaining, 1.0))
    return got


@dataclass
class Backend:
    """One adapter under test, with a fresh executor queue name and the adapter-specific side doors."""

    kind: str
    queue: RunQueue
    name: str
    # (topic, key, value): bytes straight onto a topic, as a foreign producer would write them.
    inject_raw: Callable[[str, bytes, bytes], None]
    dead_letters: Callable[[], list[dispatch_pb2.DispatchedRun]]
    settle: float  # how long fetched-ahead messages take to reach a consumer
    _consumers: list[RunConsumer] = field(default_factory=list)

    def group(self, label: str = "executors") -> str:
        return f"{self.name}-{label}"

    def consumer(self, group: str | None = None) -> RunConsumer:
        consumer = self.queue.consumer(group or self.group(), [self.name])
        self._consumers.append(consumer)
        return consumer

    def run(self, job: str, run: str, lane: str = "normal") -> dispatch_pb2.DispatchedRun:
        return make_run(self.name, job, run, lane=lane)

    def close_consumers(self) -> None:
        for consumer in self._consumers:
            consumer.close()


def unique_name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


class KafkaSideDoor:
    """Raw confluent clients for what the port does not offer: foreign messages, reading the dead letters."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "partitioner": PRODUCER_SETTINGS["partitioner"]}
        )

    def inject_raw(self, topic: str, key: bytes, value: bytes) -> None:
        self._producer.produce(topic, value=value, key=key, headers=[(CONTENT_TYPE_HEADER, CONTENT_TYPE)])
        assert self._producer.flush(10) == 0

    def dead_letters(self) -> list[dispatch_pb2.DispatchedRun]:
        """The whole dead-letter topic, read by assignment (no group join, nothing committed)."""
        consumer = Consumer(
            {"bootstrap.servers": self._bootstrap, "group.id": "unused", "enable.partition.eof": True}
        )
        try:
            partitions = (
                consumer.list_topics(DEAD_LETTER_TOPIC, timeout=10).topics[DEAD_LETTER_TOPIC].partitions
            )
            consumer.assign([TopicPartition(DEAD_LETTER_TOPIC, p, OFFSET_BEGINNING) for p in partitions])
            return self._read_to_end(consumer, len(partitions))
        finally:
            consumer.close()

    @staticmethod
    def _read_to_end(consumer: Consumer, partitions: int) -> list[dispatch_pb2.DispatchedRun]:
        runs, ended, deadline = [], 0, time.monotonic() + 10
        while ended < partitions and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                error = message.error()
                if error is None:
                    runs.append(dispatch_pb2.DispatchedRun.FromString(message.value() or b""))
                elif error.code() == KafkaError._PARTITION_EOF:
                    ended += 1
        return runs

    def close(self) -> None:
        self._producer.flush(10)
        self._producer.close()
