"""Store contract, jobs: idempotent batch creation, reads, versioned updates and deletes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.errors import EtagMismatch, NotFound
from jobmesh.core.ports.store import CreateStatus, NewJob
from jobmesh.core.records import JobState, Priority, RunState, ScheduleKind
from tests.adapters.store.builders import BASE, at, job, new_job, run


def test_create_then_get_round_trips_every_field(store: SqlStore) -> None:
    paris = timezone(timedelta(hours=1))
    record = job(
        "alpha",
        spec=bytes(range(256)),
        display_name="Nightly report ✓",
        labels={"team": "billing", "env.kind/x": "prod"},
        schedule_kind=ScheduleKind.CRON,
        priority=Priority.HIGH,
        queue="reports",
        next_run_time=datetime(2027, 1, 2, 3, 4, 5, 678901, tzinfo=paris),
        create_time=BASE.astimezone(paris),
        request_id="req-1",
        request_hash="h1",
    )
    [outcome] = store.create_jobs([NewJob(record)])
    assert outcome.status is CreateStatus.CREATED
    assert outcome.job == record
    stored = store.get_job("alpha")
    assert stored == record
    for moment in (stored.next_run_time, stored.create_time, stored.update_time):
        assert moment is not None
        assert moment.tzinfo is UTC
    assert stored.next_run_time == datetime(2027, 1, 2, 2, 4, 5, 678901, tzinfo=UTC)


def test_create_with_first_run_stores_both(store: SqlStore) -> None:
    [outcome] = store.create_jobs([new_job("alpha", first_run="r1", schedule_kind=ScheduleKind.IMMEDIATE)])
    assert outcome.status is CreateStatus.CREATED
    assert outcome.first_run == run("alpha", "r1")
    assert store.get_run("alpha", "r1") == run("alpha", "r1")


def test_create_jobs_with_no_items(store: SqlStore) -> None:
    assert store.create_jobs([]) == []


def test_same_request_again_replays_the_earlier_job_and_first_run(store: SqlStore) -> None:
    store.create_jobs([new_job("alpha", first_run="r1", request_id="req", request_hash="h")])
    retry = new_job("beta", first_run="r2", request_id="req", request_hash="h", display_name="other")
    [outcome] = store.create_jobs([retry])
    assert outcome.status is CreateStatus.REPLAYED
    assert outcome.job == job("alpha", request_id="req", request_hash="h")
    assert outcome.first_run == run("alpha", "r1")
    with pytest.raises(NotFound):
        store.get_job("beta")


def test_replay_of_a_job_created_without_a_run_has_no_first_run(store: SqlStore) -> None:
    store.create_jobs([new_job("alpha", request_id="req", request_hash="h")])
    [outcome] = store.create_jobs([new_job("alpha", request_id="req", request_hash="h")])
    assert outcome.status is CreateStatus.REPLAYED
    assert outcome.job is not None
    assert outcome.first_run is None


def test_request_id_with_another_hash_is_reused(store: SqlStore) -> None:
    store.create_jobs([new_job("alpha", request_id="req", request_hash="h")])
    [outcome] = store.create_jobs([new_job("beta", request_id="req", request_hash="other")])
    assert outcome.status is CreateStatus.REQUEST_ID_REUSED
    assert outcome.job is None
    with pytest.raises(NotFound):
        store.get_job("beta")


def test_taken_job_id(store: SqlStore) -> None:
    store.create_jobs([new_job("alpha")])
    [outcome] = store.create_jobs(
        [new_job("alpha", request_id="fresh", request_hash="h", display_name="new")]
    )
    assert outcome.status is CreateStatus.ID_TAKEN
    assert store.get_job("alpha").display_name == "display alpha"


def test_duplicates_within_one_batch_are_classified_against_the_first(store: SqlStore) -> None:
    outcomes = store.create_jobs(
        [
            new_job("alpha", first_run="r1", request_id="req", request_hash="h"),
            new_job("alpha", request_id="other-req", request_hash="h"),  # same id, another request
            new_job("beta", request_id="req", request_hash="h"),  # the same request, retried in-batch
            new_job("gamma", request_id="req", request_hash="x"),  # the request id, another body
            new_job("delta"),
        ]
    )
    statuses = [outcome.status for outcome in outcomes]
    assert statuses == [
        CreateStatus.CREATED,
        CreateStatus.ID_TAKEN,
        CreateStatus.REPLAYED,
        CreateStatus.REQUEST_ID_REUSED,
        CreateStatus.CREATED,
    ]
    assert outcomes[2].job is not None
    assert outcomes[2].job.job_id == "alpha"
    assert outcomes[2].first_run == run("alpha", "r1")


def test_a_batch_of_1000_mixing_every_outcome(store: SqlStore) -> None:
    earlier = [
        new_job(f"old{i:03d}", first_run=f"run{i}", request_id=f"old-req-{i}", request_hash="h")
        for i in range(150)
    ]
    assert {o.status for o in store.create_jobs(earlier)} == {CreateStatus.CREATED}
    batch: list[NewJob] = []
    expected: list[CreateStatus] = []
    for i in range(1000):
        kind = i % 10
        if kind == 0 and i < 500:  # a retried create
            batch.append(new_job(f"new{i:04d}", request_id=f"old-req-{i // 10}", request_hash="h"))
            expected.append(CreateStatus.REPLAYED)
        elif kind == 1 and i < 500:  # the request id with another body
            batch.append(new_job(f"new{i:04d}", request_id=f"old-req-{50 + i // 10}", request_hash="z"))
            expected.append(CreateStatus.REQUEST_ID_REUSED)
        elif kind == 2 and i < 500:  # someone else's id
            batch.append(new_job(f"old{100 + i // 10:03d}", request_id=f"new-req-{i}", request_hash="h"))
            expected.append(CreateStatus.ID_TAKEN)
        else:
            first_run = f"first{i}" if i % 2 else None
            batch.append(
                new_job(f"new{i:04d}", first_run=first_run, request_id=f"new-req-{i}", request_hash="h")
            )
            expected.append(CreateStatus.CREATED)
    outcomes = store.create_jobs(batch)
    assert [o.status for o in outcomes] == expected
    for item, outcome in zip(batch, outcomes, strict=True):
        if outcome.status is CreateStatus.REPLAYED:
            assert outcome.job is not None
            assert outcome.first_run is not None
            assert outcome.job.request_id == item.job.request_id
            assert outcome.first_run.job_id == outcome.job.job_id
        if outcome.status is CreateStatus.CREATED:
            assert outcome.first_run == item.first_run
    assert store.get_job("new0999").job_id == "new0999"
    assert store.get_run("new0999", "first999").run_id == "first999"


# Get and update ---------------------------------------------------------------------------------------


def test_get_missing_job_is_not_found(store: SqlStore) -> None:
    with pytest.raises(NotFound) as raised:
        store.get_job("nope")
    assert raised.value.resource_name == "jobs/nope"


def test_update_replaces_writable_columns_and_bumps_the_version(store: SqlStore) -> None:
    store.create_jobs([new_job("alpha", request_id="req", request_hash="h")])
    changed = replace(
        job("alpha"),
        spec=b"new spec",
        display_name="renamed",
        labels={"team": "ops"},
        schedule_kind=ScheduleKind.CRON,
        priority=Priority.LOW,
        queue="slow",
        state=JobState.PAUSED,
        next_run_time=None,
        update_time=at(300),
        create_time=at(999),  # not writable
        request_id=None,  # not writable
    )
    stored = store.update_job(changed, expected_version=1)
    assert stored == replace(changed, version=2, create_time=BASE, request_id="req", request_hash="h")
    assert store.get_job("alpha") == stored
    assert store.update_job(changed, expected_version=None).version == 3


def test_update_with_a_stale_version_is_an_etag_mismatch(store: SqlStore) -> None:
    store.create_jobs([new_job("alpha")])
    store.update_job(job("alpha", display_name="v2"), expected_version=1)
    with pytest.raises(EtagMismatch) as raised:
        store.update_job(job("alpha", display_name="v3"), expected_version=1)
    assert raised.value.metadata["current_etag"] == "2"
    assert store.get_job("alpha").display_name == "v2"


def test_update_missing_or_deleted_job_is_not_found(store: SqlStore, now: datetime) -> None:
    with pytest.raises(NotFound):
        store.update_job(job("ghost"), expected_version=None)
    store.create_jobs([new_job("alpha")])
    store.delete_job("alpha", expected_version=None, now=now)
    with pytest.raises(NotFound):
        store.update_job(job("alpha"), expected_version=None)


# Delete ---------------------------------------------------------------------------------------


def _job_with_runs_in_every_state(store: SqlStore, job_id: str) -> None:
    store.create_jobs([new_job(job_id)])
    for state in RunState:
        outcome = store.create_run(run(job_id, state.value.lower(), state=state))
        assert outcome.status is CreateStatus.CREATED


def test_delete_cancels_pending_runs_and_stops_running_ones(store: SqlStore, now: datetime) -> None:
    _job_with_runs_in_every_state(store, "alpha")
    _job_with_runs_in_every_state(store, "bystander")
    deleted, count = store.delete_job("alpha", expected_version=1, now=now)
    assert count == 3
    assert deleted.state is JobState.DELETED
    assert deleted.next_run_time is None
    assert deleted.version == 2
    assert deleted.update_time == now
    for state in (RunState.SCHEDULED, RunState.QUEUED):
        cancelled = store.get_run("alpha", state.value.lower())
        assert (cancelled.state, cancelled.end_time, cancelled.error_type) == (
            RunState.CANCELLED,
            now,
            "Cancelled",
        )
    stopping = store.get_run("alpha", "running")
    assert (stopping.state, stopping.error_message) == (RunState.CANCELLING, "job deleted")
    untouched = [s for s in RunState if s not in (RunState.SCHEDULED, RunState.QUEUED, RunState.RUNNING)]
    for state in untouched:
        assert store.get_run("alpha", state.value.lower()) == run("alpha", state.value.lower(), state=state)
    for state in RunState:  # another job's runs are left alone
        assert store.get_run("bystander", state.value.lower()).state is state


def test_deleted_job_is_hidden_unless_asked_for(store: SqlStore, now: datetime) -> None:
    store.create_jobs([new_job("alpha")])
    store.delete_job("alpha", expected_version=None, now=now)
    with pytest.raises(NotFound):
        store.get_job("alpha")
    assert store.get_job("alpha", include_deleted=True).state is JobState.DELETED
    with pytest.raises(NotFound):
        store.delete_job("alpha", expected_version=None, now=now)
    [outcome] = store.create_jobs([new_job("alpha")])
    assert outcome.status is CreateStatus.ID_TAKEN  # a deleted job's id stays taken (its history is kept)


def test_delete_with_a_stale_version_changes_nothing(store: SqlStore, now: datetime) -> None:
    _job_with_runs_in_every_state(store, "alpha")
    with pytest.raises(EtagMismatch):
        store.delete_job("alpha", expected_version=7, now=now)
    assert store.get_job("alpha").state is JobState.ACTIVE
    assert store.get_run("alpha", "scheduled").state is RunState.SCHEDULED


def test_delete_missing_job_is_not_found(store: SqlStore, now: datetime) -> None:
    with pytest.raises(NotFound):
        store.delete_job("ghost", expected_version=None, now=now)
