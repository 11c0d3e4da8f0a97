"""Pipeline contract, the watcher's side: due and stale runs, QUEUED marks, cron materialisation (invariant
7), overlap and lost-attempt scans."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta

import pytest

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ids import new_run_id
from jobmesh.core.ports.pipeline_store import Heartbeat
from jobmesh.core.records import JobState, RunRecord, RunState, RunTrigger, ScheduleKind
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import at, run, spec
from tests.adapters.store.pipeline_support import TIMEOUT, add_job, add_run, ref

CRON = {"schedule_kind": ScheduleKind.CRON, "next_run_time": at(60)}


@pytest.fixture(autouse=True)
def alpha(store: SqlStore) -> str:
    return add_job(store)


def test_due_runs_are_the_scheduled_ones_due_by_then_earliest_first(store: SqlStore) -> None:
    later = add_run(store, 30, due_time=at(50))  # a retry's backoff: due after its schedule time
    first = add_run(store, 40)
    add_run(store, 45, state=RunState.QUEUED)
    add_run(store, 100)  # not due yet
    due = store.due_runs(at(60), limit=10)
    assert [item.run for item in due] == [first, later]
    assert [item.job for item in due] == [spec("alpha")] * 2
    assert [item.run for item in store.due_runs(at(60), limit=1)] == [first]


def test_mark_queued_only_moves_scheduled_attempts(store: SqlStore) -> None:
    pending, running, retried = add_run(store, 1), add_run(store, 2), add_run(store, 3, attempt=2)
    store.claim([ref(running)], "ex1", at(5))
    refs = [ref(pending), ref(running), ref(retried, 1), AttemptRef("alpha", "missing", 1), ref(pending)]
    assert store.mark_queued(refs, at(6)) == [ref(pending)]
    queued = store.get_run("alpha", pending.run_id)
    assert (queued.state, queued.dispatch_time, queued.update_time) == (RunState.QUEUED, at(6), at(6))
    assert store.mark_queued([ref(pending)], at(7)) == []  # only from SCHEDULED
    assert store.get_run("alpha", retried.run_id).state is RunState.SCHEDULED
    assert store.mark_queued([], at(7)) == []


def test_stale_queued_are_the_unclaimed_ones_dispatched_before_then(store: SqlStore) -> None:
    old, older, fresh, claimed = (add_run(store, i) for i in (1, 2, 3, 4))
    store.mark_queued([ref(older)], at(10))
    store.mark_queued([ref(old), ref(claimed)], at(20))
    store.mark_queued([ref(fresh)], at(40))
    store.claim([ref(claimed)], "ex1", at(21))
    stale = store.stale_queued(at(30), limit=10)
    assert [item.run.run_id for item in stale] == [older.run_id, old.run_id]
    assert stale[0].run.dispatch_time == at(10)
    assert len(store.stale_queued(at(30), limit=1)) == 1


def test_cron_jobs_due_are_active_cron_jobs_due_by_then(store: SqlStore) -> None:
    add_job(store, "c-late", **{**CRON, "next_run_time": at(50)})
    add_job(store, "c-early", **{**CRON, "next_run_time": at(10)})
    add_job(store, "c-future", **{**CRON, "next_run_time": at(500)})
    add_job(store, "c-paused", **{**CRON, "state": JobState.PAUSED})
    add_job(store, "run-at", next_run_time=at(10))  # not cron
    due = store.cron_jobs_due(at(60), limit=10)
    assert [job.job_id for job in due] == ["c-early", "c-late"]
    assert [job.job_id for job in store.cron_jobs_due(at(60), limit=1)] == ["c-early"]


# Cron materialisation ------------------------------------------------------------------------------------


def _occurrences(job_id: str, *seconds: float) -> list[RunRecord]:
    return [
        run(job_id, new_run_id(at(s)), schedule_time=at(s), due_time=at(s), heartbeat_timeout=TIMEOUT)
        for s in seconds
    ]


def _stored(backend: Backend, job_id: str) -> list[tuple[str, str]]:
    rows = backend.execute(
        "SELECT run_id, trigger FROM job_runs WHERE job_id = :job ORDER BY schedule_time", {"job": job_id}
    )
    return [(row[0], row[1]) for row in rows]


def test_materialize_inserts_occurrences_once(backend: Backend) -> None:
    store = backend.store
    add_job(store, "cron", **CRON)
    runs = _occurrences("cron", 60, 120)
    made = store.materialize(
        "cron", expected_next_run_time=at(60), runs=runs, next_run_time=at(180), completed=False
    )
    assert made == runs
    assert store.get_run("cron", runs[0].run_id) == runs[0]
    job = store.get_job("cron")
    assert (job.next_run_time, job.state, job.version, job.update_time) == (
        at(180),
        JobState.ACTIVE,
        1,
        at(0),
    )
    # A second watcher with the same view: the job moved on, nothing is inserted.
    again = _occurrences("cron", 60, 120)
    assert (
        store.materialize(
            "cron", expected_next_run_time=at(60), runs=again, next_run_time=at(180), completed=False
        )
        == []
    )
    # A pass that overlaps occurrences already made inserts only the new ones.
    overlap = _occurrences("cron", 120, 180, 180)
    made = store.materialize(
        "cron", expected_next_run_time=at(180), runs=overlap, next_run_time=None, completed=True
    )
    assert made == [overlap[1]]
    assert [run_id for run_id, _ in _stored(backend, "cron")] == [
        runs[0].run_id,
        runs[1].run_id,
        overlap[1].run_id,
    ]
    job = store.get_job("cron")
    assert (job.next_run_time, job.state, job.version) == (None, JobState.COMPLETED, 1)


def test_an_occurrence_beside_a_manual_run_at_the_same_time_is_still_made(backend: Backend) -> None:
    store = backend.store
    add_job(store, "cron", **CRON)
    add_run(store, 60, job_id="cron", trigger=RunTrigger.RUN_NOW)
    [occurrence] = _occurrences("cron", 60)
    assert store.materialize(
        "cron", expected_next_run_time=at(60), runs=[occurrence], next_run_time=at(120), completed=False
    ) == [occurrence]


@pytest.mark.parametrize("state", [JobState.PAUSED, JobState.COMPLETED])
def test_materialize_leaves_inactive_jobs_alone(backend: Backend, state: JobState) -> None:
    store = backend.store
    add_job(store, "cron", **{**CRON, "state": state})
    made = store.materialize(
        "cron",
        expected_next_run_time=at(60),
        runs=_occurrences("cron", 60),
        next_run_time=at(120),
        completed=False,
    )
    assert made == []
    assert _stored(backend, "cron") == []
    assert store.get_job("cron").next_run_time == at(60)
    assert (
        store.materialize("ghost", expected_next_run_time=at(60), runs=[], next_run_time=None, completed=True)
        == []
    )


def test_materialize_refuses_runs_that_are_not_occurrences_of_the_job(store: SqlStore) -> None:
    add_job(store, "cron", **CRON)
    for wrong in (
        _occurrences("alpha", 60)[0],
        replace(_occurrences("cron", 60)[0], trigger=RunTrigger.RUN_NOW),
    ):
        with pytest.raises(ValueError, match="not a scheduled occurrence"):
            store.materialize(
                "cron", expected_next_run_time=at(60), runs=[wrong], next_run_time=None, completed=True
            )


def test_racing_watchers_make_each_occurrence_once(backend: Backend) -> None:
    """Invariant 7: eight watchers materialise the same window at once, each with its own run ids. Half
    leave next_run_time where it was (so the expected-time check passes for all and only the existence check
    stands between them and a duplicate)."""
    store = backend.store
    add_job(store, "cron", **CRON)
    seconds = [60 + 30 * i for i in range(10)]

    def materialize(worker: int) -> int:
        next_time = at(60) if worker % 2 else at(400)
        made = store.materialize(
            "cron",
            expected_next_run_time=at(60),
            runs=_occurrences("cron", *seconds),
            next_run_time=next_time,
            completed=False,
        )
        return len(made)

    with ThreadPoolExecutor(max_workers=8) as pool:
        made = sum(pool.map(materialize, range(8)))
    times = backend.execute("SELECT schedule_time FROM job_runs WHERE job_id = 'cron'")
    assert made == len(times) == len(seconds)


# Overlap and lost attempts -----------------------------------------------------------------------------


def test_active_runs_are_the_queued_running_and_cancelling_ones(store: SqlStore) -> None:
    add_job(store, "beta")
    queued, running, stopping = add_run(store, 1), add_run(store, 2), add_run(store, 3)
    add_run(store, 4)  # SCHEDULED: not active yet
    add_run(store, 5, state=RunState.SUCCEEDED)
    store.mark_queued([ref(queued), ref(running), ref(stopping)], at(6))
    store.claim([ref(running), ref(stopping)], "ex1", at(7))
    store.cancel_run("alpha", stopping.run_id, reason="stop", now=at(8))
    active = store.active_runs(["alpha", "beta", "ghost"])
    assert {job: [(r.run_id, r.state) for r in runs] for job, runs in active.items()} == {
        "alpha": [
            (queued.run_id, RunState.QUEUED),
            (running.run_id, RunState.RUNNING),
            (stopping.run_id, RunState.CANCELLING),
        ],
        "beta": [],
        "ghost": [],
    }


def test_lost_attempts_are_those_past_their_deadline(store: SqlStore) -> None:
    quiet, stopping, lively = add_run(store, 1), add_run(store, 2), add_run(store, 3)
    store.claim([ref(quiet), ref(stopping), ref(lively)], "ex1", at(10))  # deadline at(10) + 42 s
    store.cancel_run("alpha", stopping.run_id, reason="stop", now=at(11))
    store.heartbeat("ex1", [Heartbeat(ref(stopping), at(55)), Heartbeat(ref(lively), at(90))], at(20))
    assert store.lost_attempts(at(10) + TIMEOUT, limit=10) == []  # at the deadline: not yet
    lost = store.lost_attempts(at(60), limit=10)
    assert [(item.run.run_id, item.run.state) for item in lost] == [  # earliest deadline first
        (quiet.run_id, RunState.RUNNING),
        (stopping.run_id, RunState.CANCELLING),
    ]
    assert lost[0].job == spec("alpha")
    assert lost[0].run.heartbeat_deadline == at(10) + timedelta(seconds=42)
    assert len(store.lost_attempts(at(60), limit=1)) == 1


def test_backlog_is_the_due_and_queued_runs_per_queue_with_the_oldest_due_time(store: SqlStore) -> None:
    oldest = add_run(store, 10, due_time=at(5))  # a retry, due before its next neighbour
    add_run(store, 20)
    queued = add_run(store, 30)
    store.mark_queued([ref(queued)], at(31))
    add_run(store, 40, queue="other")
    add_run(store, 100)  # not due yet
    started = add_run(store, 1)
    store.claim([ref(started)], "ex1", at(2))  # running: not waiting
    assert oldest.due_time == at(5)
    assert store.backlog(at(60)) == {"default": (3, at(5)), "other": (1, at(40))}
    assert store.backlog(at(0)) == {"default": (1, at(30))}  # only the QUEUED one: the rest not due yet
