from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from jobmesh.core.log_throttle import ThrottledLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_key_is_written_once_an_interval_and_then_says_how_many_were_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    throttled = ThrottledLog(logging.getLogger("t"), timedelta(seconds=5), clock=clock)
    with caplog.at_level(logging.WARNING, "t"):
        written = [throttled.log("loop_lag", "refused: %s", "behind") for _ in range(1000)]
        assert written.count(True) == 1
        assert throttled.log("claim_lag", "refused: %s", "other key")  # a key of its own
        clock.now += 5
        assert throttled.log("loop_lag", "refused: %s", "behind")
    lines = [(record.getMessage(), vars(record)["left_out"]) for record in caplog.records]
    assert lines == [
        ("refused: behind", 0),
        ("refused: other key", 0),
        ("refused: behind (and 999 more like it since the last line)", 999),
    ]
