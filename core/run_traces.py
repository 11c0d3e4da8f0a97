"""A run's trace identity, derived from its name, so that every process finds the same one without storing
or sending it: the server that creates the run, the watcher that sends it (even after a restart, a retry or a
cron occurrence made hours later) and the log lines about it.

A run's trace id is the first 16 bytes of SHA-256 of its name; its root span (the create) has the first 8
bytes of SHA-256 of the name and "#create". A job's identity is made the same way from its name: a cron
occurrence's trace is linked to it.
"""

from __future__ import annotations

import hashlib


def trace_id_of(name: str) -> int:
    """The 128-bit trace id of a run (or job), by its resource name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:16], "big") or 1


def root_span_id_of(name: str) -> int:
    """The 64-bit id of the span that created the run (or job)."""
    return int.from_bytes(hashlib.sha256(f"{name}#create".encode()).digest()[:8], "big") or 1


def trace_id_hex(name: str) -> str:
    """The trace id as trace backends show it and log lines carry it: 32 lowercase hex digits."""
    return f"{trace_id_of(name):032x}"
