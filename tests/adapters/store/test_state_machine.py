"""Store contract, the state machine (core.states): every pair of states, for runs and for jobs, driven
through the store's port on each backend. An allowed transition ends in its target state. A refused one
raises TransitionRefused (a job's change, an attempt's end decided against the table), or, for what an
executor or the pipeline reports about a run it no longer holds, is refused by the port's fenced answer
(a claim not granted, a dispatch or an end not applied, a cancel that changes nothing): either way the row
is left as it was.

Each event is driven by the port operation that makes it: a dispatch by `mark_queued`, a claim by `claim`, a
cancel by `cancel_run`, a withdrawal by the job's pause, an attempt's end by `finish_attempts`. A pair no
transition allows is driven by every event that leads to its target from somewhere."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.error_types import ErrorType
from jobmesh.core.errors import JobmeshError, NotFound
from jobmesh.core.ports.pipeline_store import ClaimStatus
from jobmesh.core.records import JOB_PAUSED, RunRecord
from jobmesh.core.states import (
    HELD_RUN_STATES,
    JOB_TRANSITIONS,
    RUN_TRANSITIONS,
    JobState,
    RunEvent,
    RunState,
    TransitionRefused,
    job_transition,
)
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import at
from tests.adapters.store.pipeline_support import add_job, add_run, ref

EXECUTOR = "ex1"
NOW = at(100)

# An attempt's end by event: how the attempt ended, what its run becomes, and who reports it (None: the
# sweeper).
_ENDS: dict[RunEvent, tuple[RunState, RunState, str | None, str | None]] = {
    RunEvent.SUCCEED: (RunState.SUCCEEDED, RunState.SUCCEEDED, EXECUTOR, None),
    RunEvent.FAIL: (RunState.FAILED, RunState.FAILED, EXECUTOR, ErrorType.EXECUTOR_ERROR),
    RunEvent.EXPIRE: (RunState.FAILED, RunState.FAILED, None, ErrorType.HEARTBEAT_LOST),
    RunEvent.TIME_OUT: (RunState.TIMED_OUT, RunState.TIMED_OUT, EXECUTOR, ErrorType.TIMEOUT),
    RunEvent.STOP: (RunState.CANCELLED, RunState.CANCELLED, EXECUTOR, ErrorType.CANCELLED),
    RunEvent.RETRY: (RunState.FAILED, RunState.SCHEDULED, EXECUTOR, ErrorType.EXECUTOR_ERROR),
    RunEvent.DEAD_LETTER: (RunState.FAILED, RunState.DEAD_LETTERED, EXECUTOR, ErrorType.EXECUTOR_ERROR),
}


def _run_in(store: SqlStore, state: RunState) -> RunRecord:
    add_job(store)
    held = state in HELD_RUN_STATES
    return add_run(
        store,
        60,
        state=state,
        executor=EXECUTOR if held or state.is_terminal else None,
        start_time=at(62) if held or state.is_terminal else None,
        heartbeat_deadline=at(200) if held else None,
        end_time=at(90) if state.is_terminal else None,
    )


def _end(event: RunEvent) -> Callable[[Dispatchable], AttemptEnd]:
    attempt_state, run_state, executor, error_type = _ENDS[event]

    def decide(current: Dispatchable) -> AttemptEnd:
        return AttemptEnd(
            ref=AttemptRef.of(current.run),
            attempt_state=attempt_state,
            run_state=run_state,
            end_time=NOW,
            error_type=error_type,
            retry_due_time=at(300) if run_state is RunState.SCHEDULED else None,
            executor=executor,
        )

    return decide


def _drive(store: SqlStore, record: RunRecord, event: RunEvent) -> bool:
    """Makes `event` happen to the run through the port; whether the port says it applied it (a refusal may
    also raise)."""
    target = ref(record)
    if event is RunEvent.DISPATCH:
        return store.mark_queued([target], NOW) == [target]
    if event is RunEvent.CLAIM:
        return store.claim([target], EXECUTOR, NOW)[0].status is ClaimStatus.GRANTED
    if event is RunEvent.CANCEL:
        before = store.get_run(record.job_id, record.run_id)
        after = store.cancel_run(record.job_id, record.run_id, reason="by hand", now=NOW)
        return after.state is not before.state
    if event is RunEvent.WITHDRAW:
        job = store.get_job(record.job_id)
        paused = dataclasses.replace(job, state=JobState.PAUSED, update_time=NOW)
        store.update_job(paused, expected_version=job.version, withdraw=JOB_PAUSED)
        return store.get_run(record.job_id, record.run_id).state is not record.state
    return bool(store.finish_attempts([target], _end(event)))


def _row(backend: Backend, record: RunRecord) -> dict[str, Any]:
    rows = backend.execute("SELECT * FROM job_runs WHERE run_id = :run_id", {"run_id": record.run_id})
    assert len(rows) == 1
    return dict(rows[0]._mapping)


ALLOWED_RUNS = [(t.source, t.target, t.event) for t in RUN_TRANSITIONS]
REFUSED_RUNS = [
    (source, target, event)
    for source, target in itertools.product(RunState, RunState)
    if not any((t.source, t.target) == (source, target) for t in RUN_TRANSITIONS)
    for event in sorted({t.event for t in RUN_TRANSITIONS if t.target is target})
]


def test_the_tables_cover_every_pair() -> None:
    """Every pair of run states is in one of the two tables, each with the events that lead to its target."""
    pairs = {(s, t) for s, t, _ in ALLOWED_RUNS} | {(s, t) for s, t, _ in REFUSED_RUNS}
    assert pairs == set(itertools.product(RunState, RunState))
    assert {t.event for t in RUN_TRANSITIONS} == set(RunEvent)
    assert set(_ENDS) | {RunEvent.DISPATCH, RunEvent.CLAIM, RunEvent.CANCEL, RunEvent.WITHDRAW} == set(
        RunEvent
    )


@pytest.mark.parametrize(("source", "target", "event"), ALLOWED_RUNS, ids=str)
def test_an_allowed_run_transition_ends_in_its_target(
    store: SqlStore, source: RunState, target: RunState, event: RunEvent
) -> None:
    record = _run_in(store, source)
    assert _drive(store, record, event)
    after = store.get_run(record.job_id, record.run_id)
    assert after.state is target
    if event is RunEvent.RETRY:
        assert after.attempt == record.attempt + 1
    if event is RunEvent.CLAIM:
        assert after.executor == EXECUTOR


@pytest.mark.parametrize(("source", "target", "event"), REFUSED_RUNS, ids=str)
def test_a_refused_run_transition_leaves_the_run_as_it_was(
    backend: Backend, source: RunState, target: RunState, event: RunEvent
) -> None:
    store = backend.store
    record = _run_in(store, source)
    before = _row(backend, record)
    moves_elsewhere = any(t.source is source and t.event is event for t in RUN_TRANSITIONS)
    try:
        applied = _drive(store, record, event)
    except TransitionRefused:
        applied = False
    after = store.get_run(record.job_id, record.run_id)
    if moves_elsewhere:
        # The event takes this state elsewhere (a cancel ends a pending run rather than stopping it): that
        # transition is allowed, and is tested as such.
        assert applied
        assert after.state is not target
        assert any((t.source, t.target, t.event) == (source, after.state, event) for t in RUN_TRANSITIONS)
    else:
        assert not applied
        assert _row(backend, record) == before


UNMOVED_RUNS = [
    (source, event)
    for source, event in itertools.product(RunState, RunEvent)
    if not any((t.source, t.event) == (source, event) for t in RUN_TRANSITIONS)
]


@pytest.mark.parametrize(("source", "event"), UNMOVED_RUNS, ids=str)
def test_an_event_no_transition_allows_from_a_state_leaves_the_run_as_it_was(
    backend: Backend, source: RunState, event: RunEvent
) -> None:
    """The events' side of the product: an event that no transition takes from `source` changes nothing."""
    store = backend.store
    record = _run_in(store, source)
    before = _row(backend, record)
    try:
        applied = _drive(store, record, event)
    except TransitionRefused:
        applied = False
    assert not applied
    assert _row(backend, record) == before


