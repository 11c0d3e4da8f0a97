"""A run's lateness counts from when it could first have started (its schedule time, or its create time when
that came later), a run made after its time is marked, and a run made ahead of its time, not yet due, is
upcoming (left out of lists unless asked for)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from jobmesh.core.filters import is_upcoming
from jobmesh.core.lateness import run_lateness
from jobmesh.core.records import RunState
from tests.adapters.store.builders import BASE, run

SECOND = timedelta(seconds=1)


def test_a_run_made_ahead_is_late_from_its_schedule_time() -> None:
    made = run(
        "j", "r", schedule_time=BASE, create_time=BASE - 60 * SECOND, first_start_time=BASE + 2 * SECOND
    )
    assert not made.created_after_schedule_time
    assert run_lateness(made) == 2 * SECOND


def test_a_run_made_after_its_time_is_marked_and_late_from_its_create_time() -> None:
    made = run(
        "j", "r", schedule_time=BASE - 3600 * SECOND, create_time=BASE, first_start_time=BASE + 3 * SECOND
    )
    assert made.created_after_schedule_time
    assert run_lateness(made) == 3 * SECOND


def test_a_run_made_on_its_time_is_not_marked_and_one_not_started_has_no_lateness() -> None:
    made = run("j", "r", schedule_time=BASE, create_time=BASE)
    assert not made.created_after_schedule_time
    assert run_lateness(made) is None


@pytest.mark.parametrize(
    ("state", "offset", "upcoming"),
    [
        (RunState.SCHEDULED, 1, True),
        (RunState.SCHEDULED, 0, False),  # due now
        (RunState.SCHEDULED, -1, False),  # a retry waiting out its backoff keeps its passed schedule time
        (RunState.QUEUED, 1, False),  # handed to the queue ahead of its time: it is on its way
        (RunState.CANCELLED, 1, False),  # withdrawn: history
    ],
)
def test_only_a_scheduled_run_not_yet_due_is_upcoming(state: RunState, offset: int, upcoming: bool) -> None:
    made = replace(run("j", "r", schedule_time=BASE + offset * SECOND), state=state)
    assert is_upcoming(made, BASE) is upcoming
