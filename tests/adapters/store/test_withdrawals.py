"""Store contract, withdrawals: a pause, a delete or a schedule change ends the job's runs no executor claimed
yet, in its transaction, and a claim that raced it is refused (issue 20)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.ids import new_run_id
from jobmesh.core.ports.pipeline_store import ClaimStatus
from jobmesh.core.records import (
    JOB_PAUSED,
    SCHEDULE_CHANGED,
    JobState,
    RunRecord,
    RunState,
    RunTrigger,
    ScheduleKind,
    Withdrawal,
)
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import at, run
from tests.adapters.store.pipeline_support import add_job, add_run, ref


def _runs(store: SqlStore) -> dict[str, RunRecord]:
    """The job's runs: one of each kind a pause meets."""
    add_job(store, schedule_kind=ScheduleKind.CRON)
    return {
        "scheduled": add_run(store, 60),
        "queued": add_run(store, 61, state=RunState.QUEUED),
        "running": add_run(store, 62, state=RunState.RUNNING, executor="ex1", start_time=at(62)),
        "run_now": add_run(store, 63, trigger=RunTrigger.RUN_NOW),
    }


def _change(store: SqlStore, state: JobState, withdraw: Withdrawal | None = None) -> None:
    job = store.get_job("alpha")
    changed = dataclasses.replace(job, state=state, update_time=at(30))
    store.update_job(changed, expected_version=job.version, withdraw=withdraw)


def _state(store: SqlStore, record: RunRecord) -> tuple[RunState, str | None, str | None]:
    run = store.get_run(record.job_id, record.run_id)
    return run.state, run.error_type, run.error_message


def test_a_pause_withdraws_the_runs_not_yet_claimed_and_leaves_running_ones(store: SqlStore) -> None:
    runs = _runs(store)
    _change(store, JobState.PAUSED, withdraw=JOB_PAUSED)
    for name in ("scheduled", "queued", "run_now"):
        assert _state(store, runs[name]) == (RunState.CANCELLED, "Cancelled", "job paused"), name
        assert store.get_run("alpha", runs[name].run_id).end_time == at(30)
    assert _state(store, runs["running"]) == (RunState.RUNNING, None, None)


def test_an_update_without_a_withdrawal_leaves_the_runs(store: SqlStore) -> None:
    runs = _runs(store)
    _change(store, JobState.ACTIVE)
    assert [_state(store, run)[0] for run in runs.values()] == [
        RunState.SCHEDULED,
        RunState.QUEUED,
        RunState.RUNNING,
        RunState.SCHEDULED,
    ]


def test_a_schedule_change_withdraws_the_old_schedules_runs(store: SqlStore) -> None:
    runs = _runs(store)
    _change(store, JobState.ACTIVE, withdraw=SCHEDULE_CHANGED)
    for name in ("scheduled", "queued"):
        assert _state(store, runs[name]) == (RunState.CANCELLED, "Cancelled", "schedule changed"), name
    assert _state(store, runs["running"])[0] is RunState.RUNNING
    assert _state(store, runs["run_now"])[0] is RunState.SCHEDULED  # asked for by hand, not the schedule's


def test_a_delete_withdraws_the_runs_not_yet_claimed(store: SqlStore) -> None:
    runs = _runs(store)
    _, count = store.delete_job("alpha", expected_version=None, now=at(30))
    assert count == 4
    for name in ("scheduled", "queued", "run_now"):
        assert _state(store, runs[name]) == (RunState.CANCELLED, "Cancelled", "job deleted"), name
    assert _state(store, runs["running"]) == (RunState.CANCELLING, "Cancelled", "job deleted")


def test_a_claim_of_a_paused_jobs_run_is_refused_and_the_run_withdrawn(store: SqlStore) -> None:
    add_job(store, schedule_kind=ScheduleKind.CRON)
    _change(store, JobState.PAUSED, withdraw=JOB_PAUSED)
    # Made after the pause, as by a watcher that read the job just before it, or queued before it.
    late = add_run(store, 60)
    queued = add_run(store, 61, state=RunState.QUEUED)
    by_hand = add_run(store, 62, trigger=RunTrigger.RUN_NOW)
    backfilled = add_run(store, 63, state=RunState.QUEUED, trigger=RunTrigger.BACKFILL)
    claims = store.claim([ref(late), ref(queued), ref(by_hand), ref(backfilled)], "ex1", at(60))
    assert [claim.status for claim in claims] == [
        ClaimStatus.CANCELLED,
        ClaimStatus.CANCELLED,
        ClaimStatus.GRANTED,  # a run asked for while the job is paused is run
        ClaimStatus.CANCELLED,  # a backfill's runs are the schedule's: they stop with it
    ]
    for record in (late, queued, backfilled):
        assert _state(store, record) == (RunState.CANCELLED, "Cancelled", "job paused")
        assert store.get_run("alpha", record.run_id).start_time is None
    assert store.claim([ref(late)], "ex2", at(61))[0].status is ClaimStatus.CANCELLED


def test_a_claim_of_a_deleted_jobs_run_is_refused(backend: Backend) -> None:
    store = backend.store
    add_job(store, schedule_kind=ScheduleKind.CRON)
    queued = add_run(store, 60, state=RunState.QUEUED, trigger=RunTrigger.RUN_NOW)
    # The job deleted after the run was read for the queue, its runs not (yet) withdrawn.
    backend.execute("UPDATE jobs SET state = 'DELETED' WHERE job_id = 'alpha'")
    assert store.claim([ref(queued)], "ex1", at(60))[0].status is ClaimStatus.CANCELLED
    assert _state(store, queued) == (RunState.CANCELLED, "Cancelled", "job deleted")


def test_a_claim_of_an_active_jobs_run_is_granted(store: SqlStore) -> None:
    add_job(store, schedule_kind=ScheduleKind.CRON)
    record = add_run(store, 60)
    assert store.claim([ref(record)], "ex1", at(60))[0].status is ClaimStatus.GRANTED


def test_an_occurrence_withdrawn_by_a_pause_is_made_again_after_the_resume(store: SqlStore) -> None:
    add_job(store, schedule_kind=ScheduleKind.CRON, next_run_time=at(120))
    made = store.materialize(
        "alpha",
        expected_next_run_time=at(120),
        runs=[_occurrence(at(120))],
        next_run_time=at(180),
        completed=False,
    )
    assert len(made) == 1
    _change(store, JobState.PAUSED, withdraw=JOB_PAUSED)
    job = store.get_job("alpha")
    resumed = dataclasses.replace(job, state=JobState.ACTIVE, next_run_time=at(120), update_time=at(40))
    store.update_job(resumed, expected_version=job.version)
    again = store.materialize(
        "alpha",
        expected_next_run_time=at(120),
        runs=[_occurrence(at(120))],
        next_run_time=at(180),
        completed=False,
    )
    assert [run.schedule_time for run in again] == [at(120)]
    assert store.get_run("alpha", made[0].run_id).state is RunState.CANCELLED


def _occurrence(moment: datetime) -> RunRecord:
    return run("alpha", new_run_id(moment), schedule_time=moment, due_time=moment, create_time=at(0))
