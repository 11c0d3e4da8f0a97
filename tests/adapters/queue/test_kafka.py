"""What only the Kafka adapter has: broker failures, delivery reports, partitions by job."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from prometheus_client import REGISTRY

from jobmesh.adapters.queue import kafka_consumer
from jobmesh.adapters.queue.codec import LANES, topic_of
from jobmesh.adapters.queue.kafka import KafkaRunQueue
from jobmesh.adapters.queue.kafka_consumer import KafkaPosition
from jobmesh.core.ports.queue import QueueUnavailable, RunConsumer
from jobmesh.core.readiness import PROBE_TIMEOUT
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


def test_a_producer_whose_messages_timed_out_is_replaced_before_the_next_publish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Delivery reports that say "timed out" within the publish's own time: a producer that lost its broker
    (as after a frozen one) reports every message so, and only a new one starts from `bootstrap.servers`."""
    queue = KafkaRunQueue(UNREACHABLE, delivery_timeout_ms=200)
    monkeypatch.setattr(queue._topics, "ensure", lambda topics, timeout: None)  # as if the topics existed
    try:
        before = queue._producer
        with pytest.raises(QueueUnavailable, match="_MSG_TIMED_OUT"):
            queue.publish([make_run("q", "a", "1")], timeout=30)
        with pytest.raises(QueueUnavailable):
            queue.publish([make_run("q", "a", "2")], timeout=30)
        assert queue._producer is not before
    finally:
        queue.close()


def test_the_probe_of_an_unreachable_broker_raises_queue_unavailable(unreachable: KafkaRunQueue) -> None:
    with pytest.raises(QueueUnavailable, match="the broker did not answer"):
        unreachable.check_reachable()


@pytest.mark.timing
def test_the_probe_of_an_unreachable_broker_answers_within_the_probes_timeout(
    unreachable: KafkaRunQueue,
) -> None:
    """Its own timeout is under the readiness probe's (2 s), which then reports why rather than that the
    check did not answer."""
    started = time.monotonic()
    with pytest.raises(QueueUnavailable):
        unreachable.check_reachable()
    assert time.monotonic() - started < PROBE_TIMEOUT.total_seconds()


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


