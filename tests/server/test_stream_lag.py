"""The lag of executors' messages: a message still waiting counts, a handled one's wait is remembered for a
window or so and then forgotten, an abandoned one is forgotten at once."""

from __future__ import annotations

import time
from datetime import timedelta

from jobmesh.server.stream_lag import StreamLag

WINDOW = timedelta(milliseconds=100)


def test_a_waiting_message_counts_until_it_starts_and_its_wait_is_then_forgotten() -> None:
    lag = StreamLag(WINDOW)
    assert lag.current() == timedelta(0)
    token = lag.arrived()
    time.sleep(0.05)
    waited = lag.current()
    assert waited >= timedelta(milliseconds=50)
    lag.answered(token)
    assert lag.current() >= waited  # remembered: the server was behind just now
    time.sleep(3 * WINDOW.total_seconds())
    assert lag.current() == timedelta(0)


def test_an_abandoned_message_is_forgotten_at_once() -> None:
    lag = StreamLag(WINDOW)
    token = lag.arrived()
    time.sleep(0.02)
    lag.abandoned(token)
    lag.answered(token)  # too late: nothing is recorded for it
    assert lag.current() == timedelta(0)


def test_the_oldest_of_several_waiting_messages_is_the_lag() -> None:
    lag = StreamLag(WINDOW)
    first = lag.arrived()
    time.sleep(0.05)
    second = lag.arrived()
    lag.answered(second)
    assert lag.current() >= timedelta(milliseconds=50)
    lag.abandoned(first)
    time.sleep(3 * WINDOW.total_seconds())
    assert lag.current() == timedelta(0)
