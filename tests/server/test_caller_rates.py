"""A token bucket per caller: a burst at once, then the rate; each caller its own bucket; the refusal says
when to come back."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobmesh.core.errors import ResourceExhausted
from jobmesh.server.admission.caller_rates import CALLER_RATE_LIMITED, CallerRates
from jobmesh.server.principals import Principal


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate_and_each_caller_apart() -> None:
    clock = Clock()
    rates = CallerRates(rate=2.0, burst=3, clock=clock)
    alice, bob = Principal("alice"), Principal("bob")
    for _ in range(3):
        rates.admit(alice)
    with pytest.raises(ResourceExhausted) as caught:
        rates.admit(alice)
    assert caught.value.reason == CALLER_RATE_LIMITED
    assert caught.value.retry_delay == timedelta(seconds=0.5)  # one request at 2 a second
    rates.admit(bob)

    clock.now += 0.5
    rates.admit(alice)
    with pytest.raises(ResourceExhausted):
        rates.admit(alice)
    clock.now += 100  # an idle caller gets its burst back, no more
    for _ in range(3):
        rates.admit(alice)
    with pytest.raises(ResourceExhausted):
        rates.admit(alice)


def test_a_rate_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="rate"):
        CallerRates(rate=0, burst=1)
