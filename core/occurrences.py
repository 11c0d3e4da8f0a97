"""Occurrences of a cron schedule: its first and next ones, and those to make into runs between a job's next
run time and the end of the watcher's window.

Occurrences missed by more than the catch-up window (the watcher or the job was down, or paused) are skipped.
Jitter delays an occurrence by a fraction of the job's jitter that is derived from the job and the occurrence,
so that every watcher computes the same schedule time for it (one run per occurrence, invariant 7).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobmesh.core.schedules import CronError, next_occurrence, parse_cron
from jobmesh.core.timestamps import to_datetime, to_timedelta
from jobmesh.v1 import job_pb2

DEFAULT_CATCHUP_WINDOW = timedelta(minutes=5)
MAX_PER_PASS = 2000
MAX_SKIPPED_COUNTED = 10_000  # a schedule missed for longer is counted as this many skipped, not walked on


@dataclass(frozen=True, slots=True)
class Plan:
    """Schedule times of the runs to make, the next occurrence left (None: the schedule has ended), and the
    first occurrence skipped as too old to catch up (None when nothing was skipped) and how many were skipped
    (counted up to MAX_SKIPPED_COUNTED)."""

    schedule_times: list[datetime] = field(default_factory=list)
    next_run_time: datetime | None = None
    skipped_since: datetime | None = None
    skipped: int = 0


def first_cron_occurrence(cron: job_pb2.Schedule.Cron, now: datetime) -> datetime | None:
    after = now
    if cron.HasField("start_time"):
        start = to_datetime(cron.start_time)
        if start > now:
            after = start - timedelta(microseconds=1)  # an occurrence exactly at start_time counts
    return next_cron_occurrence(cron, after)


def next_cron_occurrence(cron: job_pb2.Schedule.Cron, after: datetime) -> datetime | None:
    occurrence = next_occurrence(parse_cron(cron.expression, cron.time_zone), after)
    if cron.HasField("end_time") and occurrence > to_datetime(cron.end_time):
        return None
    return occurrence


def fire_times(schedule: job_pb2.Schedule, after: datetime, count: int) -> list[datetime]:
    """The schedule's next `count` fire times after `after`, earliest first, without a job's jitter: what
    `PreviewSchedule` answers and what a job's `next_run_time` shows. An immediate schedule has none; a
    `run_at` has its time while it is ahead."""
    kind = schedule.WhichOneof("kind")
    if kind == "run_at":
        run_at = to_datetime(schedule.run_at)
        return [run_at] if run_at > after else []
    if kind != "cron":
        return []
    times: list[datetime] = []
    try:
        occurrence = first_cron_occurrence(schedule.cron, after) if count > 0 else None
        while occurrence is not None:
            times.append(occurrence)
            if len(times) == count:
                break  # each occurrence costs a croniter: none past those asked for
            occurrence = next_cron_occurrence(schedule.cron, occurrence)
    except (OverflowError, CronError):  # nothing after year 9999, or nothing at all: the times end here
        pass
    return times


def next_fire_time(schedule: job_pb2.Schedule, after: datetime) -> datetime | None:
    """The first of `fire_times`, None when the schedule fires no more."""
    times = fire_times(schedule, after, 1)
    return times[0] if times else None


def cron_occurrences_between(
    cron: job_pb2.Schedule.Cron, start: datetime, end: datetime, limit: int
) -> list[datetime]:
    """The schedule's occurrences in [start, end), within its own start and end times, without jitter; at
    most `limit` + 1 of them, so that a caller can tell a range holding more than `limit`."""
    if cron.HasField("start_time"):
        start = max(start, to_datetime(cron.start_time))
    times: list[datetime] = []
    occurrence = next_cron_occurrence(cron, start - timedelta(microseconds=1))
    while occurrence is not None and occurrence < end and len(times) <= limit:
        times.append(occurrence)
        occurrence = next_cron_occurrence(cron, occurrence)
    return times


def jitter_of(job_id: str, occurrence: datetime, jitter: timedelta) -> timedelta:
    if jitter <= timedelta(0):
        return timedelta(0)
    digest = hashlib.blake2b(f"{job_id}@{occurrence.isoformat()}".encode(), digest_size=8).digest()
    fraction = int.from_bytes(digest) / 2**64
    return timedelta(microseconds=int(jitter / timedelta(microseconds=1) * fraction))


def catchup_window_of(cron: job_pb2.Schedule.Cron) -> timedelta:
    """How late an occurrence missed while the mesh was down may still start; older ones are skipped. (Those
    due while the job was paused are not made: resume plans from now.)"""
    return to_timedelta(cron.catchup_window) if cron.HasField("catchup_window") else DEFAULT_CATCHUP_WINDOW


def plan_occurrences(
    job_id: str, cron: job_pb2.Schedule.Cron, next_run_time: datetime, until: datetime, now: datetime
) -> Plan:
    spec = parse_cron(cron.expression, cron.time_zone)
    end = to_datetime(cron.end_time) if cron.HasField("end_time") else None
    catchup = catchup_window_of(cron)
    jitter = to_timedelta(cron.jitter)
    times: list[datetime] = []
    skipped_since = None
    skipped = 0
    occurrence: datetime | None = next_run_time
    if next_run_time < now - catchup:
        skipped_since = next_run_time
        missed: datetime | None = next_run_time
        while missed is not None and missed < now - catchup and skipped < MAX_SKIPPED_COUNTED:
            skipped += 1
            missed = next_occurrence(spec, missed)
        occurrence = next_occurrence(spec, now - catchup - timedelta(microseconds=1))
    while occurrence is not None and occurrence <= until and len(times) < MAX_PER_PASS:
        if end is not None and occurrence > end:
            break
        times.append(occurrence + jitter_of(job_id, occurrence, jitter))
        occurrence = next_occurrence(spec, occurrence)
    if occurrence is not None and end is not None and occurrence > end:
        occurrence = None
    return Plan(times, occurrence, skipped_since, skipped)
