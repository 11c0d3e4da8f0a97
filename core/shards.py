"""Shards of the job space: watchers share the scheduling work by leasing shards, each a fixed slice of the
jobs (and of their runs) by a stable hash of the job id.

The count and the hash are part of the stored data (every job and run carries its shard, written at insert,
and the schema checks its range): changing either is a migration that rewrites every row, never a setting,
so no two watchers can disagree on which shard a job is in.
"""

from __future__ import annotations

import hashlib

SHARDS = 64
ALL_SHARDS = frozenset(range(SHARDS))


def shard_of(job_id: str) -> int:
    """A job's shard: the same in every process and release (Python's `hash` is salted per process)."""
    digest = hashlib.blake2b(job_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % SHARDS
