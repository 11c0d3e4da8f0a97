"""Record builders for the store suites: valid defaults, override what a test is about."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from jobmesh.core.ports.store import NewJob
from jobmesh.core.records import (
    JobRecord,
    JobState,
    LogRecord,
    Priority,
    RunRecord,
    RunState,
    RunTrigger,
    ScheduleKind,
)
from jobmesh.v1 import job_pb2

# Noon today (UTC): runs land in real daily partitions on PostgreSQL, times stay deterministic within a test.
BASE = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)


def at(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


def spec(job_id: str) -> job_pb2.Job:
    """The definition `job` stores for `job_id` (one of its own, to tell whose a read brought)."""
    return job_pb2.Job(display_name=f"spec-{job_id}")


def job(job_id: str, **overrides: Any) -> JobRecord:
    record = JobRecord(
        job_id=job_id,
        spec=spec(job_id).SerializeToString(),
        display_name=f"display {job_id}",
        labels={"team": "core"},
        schedule_kind=ScheduleKind.RUN_AT,
        priority=Priority.NORMAL,
        queue="default",
        state=JobState.ACTIVE,
        next_run_time=at(60),
        create_time=BASE,
        update_time=BASE,
    )
    return replace(record, **overrides)


def run(job_id: str, run_id: str, **overrides: Any) -> RunRecord:
    record = RunRecord(
        job_id=job_id,
        run_id=run_id,
        schedule_time=at(60),
        due_time=at(60),
        state=RunState.SCHEDULED,
        trigger=RunTrigger.SCHEDULE,
        priority=Priority.NORMAL,
        queue="default",
        create_time=BASE,
        update_time=BASE,
    )
    return replace(record, **overrides)


def new_job(job_id: str, *, first_run: str | None = None, **overrides: Any) -> NewJob:
    return NewJob(job(job_id, **overrides), run(job_id, first_run) if first_run else None)


def log(job_id: str, run_id: str, sequence: int, text: str = "", **overrides: Any) -> LogRecord:
    record = LogRecord(
        job_id=job_id,
        run_id=run_id,
        sequence=sequence,
        attempt=1,
        time=at(sequence),
        stream="stdout",
        text=text or f"line {sequence}",
    )
    return replace(record, **overrides)
