"""Identifiers: lower-case, safe in resource names and URLs.

A run id starts with its run's schedule time in milliseconds, so a run can be found from its name alone within
one partition of the time-partitioned `job_runs` (see `schedule_window`), and ids sort by schedule time.
"""

from __future__ import annotations

import base64
import secrets
from datetime import UTC, datetime, timedelta

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford's base32, lower case
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TIME_CHARS = 10  # 50 bits of milliseconds: until the year 37648
_RANDOM_CHARS = 16  # 80 bits
_ID_CHARS = _TIME_CHARS + _RANDOM_CHARS
# The C codecs do the work (ids are made and read for every run): RFC 4648's base32 alphabet maps digit for
# digit onto Crockford's, and Crockford's onto the digits `int(text, 32)` reads.
_FROM_RFC4648 = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", _ALPHABET)
_TO_INT_DIGITS = str.maketrans(_ALPHABET, "0123456789abcdefghijklmnopqrstuv")
_DIGITS = frozenset(_ALPHABET)


def _base32(value: int, length: int) -> str:
    """`value` in `length` Crockford digits (most significant first), for `length` up to 32."""
    encoded = base64.b32encode(value.to_bytes(20, "big")).decode()  # 160 bits: 32 digits, no padding
    return encoded[-length:].translate(_FROM_RFC4648)


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
    if len(run_id) != _ID_CHARS:
        return None
    prefix = run_id[:_TIME_CHARS]
    if not _DIGITS.issuperset(prefix):
        return None
    millis = int(prefix.translate(_TO_INT_DIGITS), 32)
    try:
        start = _EPOCH + timedelta(milliseconds=millis)
    except OverflowError:
        return None
    return start, start + timedelta(milliseconds=1)


def new_job_id() -> str:
    """`job-` and a run-style id of the current time (a job id must start with a letter; time-ordered ids
    keep the primary key's inserts at the end of its index)."""
    return "job-" + new_run_id(datetime.now(UTC))
