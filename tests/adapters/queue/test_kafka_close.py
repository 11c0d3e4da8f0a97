"""Closing the Kafka consumer is bounded and never runs librdkafka's consumer close: each lane leaves its
group, and its consumer is let go, destroyed when the last reference goes. A close() would revoke what is
still assigned through confluent-kafka's rebalance callback, which holds the GIL while it asks librdkafka a
question that, once the broker stopped during the close, was never answered: the whole process froze. A lane
whose leave never returns (it can wait for a rebalance no other member finishes) is left behind after
CLOSE_WAIT, and the others go."""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, cast

import pytest
from confluent_kafka import Consumer

from jobmesh.adapters.queue import kafka_consumer
from jobmesh.adapters.queue.kafka_consumer import CoordinatorWatch, KafkaRunConsumer


class _LaneConsumer:
    """A lane's consumer, assigned nothing; its leave returns at once, or only once `released` is set."""

    def __init__(self, *, stuck: bool) -> None:
        self.released = threading.Event()
        if not stuck:
            self.released.set()
        self.left = False
        self.closed = False

    def unsubscribe(self) -> None:
        self.released.wait()
        self.left = True

    def assignment(self) -> list[Any]:
        return []

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return []

    def close(self) -> None:
        self.closed = True


def _opener(lanes: dict[str, _LaneConsumer]) -> Any:
    def open_lane(lane: str, topics: Sequence[str]) -> tuple[Consumer, CoordinatorWatch]:
        return cast(Consumer, lanes[lane]), CoordinatorWatch()

    return open_lane


def test_a_lane_whose_leave_never_returns_is_left_behind_and_the_others_go(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(kafka_consumer, "CLOSE_WAIT", 0.3)
    lanes = {"high": _LaneConsumer(stuck=True), "normal": _LaneConsumer(stuck=False)}
    stuck = lanes["high"]
    closed: list[KafkaRunConsumer] = []
    consumer = KafkaRunConsumer(_opener(lanes), {"high": ["t.high"], "normal": ["t"]}, closed.append)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=kafka_consumer.__name__):
        consumer.close()
    took = time.monotonic() - began
    try:
        assert took < 5, f"close took {took:.1f} s"
        assert closed == [consumer]
        assert lanes["normal"].left
        assert not stuck.left
        assert "the high lane's Kafka consumer did not close within" in caplog.text
        assert "normal lane" not in caplog.text
    finally:
        stuck.released.set()


def test_lanes_leave_their_group_and_are_let_go_without_a_close() -> None:
    lanes = {"normal": _LaneConsumer(stuck=False), "low": _LaneConsumer(stuck=False)}
    gone = {lane: weakref.ref(lane_consumer) for lane, lane_consumer in lanes.items()}
    consumer = KafkaRunConsumer(_opener(lanes), {"normal": ["t"], "low": ["t.low"]}, lambda _: None)
    left = dict(lanes)
    lanes.clear()
    consumer.close()
    assert all(lane_consumer.left and not lane_consumer.closed for lane_consumer in left.values())
    left.clear()
    gc.collect()
    assert all(reference() is None for reference in gone.values())  # nothing of the consumer holds them
    with pytest.raises(RuntimeError):
        consumer.commit([])
