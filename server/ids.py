"""Identifiers: lower-case, time-ordered, safe in resource names and URLs."""

from __future__ import annotations

import secrets
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford's base32, lower case


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_run_id() -> str:
    """A ULID-style id: 48 bits of milliseconds then 80 random bits, so ids sort by creation time."""
    return _base32(time.time_ns() // 1_000_000, 10) + _base32(secrets.randbits(80), 16)


def new_job_id() -> str:
    """`job-` and a run-style id: starts with a letter as job ids must."""
    return "job-" + new_run_id()
