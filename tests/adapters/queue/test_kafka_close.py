"""Closing the Kafka consumer is bounded: a lane whose librdkafka close never returns (it can wait without end
for a rebalance no other member finishes) is left behind after CLOSE_WAIT, and the others close."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

import pytest
from confluent_kafka import Consumer

from jobmesh.adapters.queue import kafka_consumer
from jobmesh.adapters.queue.kafka_consumer import CoordinatorWatch, KafkaRunConsumer


class _LaneConsumer:
    """A lane's consumer, assigned nothing; its close returns at once, or only once `released` is set."""

    def __init__(self, *, stuck: bool) -> None:
        self.released = threading.Event()
        if not stuck:
            self.released.set()
        self.closed = False

    def unsubscribe(self) -> None:
        pass

    def assignment(self) -> list[Any]:
        return []

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return []

    def close(self) -> None:
        self.released.wait()
        self.closed = True


def test_a_lane_whose_close_never_returns_is_left_behind_and_the_others_close(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(kafka_consumer, "CLOSE_WAIT", 0.3)
    lanes = {"high": _LaneConsumer(stuck=True), "normal": _LaneConsumer(stuck=False)}

    def open_lane(lane: str, topics: Sequence[str]) -> tuple[Consumer, CoordinatorWatch]:
        return cast(Consumer, lanes[lane]), CoordinatorWatch()

    closed: list[KafkaRunConsumer] = []
    consumer = KafkaRunConsumer(open_lane, {"high": ["t.high"], "normal": ["t"]}, closed.append)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=kafka_consumer.__name__):
        consumer.close()
    took = time.monotonic() - began
    try:
        assert took < 5, f"close took {took:.1f} s"
        assert closed == [consumer]
        assert lanes["normal"].closed
        assert not lanes["high"].closed
        assert "the high lane's Kafka consumer did not close within" in caplog.text
        assert "normal lane" not in caplog.text
    finally:
        lanes["high"].released.set()


def test_lanes_that_close_are_waited_for() -> None:
    lanes = {"normal": _LaneConsumer(stuck=False)}

    def open_lane(lane: str, topics: Sequence[str]) -> tuple[Consumer, CoordinatorWatch]:
        return cast(Consumer, lanes[lane]), CoordinatorWatch()

    consumer = KafkaRunConsumer(open_lane, {"normal": ["t"]}, lambda _: None)
    consumer.close()
    assert lanes["normal"].closed
