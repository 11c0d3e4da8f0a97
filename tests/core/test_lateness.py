"""A run's lateness (`core.lateness.run_lateness`): from its schedule time, or from its create time when that
time had already passed."""

from __future__ import annotations

from datetime import timedelta

from jobmesh.core.lateness import run_lateness
from jobmesh.core.records import RunState
from tests.adapters.store.builders import at, run


def test_a_run_not_started_has_no_lateness() -> None:
    assert run_lateness(run("j", "r")) is None


def test_lateness_counts_from_the_schedule_time_of_a_run_made_ahead() -> None:
    started = run("j", "r", state=RunState.RUNNING, create_time=at(0), first_start_time=at(60.25))
    assert run_lateness(started) == timedelta(seconds=0.25)


def test_lateness_counts_from_the_create_time_when_the_schedule_time_had_passed() -> None:
    # A run_at an hour in the past, made at 3600 and started 40 ms later, is 40 ms late, not an hour.
    past = run(
        "j",
        "r",
        schedule_time=at(0),
        due_time=at(3600),
        create_time=at(3600),
        first_start_time=at(3600.04),
    )
    assert run_lateness(past) == timedelta(milliseconds=40)


def test_a_retry_keeps_the_first_attempts_lateness() -> None:
    retried = run("j", "r", attempt=2, due_time=at(200), start_time=at(210), first_start_time=at(61))
    assert run_lateness(retried) == timedelta(seconds=1)