def test_a_consumer_with_no_broker_to_find_its_coordinator_reports_its_group_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read from librdkafka's own statistics: the field names and states are its, not this test's."""
    monkeypatch.setattr(kafka_consumer, "LOST_COORDINATOR_MS", 500)
    monkeypatch.setattr(kafka_consumer, "STATISTICS_INTERVAL_MS", 100)
    consumer, watch = kafka_consumer.lane_opener({"bootstrap.servers": UNREACHABLE, "client.id": "t"}, "g")(
        "normal", ["t"]
    )
    try:
        deadline = time.monotonic() + 30
        while not watch.lost and time.monotonic() < deadline:
            consumer.consume(num_messages=1, timeout=0.1)  # serves the statistics callback
        assert watch.lost
    finally:
        consumer.close()


def test_a_group_that_found_its_coordinator_is_not_lost() -> None:
    watch = kafka_consumer.CoordinatorWatch()
    for state, age, assigned, lost in [
        ("query-coord", kafka_consumer.LOST_COORDINATOR_MS, 0, True),
        ("wait-coord", kafka_consumer.LOST_COORDINATOR_MS * 2, 0, True),
        ("query-coord", kafka_consumer.LOST_COORDINATOR_MS - 1, 0, False),  # not for long enough
        ("up", kafka_consumer.LOST_COORDINATOR_MS * 2, 0, False),
        ("query-coord", kafka_consumer.LOST_COORDINATOR_MS * 2, 3, False),  # still holds partitions
    ]:
        watch(json.dumps({"cgrp": {"state": state, "stateage": age, "assignment_size": assigned}}))
        assert watch.lost is lost, (state, age, assigned)
    watch(json.dumps({"name": "a producer has no group"}))
    assert not watch.lost
    watch(json.dumps({"cgrp": {"state": "up", "stateage": 5, "assignment_size": 0}}))
    assert watch.coordinated
    watch(json.dumps({"cgrp": {"state": "query-coord", "stateage": 5, "assignment_size": 0}}))
    assert not watch.coordinated


def test_the_statistics_give_each_topics_consumer_lag_over_the_assigned_partitions() -> None:
    watch = kafka_consumer.CoordinatorWatch()
    partitions = {
        "0": {"consumer_lag": 7},
        "1": {"consumer_lag": -1},  # not assigned here
        "2": {"consumer_lag": 5},
        "-1": {"consumer_lag": 100},  # librdkafka's internal unassigned partition
    }
    watch(json.dumps({"topics": {"jobmesh.lag-test": {"partitions": partitions}}}))
    assert REGISTRY.get_sample_value("jobmesh_kafka_consumer_lag", {"topic": "jobmesh.lag-test"}) == 12
    watch(json.dumps({"topics": {"jobmesh.lag-test": {"partitions": {"0": {"consumer_lag": 0}}}}}))
    assert REGISTRY.get_sample_value("jobmesh_kafka_consumer_lag", {"topic": "jobmesh.lag-test"}) == 0


class _LaneStandIn:
    """A lane consumer that never has anything, and records being closed."""

    def __init__(self) -> None:
        self.closed = False

    def consume(self, num_messages: int, timeout: float) -> list[object]:
        return []

    def subscribe(self, topics: list[str], on_assign: object) -> None:
        pass

    def unsubscribe(self) -> None:
        pass

    def assignment(self) -> list[object]:
        return []

    def close(self) -> None:
        self.closed = True


def test_a_lane_whose_group_is_lost_is_opened_again_unless_it_stepped_aside() -> None:
    opened: dict[str, list[tuple[_LaneStandIn, kafka_consumer.CoordinatorWatch]]] = {}

    def open_lane(lane: str, topics: Sequence[str]) -> tuple[_LaneStandIn, kafka_consumer.CoordinatorWatch]:
        opened.setdefault(lane, []).append((_LaneStandIn(), kafka_consumer.CoordinatorWatch()))
        return opened[lane][-1]

    runs = kafka_consumer.KafkaRunConsumer(open_lane, {lane: [lane] for lane in LANES}, lambda _: None)  # type: ignore[arg-type]
    ((lost, lost_watch),) = opened["normal"]
    lost_watch.lost_ms = kafka_consumer.LOST_COORDINATOR_MS
    opened["high"][0][1].coordinated = True  # another lane's group has its coordinator: Kafka answers

    runs.step_aside()
    assert runs.poll(1, 0.05) == []
    assert len(opened["normal"]) == 1  # out of the group on purpose: nothing to find

    runs.rejoin()
    assert runs.poll(1, 0.05) == []
    assert lost.closed
    assert len(opened["normal"]) == 2
    assert not opened["normal"][1][0].closed
    assert all(len(opened[lane]) == 1 and not opened[lane][0][0].closed for lane in ("high", "low"))
    assert runs.poll(1, 0.05) == []
    assert len(opened["normal"]) == 2  # the new one is not lost


def test_lanes_all_lost_at_once_are_left_alone_until_long_after() -> None:
    """Every lane without its coordinator: Kafka is away, and a consumer opened again would join its group
    seconds later when the broker returns."""
    opened: dict[str, list[tuple[_LaneStandIn, kafka_consumer.CoordinatorWatch]]] = {}

    def open_lane(lane: str, topics: Sequence[str]) -> tuple[_LaneStandIn, kafka_consumer.CoordinatorWatch]:
        opened.setdefault(lane, []).append((_LaneStandIn(), kafka_consumer.CoordinatorWatch()))
        return opened[lane][-1]

    runs = kafka_consumer.KafkaRunConsumer(open_lane, {lane: [lane] for lane in LANES}, lambda _: None)  # type: ignore[arg-type]
    for lane in LANES:
        watch = opened[lane][0][1]
        watch(json.dumps({"cgrp": {"state": "query-coord", "stateage": 30000, "assignment_size": 0}}))
        assert watch.lost
    assert runs.poll(1, 0.05) == []
    assert all(len(opened[lane]) == 1 for lane in LANES)
    opened["low"][0][1](
        json.dumps({"cgrp": {"state": "query-coord", "stateage": kafka_consumer.ALL_LANES_LOST_MS}})
    )
    assert runs.poll(1, 0.05) == []
    assert [len(opened[lane]) for lane in LANES] == [1, 1, 2]  # lost for that long: opened again anyway
    runs.close()


def test_a_members_id_is_its_name_when_kafka_takes_it_else_a_digest_that_keeps_names_apart() -> None:
    assert kafka_consumer.instance_id("host-12-ab", "normal") == "host-12-ab.normal"
    odd = [kafka_consumer.instance_id(name, "normal") for name in ("a:b", "a/b", "a b", "é", "x" * 300)]
    assert len(set(odd)) == len(odd)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]{1,249}", member) for member in odd)  # what a JoinGroup accepts
    assert kafka_consumer.instance_id("a:b", "normal") != kafka_consumer.instance_id("a:b", "high")


def _normal_lane(consumer: RunConsumer) -> Consumer:
    assert isinstance(consumer, kafka_consumer.KafkaRunConsumer)
    lane: Consumer = consumer._consumers["normal"]
    return lane


def _serve_until(consumers: Sequence[RunConsumer], done: Callable[[], bool], timeout: float) -> float:
    """Polls the consumers until `done`; returns how long it took (the caller asserts on it)."""
    began = time.monotonic()
    while not done() and time.monotonic() - began < timeout:
        for consumer in consumers:
            consumer.poll(1, 0.05)
    return time.monotonic() - began


@pytest.mark.kafka
@pytest.mark.timing
@pytest.mark.parametrize("leave", ["step_aside", "close"])
def test_a_named_member_that_leaves_hands_its_partitions_over_at_once(
    kafka_queue: KafkaRunQueue, leave: str
) -> None:
    """A named (static) member's close() alone does not leave its group: its partitions would wait for the
    group's session timeout, 6 s, before the other member took them."""
    name = unique_name()
    leaving = kafka_queue.consumer(f"{name}-g", [name], member=f"{name}-a")
    staying = kafka_queue.consumer(f"{name}-g", [name], member=f"{name}-b")
    try:
        both = [leaving, staying]
        split = _serve_until(both, lambda: all(_normal_lane(c).assignment() for c in both), 60)
        assert all(_normal_lane(c).assignment() for c in both), f"no split in {split:.1f} s"
        partitions = len(_normal_lane(leaving).assignment()) + len(_normal_lane(staying).assignment())
        getattr(leaving, leave)()
        took = _serve_until([staying], lambda: len(_normal_lane(staying).assignment()) == partitions, 10)
        assert len(_normal_lane(staying).assignment()) == partitions
        assert took < AT_ONCE
    finally:
        leaving.close()
        staying.close()


def test_librdkafkas_failed_connections_go_to_debug(
    unreachable: KafkaRunQueue, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="jobmesh.adapters.queue.kafka")
    for _ in range(2):
        with pytest.raises(QueueUnavailable):
            unreachable.publish([make_run("q", "a", "1")], timeout=1.0)

    failed_connections = [record for record in caplog.records if record.getMessage().startswith("FAIL ")]
    assert len(failed_connections) > 2  # librdkafka reported each try
    assert {record.levelno for record in failed_connections} == {logging.DEBUG}
    said = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(said) <= 1, said  # the error callback's, once an outage, when it came in time
