from __future__ import annotations

import random
from datetime import timedelta

import pytest

from jobmesh.core.backoff import JITTER, backoff_delay

FIRST, CAP = timedelta(milliseconds=100), timedelta(seconds=2)


@pytest.mark.parametrize(("tries", "plain"), [(1, 0.1), (2, 0.2), (3, 0.4), (5, 1.6), (6, 2.0), (1000, 2.0)])
def test_the_delay_doubles_from_the_first_up_to_the_cap_and_is_never_shorter(
    tries: int, plain: float
) -> None:
    rng = random.Random(tries)
    for _ in range(50):
        delay = backoff_delay(FIRST, tries, cap=CAP, rng=rng).total_seconds()
        assert plain <= delay <= plain * (1 + JITTER) + 1e-9


def test_the_jitter_spreads_delays_of_one_try() -> None:
    rng = random.Random(3)
    delays = {backoff_delay(FIRST, 4, cap=CAP, rng=rng) for _ in range(20)}
    assert len(delays) > 10


def test_a_multiplier_and_a_try_before_the_first() -> None:
    assert backoff_delay(FIRST, 3, cap=CAP, multiplier=3.0, rng=random.Random(1)) >= timedelta(seconds=0.9)
    assert backoff_delay(FIRST, 0, cap=CAP, rng=random.Random(1)) <= FIRST * (1 + JITTER)
