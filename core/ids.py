"""Identifiers: lower-case, safe in resource names and URLs.

A run id starts with its run's schedule time in milliseconds, so a run can be found from its name alone within
one partition of the time-partitioned `job_runs` (see `schedule_window`), and ids sort by schedule time.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford's base32, lower case
_VALUES = {char: index for index, char in enumerate(_ALPHABET)}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TIME_CHARS = 10  # 50 bits of milliseconds: until the year 37648
_RANDOM_CHARS = 16  # 80 bits


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_run_id(schedule_time: datetime) -> str:
    """A ULID-style id: the schedule time's milliseconds, then 80 random bits."""
    millis = max(0, (schedule_time - _EPOCH) // timedelta(milliseconds=1))
    return _base32(millis, _TIME_CHARS) + _base32(secrets.randbits(80), _RANDOM_CHARS)


def run_id_floor(moment: datetime) -> str:
    """The smallest id of a run scheduled at `moment` or later: a day's run ids lie between two floors."""
    millis = max(0, (moment - _EPOCH) // timedelta(milliseconds=1))
    return _base32(millis, _TIME_CHARS) + _ALPHABET[0] * _RANDOM_CHARS


def schedule_window(run_id: str) -> tuple[datetime, datetime] | None:
    """The millisecond the run's schedule time lies in, [start, end); None for an id not made here."""
    if len(run_id) != _TIME_CHARS + _RANDOM_CHARS:
        return None
    millis = 0
    for char in run_id[:_TIME_CHARS]:
        value = _VALUES.get(char)
        if value is None:
            return None
        millis = millis * 32 + value
    try:
        start = _EPOCH + timedelta(milliseconds=millis)
    except OverflowError:
        return None
    return start, start + timedelta(milliseconds=1)


def new_job_id() -> str:
    """`job-` and a run-style id of the current time (a job id must start with a letter; time-ordered ids
    keep the primary key's inserts at the end of its index)."""
    return "job-" + new_run_id(datetime.now(UTC))
