"""Backfill: a cron job's occurrences over a past range, made into runs marked `BACKFILL`, paced.

Each run keeps its occurrence as its schedule time (what it stands for: `{{ ds }}` in Airflow's words) and is
due when the pace releases it, one `pace` after the other from the call on, so that a day's occurrences do not
reach the executors at once. The occurrences are the schedule's own (core/occurrences.py), in its time zone,
without jitter: the pace spreads them. The job's overlap policy does not apply to them (the releaser applies
it to the schedule's runs only); a pause of the job cancels those still pending.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from jobmesh.core.definitions import heartbeat_timeout_of, new_run
from jobmesh.core.records import JobRecord, RunRecord, RunTrigger
from jobmesh.v1 import job_pb2

__all__ = ["DEFAULT_PACE", "MAX_BACKFILL_RUNS", "MAX_PACE", "MIN_PACE", "backfill_runs"]

MAX_BACKFILL_RUNS = 10_000
DEFAULT_PACE = timedelta(seconds=1)
MIN_PACE = timedelta(milliseconds=10)
MAX_PACE = timedelta(hours=1)


def backfill_runs(
    job: JobRecord,
    spec: job_pb2.Job,
    occurrences: Sequence[datetime],
    now: datetime,
    pace: timedelta,
    *,
    request_id: str = "",
    request_digest: str = "",
) -> list[RunRecord]:
    """One run per occurrence, the first due now. The first carries the request id: a retried call finds it
    and makes none again (the runs are stored in one transaction). `spec`: `job`'s, decoded."""
    timeout = heartbeat_timeout_of(spec)
    runs = []
    for index, occurrence in enumerate(occurrences):
        first = index == 0
        run = new_run(
            job,
            occurrence,
            now,
            RunTrigger.BACKFILL,
            request_id=request_id if first else "",
            request_digest=request_digest if first else "",
            heartbeat_timeout=timeout,
        )
        runs.append(dataclasses.replace(run, due_time=now + pace * index))
    return runs
