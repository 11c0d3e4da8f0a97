"""Pipeline contract, the executors' side: claims, heartbeats, progress, attempt ends, and their fences."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.lateness import run_lateness
from jobmesh.core.ports.pipeline_store import ClaimStatus, Heartbeat, ProgressReport
from jobmesh.core.records import AttemptRecord, RunState
from jobmesh.core.states import TransitionRefused
from tests.adapters.store.builders import at, run, spec
from tests.adapters.store.pipeline_support import TIMEOUT, add_job, add_run, end, finish, ref


@pytest.fixture(autouse=True)
def alpha(store: SqlStore) -> str:
    return add_job(store)


# Claims ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", [RunState.SCHEDULED, RunState.QUEUED])
def test_a_claim_starts_a_pending_attempt_once(store: SqlStore, state: RunState) -> None:
    record = add_run(store, state=state)
    [claim] = store.claim([ref(record)], "ex1", at(61))
    assert claim.status is ClaimStatus.GRANTED
    expected = replace(
        record,
        state=RunState.RUNNING,
        executor="ex1",
        start_time=at(61),
        last_heartbeat_time=at(61),
        first_start_time=at(61),
        heartbeat_deadline=at(61) + TIMEOUT,
        update_time=at(61),
    )
    assert claim.run == expected
    assert store.get_run(record.job_id, record.run_id) == expected
    again = store.claim([ref(record)], "ex1", at(62)) + store.claim([ref(record)], "ex2", at(62))
    assert [c.status for c in again] == [ClaimStatus.DUPLICATE] * 2
    assert [c.run for c in again] == [None, None]
    assert store.get_run(record.job_id, record.run_id) == expected


def test_claims_are_classified_one_per_ref_in_order(store: SqlStore) -> None:
    pending = add_run(store, 1)
    cancelled = add_run(store, 2, state=RunState.CANCELLED)  # before it started
    stopping = add_run(store, 3, state=RunState.CANCELLING, executor="ex0", start_time=at(3))
    ended = add_run(store, 4, state=RunState.SUCCEEDED, executor="ex0", start_time=at(4), end_time=at(5))
    stopped = add_run(store, 5, state=RunState.CANCELLED, executor="ex0", start_time=at(5), end_time=at(6))
    retried = add_run(store, 6, attempt=2)
    plain = run("alpha", "plain-id")  # an id without a schedule time: found in every partition
    store.create_run(plain)
    refs = [
        ref(pending),
        ref(cancelled),
        ref(stopping),
        ref(ended),
        ref(stopped),
        ref(retried, 1),
        ref(retried, 3),
        AttemptRef("alpha", "missing", 1),
        AttemptRef("ghost", pending.run_id, 1),
        ref(pending),  # the same ref twice in one batch: one grant
        ref(plain),
    ]
    claims = store.claim(refs, "ex1", at(10))
    assert [c.ref for c in claims] == refs
    assert [c.status for c in claims] == [
        ClaimStatus.GRANTED,
        ClaimStatus.CANCELLED,
        ClaimStatus.DUPLICATE,
        ClaimStatus.DUPLICATE,
        ClaimStatus.DUPLICATE,
        ClaimStatus.STALE,
        ClaimStatus.STALE,
        ClaimStatus.NOT_FOUND,
        ClaimStatus.NOT_FOUND,
        ClaimStatus.DUPLICATE,
        ClaimStatus.GRANTED,
    ]
    assert store.get_run("alpha", "plain-id").state is RunState.RUNNING
    assert store.get_run("alpha", stopping.run_id) == stopping  # nothing else changed
    assert store.claim([], "ex1", at(10)) == []


def test_a_later_attempt_keeps_the_first_start_time(store: SqlStore) -> None:
    record = add_run(store, attempt=2, first_start_time=at(1))
    [claim] = store.claim([ref(record)], "ex1", at(70))
    assert claim.run is not None
    assert (claim.run.first_start_time, claim.run.start_time) == (at(1), at(70))


def test_racing_claims_grant_each_attempt_once(store: SqlStore) -> None:
    """Invariant 5: duplicate deliveries to eight executors at once start each attempt once. Each thread
    sends the refs in its own order (lock-order deadlocks would surface as errors)."""
    records = [add_run(store, i) for i in range(40)]

    def claim_all(worker: int) -> list[AttemptRef]:
        refs = [ref(r) for r in records]
        random.Random(worker).shuffle(refs)
        granted = []
        for start in range(0, len(refs), 10):
            claims = store.claim(refs[start : start + 10], f"ex{worker}", at(100))
            granted += [c.ref for c in claims if c.status is ClaimStatus.GRANTED]
        return granted

    with ThreadPoolExecutor(max_workers=8) as pool:
        grants = [g for granted in pool.map(claim_all, range(8)) for g in granted]
    assert sorted(grants) == sorted(ref(r) for r in records)
    assert {store.get_run("alpha", r.run_id).state for r in records} == {RunState.RUNNING}


# Heartbeats and progress ---------------------------------------------------------------------------------


def test_heartbeats_extend_held_attempts_and_report_the_fenced(store: SqlStore) -> None:
    held, other, pending = add_run(store, 1), add_run(store, 2), add_run(store, 3)
    store.claim([ref(held)], "ex1", at(10))
    store.claim([ref(other)], "ex2", at(10))
    beats = [Heartbeat(ref(r), at(99)) for r in (held, other, pending)]
    stale = Heartbeat(AttemptRef("alpha", held.run_id, 2), at(99))
    assert store.heartbeat("ex1", [*beats, stale], at(20)) == [ref(other), ref(pending), stale.ref]
    after = store.get_run("alpha", held.run_id)
    assert (after.last_heartbeat_time, after.heartbeat_deadline, after.update_time) == (
        at(20),
        at(99),
        at(10),
    )
    assert store.get_run("alpha", other.run_id).heartbeat_deadline == at(10) + TIMEOUT
    assert store.heartbeat("ex1", [], at(20)) == []


def test_a_cancelling_attempt_is_still_held(store: SqlStore) -> None:
    record = add_run(store)
    store.claim([ref(record)], "ex1", at(10))
    store.cancel_run("alpha", record.run_id, reason="stop", now=at(11))
    assert store.heartbeat("ex1", [Heartbeat(ref(record), at(50))], at(12)) == []
    assert store.get_run("alpha", record.run_id).heartbeat_deadline == at(50)


def test_a_retry_fences_the_old_attempts_reports(store: SqlStore) -> None:
    record = add_run(store)
    store.claim([ref(record)], "ex1", at(10))
    retry = end(ref(record), RunState.FAILED, run_state=RunState.SCHEDULED, retry_due_time=at(30))
    assert finish(store, [retry]) == [ref(record)]
    # The lost executor's late reports about attempt 1 change nothing.
    assert store.heartbeat("ex1", [Heartbeat(ref(record), at(99))], at(20)) == [ref(record)]
    store.report_progress([ProgressReport(ref(record), "ex1", 0.5, "late")], at(20))
    assert finish(store, [end(ref(record), executor="ex1")]) == []
    current = store.get_run("alpha", record.run_id)
    assert (current.attempt, current.state, current.progress, current.last_heartbeat_time) == (
        2,
        RunState.SCHEDULED,
        0.0,
        None,
    )


def test_progress_applies_to_the_holder_only(store: SqlStore) -> None:
    record = add_run(store)
    store.claim([ref(record)], "ex1", at(10))
    store.report_progress(
        [
            ProgressReport(ref(record), "ex1", 0.25, "first"),
            ProgressReport(ref(record), "ex1", 0.5, "half"),  # the last report of a ref counts
            ProgressReport(ref(record), "ex2", 0.9, "not mine"),
        ],
        at(15),
    )
    current = store.get_run("alpha", record.run_id)
    assert (current.progress, current.progress_message, current.update_time) == (0.5, "half", at(15))


# Attempt ends ------------------------------------------------------------------------------------------


def test_a_failed_attempt_is_retried_with_its_history_kept(store: SqlStore) -> None:
    record = add_run(store)
    store.claim([ref(record)], "ex1", at(10))
    store.heartbeat("ex1", [Heartbeat(ref(record), at(40))], at(20))
    store.report_progress([ProgressReport(ref(record), "ex1", 0.5, "half")], at(21))
    failure = end(
        ref(record),
        RunState.FAILED,
        run_state=RunState.SCHEDULED,
        end_time=at(25),
        start_time=at(11),
        exit_code=3,
        error_type="Exit",
        error_message="boom",
        retry_due_time=at(90),
        executor="ex1",
    )
    assert finish(store, [failure]) == [ref(record)]
    # Claimed at 10 ahead of its due time, it started at 60: the claim's start is kept, not the reported 11.
    first = AttemptRecord(1, RunState.FAILED, "ex1", at(60), at(25), 3, "Exit", "boom")
    assert store.get_run("alpha", record.run_id) == replace(
        record,
        attempt=2,
        due_time=at(90),
        first_start_time=at(60),
        update_time=at(25),
        previous_attempts=(first,),
    )
    # The second attempt succeeds: the run ends, attempt 1 stays in the history.
    [claim] = store.claim([ref(record, 2)], "ex2", at(91))
    assert claim.status is ClaimStatus.GRANTED
    assert finish(store, [end(ref(record, 2), exit_code=0, end_time=at(95), executor="ex2")]) == [
        ref(record, 2)
    ]
    final = store.get_run("alpha", record.run_id)
    assert (final.state, final.attempt, final.end_time, final.exit_code) == (RunState.SUCCEEDED, 2, at(95), 0)
    assert (final.executor, final.start_time, final.first_start_time) == ("ex2", at(91), at(60))
    assert (final.heartbeat_deadline, final.previous_attempts) == (None, (first,))


@pytest.mark.parametrize("run_state", [RunState.SUCCEEDED, RunState.SCHEDULED])
def test_an_end_never_rewrites_the_start_read_while_running(store: SqlStore, run_state: RunState) -> None:
    record = add_run(store)
    [granted] = store.claim([ref(record)], "ex1", at(61.5))
    assert granted.status is ClaimStatus.GRANTED
    running = store.get_run("alpha", record.run_id)
    assert (running.start_time, running.first_start_time) == (at(61.5), at(61.5))
    assert run_lateness(running) == at(61.5) - at(60)
    outcome = end(
        ref(record),
        RunState.SUCCEEDED if run_state is RunState.SUCCEEDED else RunState.FAILED,
        run_state=run_state,
        start_time=at(61.9),  # the executor's own clock, a little after the claim
        end_time=at(70),
        retry_due_time=at(80) if run_state is RunState.SCHEDULED else None,
        executor="ex1",
    )
    assert finish(store, [outcome]) == [ref(record)]
    ended = store.get_run("alpha", record.run_id)
    assert ended.first_start_time == running.first_start_time
    assert run_lateness(ended) == run_lateness(running)
    [history] = ended.previous_attempts if run_state is RunState.SCHEDULED else [ended]
    assert (history.start_time, history.end_time) == (running.start_time, at(70))


@pytest.mark.parametrize(
    ("attempt_state", "run_state"),
    [
        (RunState.SUCCEEDED, RunState.SUCCEEDED),
        (RunState.FAILED, RunState.DEAD_LETTERED),
        (RunState.TIMED_OUT, RunState.TIMED_OUT),
        (RunState.CANCELLED, RunState.CANCELLED),
    ],
)
def test_a_final_end_records_the_outcome(
    store: SqlStore, attempt_state: RunState, run_state: RunState
) -> None:
    record = add_run(store)
    store.claim([ref(record)], "ex1", at(10))
    outcome = end(ref(record), attempt_state, run_state=run_state, error_type="E", error_message="m")
    assert finish(store, [outcome]) == [ref(record)]
    final = store.get_run("alpha", record.run_id)
    assert (final.state, final.end_time, final.update_time, final.heartbeat_deadline) == (
        run_state,
        at(500),
        at(500),
        None,
    )
    assert (final.error_type, final.error_message, final.executor, final.start_time) == (
        "E",
        "m",
        "ex1",
        at(60),  # claimed at 10, ahead of its due time: it starts at 60, never before
    )


def test_a_succeeded_attempt_keeps_its_result_on_the_run(store: SqlStore) -> None:
    record, plain = add_run(store, 1), add_run(store, 2)
    store.claim([ref(record), ref(plain)], "ex1", at(10))
    text = '{"total":5,"note":"é"}'
    assert finish(store, [end(ref(record), result=text), end(ref(plain))]) == [ref(record), ref(plain)]
    assert store.get_run("alpha", record.run_id).result == text
    assert store.get_run("alpha", plain.run_id).result is None


def test_ends_are_fenced_by_attempt_state_and_executor(store: SqlStore) -> None:
    running, pending, other = add_run(store, 1), add_run(store, 2), add_run(store, 3)
    store.claim([ref(running), ref(other)], "ex1", at(10))
    applied = finish(
        store,
        [
            end(ref(running), executor="ex2"),  # not its holder
            end(ref(running, 2)),  # not its attempt
            end(ref(pending)),  # never started
            end(AttemptRef("alpha", "missing", 1)),
            end(ref(other)),  # the sweeper (no executor) may end any held attempt
            end(ref(other), RunState.FAILED),  # a second end of the same attempt in the batch
        ],
    )
    assert applied == [ref(other)]
    assert store.get_run("alpha", other.run_id).state is RunState.SUCCEEDED
    assert store.get_run("alpha", running.run_id).state is RunState.RUNNING
    assert finish(store, [end(ref(other), RunState.FAILED)]) == []  # already ended


def test_ends_that_make_no_sense_are_refused(store: SqlStore) -> None:
    target = ref(add_run(store))
    store.claim([target], "ex1", at(10))
    for bad in (
        end(target, RunState.RUNNING),
        end(target, RunState.FAILED, run_state=RunState.SCHEDULED),  # a retry without its due time
    ):
        with pytest.raises(ValueError, match=r"attempt|run|retry"):
            finish(store, [bad])
    # A run state no transition of core.states leads to from RUNNING.
    with pytest.raises(TransitionRefused, match="RUNNING cannot go to QUEUED"):
        finish(store, [end(target, RunState.FAILED, run_state=RunState.QUEUED)])
    with pytest.raises(ValueError, match="another attempt"):
        store.finish_attempts([target], lambda _: end(replace(target, attempt=2)))
    assert store.get_run(target.job_id, target.run_id).state is RunState.RUNNING  # nothing written


def test_an_end_is_decided_on_the_run_as_it_is_under_the_lock(store: SqlStore) -> None:
    """The run given to `decide` is the one being written: a cancel that came after the report was read is
    seen, and an end left undecided (None) leaves the attempt running."""
    cancelled, left = add_run(store, 1), add_run(store, 2)
    store.claim([ref(cancelled), ref(left)], "ex1", at(10))
    store.cancel_run("alpha", cancelled.run_id, reason="stop", now=at(11))
    seen: dict[AttemptRef, RunState] = {}

    def decide(current: Dispatchable) -> AttemptEnd | None:
        seen[AttemptRef.of(current.run)] = current.run.state
        assert current.job == spec("alpha")
        return end(ref(cancelled), RunState.CANCELLED) if current.run.run_id == cancelled.run_id else None

    written = store.finish_attempts([ref(cancelled), ref(left), ref(cancelled)], decide)
    assert [(current.run.state, item.ref) for current, item in written] == [
        (RunState.CANCELLING, ref(cancelled))
    ]
    assert seen == {ref(cancelled): RunState.CANCELLING, ref(left): RunState.RUNNING}  # each decided once
    assert store.get_run("alpha", cancelled.run_id).state is RunState.CANCELLED
    assert store.get_run("alpha", left.run_id).state is RunState.RUNNING


def test_attempts_finds_current_attempts_with_their_specs(store: SqlStore) -> None:
    first, second = add_run(store, 1), add_run(store, 2, attempt=2)
    found = store.attempts([ref(first), ref(second), ref(second, 1), AttemptRef("alpha", "missing", 1)])
    assert set(found) == {ref(first), ref(second)}
    assert found[ref(second)].run == second
    assert found[ref(first)].job == spec("alpha")
    assert store.attempts([]) == {}
