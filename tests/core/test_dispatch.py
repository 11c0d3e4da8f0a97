"""Which runs go to the queue at once, off the watcher (`core.dispatch.due_within`): a create's, a retry's."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from jobmesh.core.attempts import Dispatchable
from jobmesh.core.dispatch import due_within
from jobmesh.core.records import Priority, RunRecord, RunState, RunTrigger
from jobmesh.v1 import job_pb2

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
THRESHOLD = timedelta(minutes=1)
RUN = RunRecord("j", "r", NOW, NOW, RunState.SCHEDULED, RunTrigger.RUN_NOW, Priority.NORMAL, "q", NOW, NOW)


def due_at(offset: timedelta) -> Dispatchable:
    return Dispatchable(dataclasses.replace(RUN, run_id=str(offset), due_time=NOW + offset), job_pb2.Job())


def test_runs_due_up_to_the_threshold_go_at_once_and_later_ones_are_left_to_the_watcher() -> None:
    past, now, edge, later = (due_at(timedelta(seconds=s)) for s in (-30, 0, 60, 61))
    assert due_within([past, now, edge, later], NOW, THRESHOLD) == [past, now, edge]


def test_a_zero_threshold_sends_only_what_is_due() -> None:
    due, soon = due_at(timedelta(0)), due_at(timedelta(milliseconds=1))
    assert due_within([soon, due], NOW, timedelta(0)) == [due]
    assert due_within([], NOW, THRESHOLD) == []