@pytest.mark.parametrize("source", sorted(HELD_RUN_STATES))
def test_an_attempt_end_no_transition_allows_raises(store: SqlStore, source: RunState) -> None:
    """A decided end is written only as core allows: a run being cancelled cannot fail or be retried (core's
    lifecycle settles it CANCELLED first); the store raises rather than write it."""
    refused = [e for e in _ENDS if not any(t.source is source and t.event is e for t in RUN_TRANSITIONS)]
    assert refused or source is RunState.RUNNING
    for event in refused:
        record = _run_in(store, source)
        with pytest.raises(TransitionRefused) as raised:
            store.finish_attempts([ref(record)], _end(event))
        assert raised.value.code.name == "FAILED_PRECONDITION"
        assert store.get_run(record.job_id, record.run_id).state is source


# Jobs -------------------------------------------------------------------------------------------------------


def _job_in(store: SqlStore, state: JobState) -> str:
    return add_job(store, "beta", state=state, next_run_time=None if state is JobState.DELETED else at(60))


def _change(store: SqlStore, job_id: str, target: JobState) -> JobState:
    if target is JobState.DELETED:
        deleted, _ = store.delete_job(job_id, expected_version=None, now=NOW)
        return deleted.state
    job = store.get_job(job_id)
    changed = dataclasses.replace(job, state=target, update_time=NOW)
    return store.update_job(changed, expected_version=job.version).state


def _job_row(backend: Backend, job_id: str) -> dict[str, Any]:
    rows = backend.execute("SELECT * FROM jobs WHERE job_id = :job_id", {"job_id": job_id})
    assert len(rows) == 1
    return dict(rows[0]._mapping)


JOB_PAIRS = list(itertools.product(JobState, JobState))


@pytest.mark.parametrize(("source", "target"), JOB_PAIRS, ids=str)
def test_every_job_transition_is_made_or_refused_as_core_says(
    backend: Backend, source: JobState, target: JobState
) -> None:
    store = backend.store
    job_id = _job_in(store, source)
    allowed = any((t.source, t.target) == (source, target) for t in JOB_TRANSITIONS)
    before = _job_row(backend, job_id)
    if allowed:
        assert _change(store, job_id, target) is target
        assert store.get_job(job_id, include_deleted=True).state is target
        return
    # A deleted job is gone (NotFound); any other refusal names the transition.
    expected: type[JobmeshError] = NotFound if source is JobState.DELETED else TransitionRefused
    with pytest.raises(expected):
        _change(store, job_id, target)
    assert _job_row(backend, job_id) == before
    with pytest.raises(TransitionRefused):
        job_transition(source, target)
