"""core.states: the transition tables, the sets derived from them, the stop outcomes and the wire maps."""

from __future__ import annotations

import itertools

import grpc
import pytest

from jobmesh.core.states import (
    ATTEMPT_END_FROM_WIRE,
    CANCELLABLE_RUN_STATES,
    HELD_RUN_STATES,
    JOB_STATE_FROM_WIRE,
    JOB_STATE_TO_WIRE,
    JOB_TRANSITIONS,
    PENDING_RUN_STATES,
    RUN_STATE_FROM_WIRE,
    RUN_STATE_TO_WIRE,
    RUN_TRANSITIONS,
    STOP_OUTCOMES,
    TERMINAL_RUN_STATES,
    JobState,
    RunEvent,
    RunState,
    StopReason,
    TransitionRefused,
    job_may_move,
    job_sources,
    job_transition,
    run_sources,
    run_state_after,
    run_transition,
)
from jobmesh.v1 import job_pb2, run_pb2


def test_the_sets_are_the_ones_the_mesh_has_always_meant() -> None:
    assert {RunState.SCHEDULED, RunState.QUEUED} == PENDING_RUN_STATES
    assert {RunState.RUNNING, RunState.CANCELLING} == HELD_RUN_STATES
    assert {
        RunState.SUCCEEDED,
        RunState.FAILED,
        RunState.CANCELLED,
        RunState.TIMED_OUT,
        RunState.DEAD_LETTERED,
    } == TERMINAL_RUN_STATES
    assert PENDING_RUN_STATES | {RunState.RUNNING} == CANCELLABLE_RUN_STATES
    assert set(RunState) == PENDING_RUN_STATES | HELD_RUN_STATES | TERMINAL_RUN_STATES


def test_every_state_is_reached_and_every_event_used() -> None:
    made = {RunState.SCHEDULED}  # a run is made SCHEDULED
    assert made | {t.target for t in RUN_TRANSITIONS} == set(RunState)
    assert {t.event for t in RUN_TRANSITIONS} == set(RunEvent)
    assert {t.target for t in JOB_TRANSITIONS} == set(JobState)
    assert not [t for t in JOB_TRANSITIONS if t.source is JobState.DELETED]
    assert len(set(RUN_TRANSITIONS)) == len(RUN_TRANSITIONS)


def test_an_event_takes_a_state_to_one_place_at_most() -> None:
    """`run_state_after` is a function of (state, event): the store writes one thing per event."""
    pairs = [(t.source, t.event) for t in RUN_TRANSITIONS]
    assert len(pairs) == len(set(pairs))


@pytest.mark.parametrize(("source", "target"), list(itertools.product(RunState, RunState)), ids=str)
def test_a_run_transition_is_found_or_refused(source: RunState, target: RunState) -> None:
    allowed = [t for t in RUN_TRANSITIONS if (t.source, t.target) == (source, target)]
    if allowed:
        assert run_transition(source, target) in allowed
        for transition in allowed:
            assert run_state_after(source, transition.event) is target
            assert source in run_sources(transition.event)
            assert source in run_sources(transition.event, target=target)
        return
    with pytest.raises(TransitionRefused) as refused:
        run_transition(source, target)
    assert refused.value.code is grpc.StatusCode.FAILED_PRECONDITION
    assert refused.value.reason == "TRANSITION_REFUSED"
    assert f"{source.value} cannot go to {target.value}" in str(refused.value)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(JobState, JobState)), ids=str)
def test_a_job_transition_is_found_or_refused(source: JobState, target: JobState) -> None:
    allowed = any((t.source, t.target) == (source, target) for t in JOB_TRANSITIONS)
    assert job_may_move(source, target) is allowed
    assert (source in job_sources(target)) is allowed
    if allowed:
        assert job_transition(source, target).target is target
    else:
        with pytest.raises(TransitionRefused):
            job_transition(source, target)


def test_a_terminal_run_goes_nowhere() -> None:
    for state, event in itertools.product(TERMINAL_RUN_STATES, RunEvent):
        with pytest.raises(TransitionRefused):
            run_state_after(state, event)


def test_an_events_target_may_be_asked_for() -> None:
    assert run_sources(RunEvent.CANCEL, target=RunState.CANCELLING) == {RunState.RUNNING}
    assert run_sources(RunEvent.CANCEL, target=RunState.CANCELLED) == PENDING_RUN_STATES
    assert run_state_after(RunState.CANCELLING, RunEvent.STOP) is RunState.CANCELLED


def test_every_stop_but_a_fence_has_its_outcome() -> None:
    assert set(STOP_OUTCOMES) == set(StopReason) - {StopReason.FENCE}
    assert STOP_OUTCOMES[StopReason.CANCEL][0] is RunState.CANCELLED
    assert STOP_OUTCOMES[StopReason.TIMEOUT][0] is RunState.TIMED_OUT


def test_the_wire_maps_cover_every_state_both_ways() -> None:
    assert set(RUN_STATE_TO_WIRE.values()) == set(run_pb2.RunState.values()) - {0}
    assert set(JOB_STATE_TO_WIRE.values()) == set(job_pb2.JobState.values()) - {0}
    for state in RunState:
        assert RUN_STATE_FROM_WIRE[RUN_STATE_TO_WIRE[state]] is state
        assert run_pb2.RunState.Name(RUN_STATE_TO_WIRE[state]) == f"RUN_STATE_{state.value}"
    for job_state in JobState:
        assert JOB_STATE_FROM_WIRE[JOB_STATE_TO_WIRE[job_state]] is job_state
    assert set(ATTEMPT_END_FROM_WIRE.values()) == {
        RunState.SUCCEEDED,
        RunState.FAILED,
        RunState.TIMED_OUT,
        RunState.CANCELLED,
    }
    assert run_pb2.RUN_STATE_DEAD_LETTERED not in ATTEMPT_END_FROM_WIRE  # only the server dead-letters
