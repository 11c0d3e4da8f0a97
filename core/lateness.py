"""How late a run started, as the API shows it (`Run.lateness`)."""

from __future__ import annotations

from datetime import timedelta

from jobmesh.core.records import RunRecord, RunTrigger


def run_lateness(run: RunRecord) -> timedelta | None:
    """How late the first attempt started: from the schedule time, or from the create time when the run was
    made after its schedule time had passed (a `run_at` in the past: it could not start before it was made).
    A backfill run's schedule time is a past occurrence, so its lateness counts from its due time, when its
    pace released it; once retried, its due time is the retry's and the first attempt's lateness is no longer
    known (None). None before a start."""
    if run.first_start_time is None:
        return None
    if run.trigger is not RunTrigger.BACKFILL:
        return run.first_start_time - max(run.schedule_time, run.create_time)
    if run.attempt > 1:
        return None
    return run.first_start_time - run.due_time
