"""The one backoff: a delay that grows by a factor per try, up to a cap, stretched by up to JITTER so that
many waiting together (runs failing at once, executors or subscribers reconnecting after an outage) spread
out. Never shorter than the plain delay: a retry policy's delays are its minimums."""

from __future__ import annotations

import random
from datetime import timedelta

__all__ = ["JITTER", "backoff_delay"]

JITTER = 0.1  # each delay is stretched by up to 10%
_MAX_EXPONENT = 64  # far beyond any cap: keeps the float finite


def backoff_delay(
    first: timedelta,
    tries: int,
    *,
    cap: timedelta,
    multiplier: float = 2.0,
    rng: random.Random | None = None,
) -> timedelta:
    """The wait after `tries` failed tries (from 1): first * multiplier^(tries - 1), capped, jittered."""
    exponent = min(max(tries - 1, 0), _MAX_EXPONENT)
    delay = min(first.total_seconds() * multiplier**exponent, cap.total_seconds())
    return timedelta(seconds=delay * (1 + JITTER * (rng or random).random()))
