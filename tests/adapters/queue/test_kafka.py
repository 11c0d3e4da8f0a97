"""What only the Kafka adapter has: broker failures, delivery reports, partitions by job."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_INVALID, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from jobmesh.adapters.queue import kafka_consumer
from jobmesh.adapters.queue.codec import topic_of
from jobmesh.adapters.queue.kafka import KafkaRunQueue
from jobmesh.adapters.queue.kafka_consumer import KafkaPosition
from jobmesh.core.ports.queue import QueueUnavailable
from tests.adapters.queue.support import drain, make_run, unique_name
from tests.support import AT_ONCE

UNREACHABLE = "127.0.0.1:1"


@pytest.fixture
def unreachable() -> Iterator[KafkaRunQueue]:
    queue = KafkaRunQueue(UNREACHABLE, admin_timeout=1.0)
    yield queue
    queue.close()


@pytest.mark.timing
def test_publish_to_an_unreachable_broker_fails_within_the_timeout(unreachable: KafkaRunQueue) -> None:
    started = time.monotonic()
    with pytest.raises(QueueUnavailable):
        unreachable.publish([make_run("q", "a", "1")], timeout=1.5)
    assert time.monotonic() - started < 1.5 + AT_ONCE  # not the default 5 s, nor librdkafka's minutes


@pytest.mark.timing
def test_undelivered_runs_fail_the_publish_and_are_dropped_from_the_producer(
    unreachable: KafkaRunQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past topic creation (as if the topics existed), so the delivery reports decide.
    monkeypatch.setattr(unreachable._topics, "ensure", lambda topics, timeout: None)
    started = time.monotonic()

    with pytest.raises(QueueUnavailable, match="unacknowledged"):
        unreachable.publish([make_run("q", "a", str(i)) for i in range(100)], timeout=1.0)

    assert time.monotonic() - started < 1.0 + AT_ONCE  # not the default 5 s
    assert len(unreachable._producer) == 0  # not sent later, on top of the caller's retry


def test_consumer_on_an_unreachable_broker_fails(unreachable: KafkaRunQueue) -> None:
    with pytest.raises(QueueUnavailable):
        unreachable.consumer("g", ["q"])


@pytest.mark.kafka
def test_a_delivery_the_broker_refuses_fails_the_publish(kafka_bootstrap: str) -> None:
    name = unique_name()
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    small = NewTopic(topic_of(name, "normal"), num_partitions=1, config={"max.message.bytes": "1000"})
    admin.create_topics([small])[small.topic].result(timeout=10)
    queue = KafkaRunQueue(kafka_bootstrap)
    try:
        big = make_run(name, "a", "big")
        big.target.handler.payload = os.urandom(5000)  # random: lz4 cannot shrink it under the limit
        with pytest.raises(QueueUnavailable, match="not delivered"):
            queue.publish([make_run(name, "a", "ok"), big])
        queue.publish([make_run(name, "a", "after")])  # the producer still works afterwards
    finally:
        queue.close()


@pytest.mark.kafka
def test_runs_are_keyed_by_job_so_a_job_stays_on_one_partition(kafka_queue: KafkaRunQueue) -> None:
    name = unique_name()
    kafka_queue.publish([make_run(name, f"job{j}", f"r{i}") for i in range(4) for j in range(12)])
    consumer = kafka_queue.consumer(f"{name}-g", [name])
    try:
        got = drain(consumer, 48)
    finally:
        consumer.close()

    partitions: dict[str, set[int]] = {}
    for delivery in got:
        assert isinstance(delivery.token, KafkaPosition)
        job = delivery.run.attempt.run.split("/")[1]
        partitions.setdefault(job, set()).add(delivery.token.partition)
    assert len(got) == 48
    assert all(len(used) == 1 for used in partitions.values())
    assert len(set().union(*partitions.values())) > 1


@pytest.mark.kafka
def test_a_fatally_failed_producer_is_replaced_before_the_next_publish(kafka_bootstrap: str) -> None:
    queue = KafkaRunQueue(kafka_bootstrap)
    try:
        before = queue._producer
        queue._on_producer_error(KafkaError(KafkaError._FATAL, "simulated", fatal=True))
        queue.publish([make_run(unique_name(), "a", "1")])
        assert queue._producer is not before
    finally:
        queue.close()


class _AssigningConsumer:
    """The two calls an assignment makes, with `committed` refused `refusals` times (NOT_COORDINATOR, as a
    broker loading its groups answers). A real broker cannot be made to refuse on demand."""

    def __init__(self, offsets: dict[int, int], refusals: int) -> None:
        self.offsets = offsets
        self.refusals = refusals
        self.assigned: list[tuple[int, int]] | None = None

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        if self.refusals:
            self.refusals -= 1
            raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))
        return [TopicPartition(p.topic, p.partition, self.offsets[p.partition]) for p in partitions]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = [(p.partition, p.offset) for p in partitions]


def test_assigned_partitions_start_at_the_committed_offsets_asked_again_after_a_refusal() -> None:
    consumer = _AssigningConsumer({0: 7, 1: OFFSET_INVALID}, refusals=2)
    partitions = [TopicPartition("runs", 0), TopicPartition("runs", 1)]
    kafka_consumer._start_at_committed(consumer, partitions)  # type: ignore[arg-type]
    assert consumer.assigned == [(0, 7), (1, OFFSET_BEGINNING)]  # nothing committed: the beginning


def test_offsets_still_unknown_after_the_wait_are_left_to_librdkafka(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_consumer, "COMMITTED_WAIT", 0.3)
    consumer = _AssigningConsumer({0: 7}, refusals=1_000)
    kafka_consumer._start_at_committed(consumer, [TopicPartition("runs", 0)])  # type: ignore[arg-type]
    assert consumer.assigned == [(0, OFFSET_INVALID)]  # assigned all the same, librdkafka reads the offset
