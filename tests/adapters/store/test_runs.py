"""Store contract, runs and logs: idempotent run creation, lookups, cancels, log lines, threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.exc import StatementError

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.audit import AuditAction, AuditEvent
from jobmesh.core.errors import NotFound
from jobmesh.core.filters import Comparison, ListQuery
from jobmesh.core.ports.store import CreateStatus
from jobmesh.core.records import AttemptRecord, RunRecord, RunState, RunTrigger
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import at, log, new_job, run


@pytest.fixture
def alpha(store: SqlStore) -> str:
    store.create_jobs([new_job("alpha")])
    return "alpha"


def test_create_run_then_get_it(store: SqlStore, alpha: str) -> None:
    record = run(alpha, "r1", trigger=RunTrigger.RUN_NOW, request_id="req", request_hash="h", replay_of="r0")
    outcome = store.create_run(record)
    assert (outcome.status, outcome.run) == (CreateStatus.CREATED, record)
    assert store.get_run(alpha, "r1") == record


def test_create_run_is_idempotent_on_the_request_id(store: SqlStore, alpha: str) -> None:
    first = run(alpha, "r1", request_id="req", request_hash="h")
    store.create_run(first)
    replayed = store.create_run(run(alpha, "r2", request_id="req", request_hash="h", schedule_time=at(900)))
    assert (replayed.status, replayed.run) == (CreateStatus.REPLAYED, first)
    reused = store.create_run(run(alpha, "r3", request_id="req", request_hash="other"))
    assert (reused.status, reused.run) == (CreateStatus.REQUEST_ID_REUSED, None)
    for missing in ("r2", "r3"):
        with pytest.raises(NotFound):
            store.get_run(alpha, missing)


def test_request_ids_are_scoped_to_their_job(store: SqlStore, alpha: str) -> None:
    store.create_jobs([new_job("beta")])
    store.create_run(run(alpha, "r1", request_id="req", request_hash="h"))
    assert (
        store.create_run(run("beta", "r1", request_id="req", request_hash="x")).status is CreateStatus.CREATED
    )


def test_a_run_id_is_unique_per_job_whatever_its_schedule_time(store: SqlStore, alpha: str) -> None:
    store.create_run(run(alpha, "r1"))
    outcome = store.create_run(run(alpha, "r1", schedule_time=at(86_400 * 3)))
    assert outcome.status is CreateStatus.ID_TAKEN
    assert store.get_run(alpha, "r1").schedule_time == at(60)


def test_create_run_of_a_missing_or_deleted_job_is_not_found(
    store: SqlStore, alpha: str, now: datetime
) -> None:
    with pytest.raises(NotFound) as raised:
        store.create_run(run("ghost", "r1"))
    assert raised.value.resource_name == "jobs/ghost"
    store.delete_job(alpha, expected_version=None, now=now)
    with pytest.raises(NotFound):
        store.create_run(run(alpha, "r1"))


def test_get_missing_run_is_not_found(store: SqlStore, alpha: str) -> None:
    with pytest.raises(NotFound) as raised:
        store.get_run(alpha, "nope")
    assert raised.value.resource_name == "jobs/alpha/runs/nope"


def test_get_run_carries_its_previous_attempts(backend: Backend, alpha: str) -> None:
    backend.store.create_run(run(alpha, "r1", attempt=3, state=RunState.RUNNING))
    backend.store.create_run(run(alpha, "r2"))
    attempts = [
        {"attempt": n, "state": "FAILED", "executor": f"ex{n}", "start": at(n), "end": at(n + 1), "code": n}
        for n in (2, 1, 3)  # attempt 3 is the current one: not a previous attempt
    ]
    backend.execute(
        "INSERT INTO run_attempts (job_id, run_id, attempt, state, executor, start_time, end_time, exit_code,"
        " error_type, error_message) VALUES ('alpha', 'r1', :attempt, :state, :executor, :start, :end, :code,"
        " 'Exit', 'boom')",
        attempts,
    )
    previous = backend.store.get_run(alpha, "r1").previous_attempts
    assert previous == tuple(
        AttemptRecord(n, RunState.FAILED, f"ex{n}", at(n), at(n + 1), n, "Exit", "boom") for n in (1, 2)
    )
    assert backend.store.get_run(alpha, "r2").previous_attempts == ()


def test_times_round_trip_timezone_aware_in_utc(store: SqlStore, alpha: str) -> None:
    pacific = timezone(timedelta(hours=-8))
    moment = datetime(2026, 12, 31, 20, 30, 15, 123456, tzinfo=pacific)
    record = run(
        alpha,
        "r1",
        schedule_time=moment,
        due_time=moment,
        start_time=moment + timedelta(microseconds=1),
        end_time=moment + timedelta(hours=5),
        state=RunState.SUCCEEDED,
        progress=0.75,
        progress_message="almost",
        exit_code=0,
    )
    store.create_run(record)
    stored = store.get_run(alpha, "r1")
    assert stored == record
    assert stored.schedule_time.tzinfo is UTC
    assert stored.schedule_time == datetime(2027, 1, 1, 4, 30, 15, 123456, tzinfo=UTC)
    assert stored.end_time is not None
    assert stored.end_time.tzinfo is UTC


def test_naive_times_are_refused(store: SqlStore, alpha: str) -> None:
    with pytest.raises(StatementError, match="naive datetime") as refused:
        store.create_run(run(alpha, "r1", schedule_time=datetime(2026, 1, 1)))
    assert isinstance(refused.value.orig, ValueError)  # the store's own check, not a failed comparison


def test_runs_far_outside_the_partitions_still_insert(store: SqlStore, alpha: str) -> None:
    for run_id, year in (("ancient", 1999), ("distant", 2200)):
        moment = datetime(year, 6, 1, tzinfo=UTC)
        store.create_run(run(alpha, run_id, schedule_time=moment, due_time=moment))
        assert store.get_run(alpha, run_id).schedule_time == moment


# Cancel ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", [RunState.SCHEDULED, RunState.QUEUED])
def test_cancel_a_pending_run(store: SqlStore, alpha: str, now: datetime, state: RunState) -> None:
    store.create_run(run(alpha, "r1", state=state))
    cancelled = store.cancel_run(alpha, "r1", reason="not needed", now=now)
    assert cancelled.state is RunState.CANCELLED
    assert (cancelled.end_time, cancelled.update_time) == (now, now)
    assert (cancelled.error_type, cancelled.error_message) == ("Cancelled", "not needed")
    assert store.get_run(alpha, "r1") == cancelled


def test_cancel_a_running_run_asks_it_to_stop(store: SqlStore, alpha: str, now: datetime) -> None:
    store.create_run(run(alpha, "r1", state=RunState.RUNNING, executor="ex1", start_time=at(61)))
    cancelling = store.cancel_run(alpha, "r1", reason="stop", now=now)
    assert (cancelling.state, cancelling.end_time, cancelling.update_time) == (RunState.CANCELLING, None, now)
    assert cancelling.executor == "ex1"
    assert (cancelling.error_type, cancelling.error_message) == ("Cancelled", "stop")  # kept for the end


@pytest.mark.parametrize(
    "state", [s for s in RunState if s not in (RunState.SCHEDULED, RunState.QUEUED, RunState.RUNNING)]
)
def test_cancel_a_stopping_or_finished_run_changes_nothing(
    store: SqlStore, alpha: str, now: datetime, state: RunState
) -> None:
    record = run(alpha, "r1", state=state)
    store.create_run(record)
    assert store.cancel_run(alpha, "r1", reason="late", now=now) == record


def test_cancel_missing_run_is_not_found(store: SqlStore, alpha: str, now: datetime) -> None:
    with pytest.raises(NotFound):
        store.cancel_run(alpha, "nope", reason="x", now=now)


@pytest.mark.parametrize("state", [RunState.QUEUED, RunState.RUNNING, RunState.SUCCEEDED])
def test_a_cancel_reads_its_run_once_and_audits_what_it_read(
    store: SqlStore, alpha: str, now: datetime, state: RunState
) -> None:
    store.create_run(run(alpha, "r1", state=state, executor="ex1"))
    seen: list[RunRecord] = []
    reads: list[str] = []

    def audited(current: RunRecord) -> None:
        seen.append(current)

    def count(_c: Any, _k: Any, statement: str, *_rest: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "job_runs" in statement:
            reads.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        after = store.cancel_run(alpha, "r1", reason="stop", now=now, audit=audited)
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert len(reads) == 1, reads
    assert [s.state for s in seen] == [state]  # the run as it was, under its lock
    assert after == store.get_run(alpha, "r1")
    assert after.state is {RunState.QUEUED: RunState.CANCELLED, RunState.RUNNING: RunState.CANCELLING}.get(
        state, state
    )


def test_a_cancel_its_audit_refuses_writes_nothing(store: SqlStore, alpha: str, now: datetime) -> None:
    record = run(alpha, "r1", state=RunState.QUEUED)
    store.create_run(record)

    def refused(current: RunRecord) -> None:
        raise NotFound(f"jobs/{current.job_id}/runs/{current.run_id}")

    with pytest.raises(NotFound):
        store.cancel_run(alpha, "r1", reason="stop", now=now, audit=refused)
    assert store.get_run(alpha, "r1") == record


def test_cancel_runs_cancels_each_as_cancel_run_and_audits_those_that_changed(
    store: SqlStore, alpha: str, now: datetime
) -> None:
    store.create_run(run(alpha, "r1", state=RunState.QUEUED))
    store.create_run(run(alpha, "r2", state=RunState.RUNNING, executor="ex1", start_time=at(61)))
    finished = run(alpha, "r3", state=RunState.SUCCEEDED)
    store.create_run(finished)
    items = [(alpha, name, _cancel_event(alpha, name, now)) for name in ("r1", "nope", "r2", "r3")]
    results = store.cancel_runs(items, reason="bulk", now=now)
    assert [result.state if result else None for result in results] == [
        RunState.CANCELLED,
        None,
        RunState.CANCELLING,
        RunState.SUCCEEDED,
    ]
    assert results[3] == finished
    # The answers are built from the one locked read and the changes written: as a later read sees them.
    assert results[0] == store.get_run(alpha, "r1")
    assert results[2] == store.get_run(alpha, "r2")
    query = ListQuery((Comparison("job", "=", alpha),), (), 100, "")
    audited = {event.resource for event in store.list_audit_events(query).items}
    assert audited == {f"jobs/{alpha}/runs/r1", f"jobs/{alpha}/runs/r2"}


def test_cancel_runs_reads_its_runs_once(store: SqlStore, alpha: str, now: datetime) -> None:
    store.create_run(run(alpha, "r1", state=RunState.QUEUED))
    store.create_run(run(alpha, "r2", state=RunState.RUNNING, executor="ex1", start_time=at(61)))
    reads: list[str] = []

    def count(_c: Any, _k: Any, statement: str, *_rest: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "job_runs" in statement:
            reads.append(statement)

    items = [(alpha, name, _cancel_event(alpha, name, now)) for name in ("r1", "r2")]
    event.listen(store.engine, "before_cursor_execute", count)
    try:
        results = store.cancel_runs(items, reason="bulk", now=now)
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert len(reads) == 1, reads
    states = [result.state if result else None for result in results]
    assert states == [RunState.CANCELLED, RunState.CANCELLING]


def _cancel_event(job_id: str, run_id: str, now: datetime) -> AuditEvent:
    return AuditEvent(
        event_id=f"{run_id}-event",
        time=now,
        actor="tester",
        action=AuditAction.CANCEL,
        resource=f"jobs/{job_id}/runs/{run_id}",
        job_id=job_id,
        namespace="default",
    )


# Logs ---------------------------------------------------------------------------------------


def test_logs_are_listed_in_sequence_after_a_cursor(store: SqlStore, alpha: str) -> None:
    store.create_run(run(alpha, "r1"))
    store.append_logs([log(alpha, "r1", n) for n in (3, 1, 2, 5, 4)])
    store.append_logs([log(alpha, "r2", 1), log("beta", "r1", 1)])  # other runs
    assert [line.sequence for line in store.list_logs(alpha, "r1", after_sequence=0, limit=100)] == [
        1,
        2,
        3,
        4,
        5,
    ]
    assert [line.sequence for line in store.list_logs(alpha, "r1", after_sequence=2, limit=2)] == [3, 4]
    assert store.list_logs(alpha, "r1", after_sequence=5, limit=10) == []
    assert store.list_logs(alpha, "r1", after_sequence=0, limit=0) == []
    assert store.list_logs(alpha, "r1", after_sequence=0, limit=1) == [log(alpha, "r1", 1)]


def test_a_repeated_log_line_is_stored_once(store: SqlStore) -> None:
    store.append_logs([log("alpha", "r1", 1, "first"), log("alpha", "r1", 1, "again")])
    store.append_logs(
        [log("alpha", "r1", 1, "later"), log("alpha", "r1", 2, "two", stream="stderr", attempt=2)]
    )
    store.append_logs([])
    lines = store.list_logs("alpha", "r1", after_sequence=0, limit=10)
    assert lines == [log("alpha", "r1", 1, "first"), log("alpha", "r1", 2, "two", stream="stderr", attempt=2)]
    assert lines[0].time.tzinfo is UTC


# Threads ---------------------------------------------------------------------------------------


def test_many_threads_share_one_store(store: SqlStore) -> None:
    def work(worker: int) -> int:
        done = 0
        for i in range(15):
            job_id = f"w{worker}j{i}"
            [outcome] = store.create_jobs([new_job(job_id, first_run="r0")])
            assert outcome.status is CreateStatus.CREATED
            assert store.create_run(run(job_id, "r1", state=RunState.RUNNING)).status is CreateStatus.CREATED
            store.append_logs([log(job_id, "r1", 1)])
            store.cancel_run(job_id, "r1", reason="x", now=at(5))
            done += store.get_run(job_id, "r1").state is RunState.CANCELLING
        return done

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert sum(pool.map(work, range(8))) == 8 * 15


def test_racing_creates_of_one_run_or_one_request_make_one_row(store: SqlStore, alpha: str) -> None:
    def same_run(i: int) -> CreateStatus:
        return store.create_run(run(alpha, "r1", schedule_time=at(60 + i))).status

    def same_request(i: int) -> CreateStatus:
        return store.create_run(run(alpha, f"q{i}", request_id="req", request_hash="h")).status

    def same_job(i: int) -> CreateStatus:
        [outcome] = store.create_jobs([new_job(f"job{i}", request_id="job-req", request_hash="h")])
        return outcome.status

    with ThreadPoolExecutor(max_workers=6) as pool:
        runs = sorted(s.value for s in pool.map(same_run, range(12)))
        requests = sorted(s.value for s in pool.map(same_request, range(12)))
        jobs = sorted(s.value for s in pool.map(same_job, range(12)))
    assert runs == ["created"] + ["id_taken"] * 11
    assert requests == ["created"] + ["replayed"] * 11
    assert jobs == ["created"] + ["replayed"] * 11
