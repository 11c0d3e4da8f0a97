from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobmesh.core.attempts import AttemptRef, Dispatchable
from jobmesh.core.occurrences import jitter_of, plan_occurrences
from jobmesh.core.records import Priority, RunRecord, RunState, RunTrigger
from jobmesh.v1 import job_pb2
from jobmesh.watcher.timer import Timer

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _item(run_id: str, due: datetime) -> Dispatchable:
    run = RunRecord(
        job_id="j",
        run_id=run_id,
        schedule_time=due,
        due_time=due,
        state=RunState.SCHEDULED,
        trigger=RunTrigger.SCHEDULE,
        priority=Priority.NORMAL,
        queue="default",
        create_time=T0,
        update_time=T0,
    )
    return Dispatchable(run, job_pb2.Job())


def test_timer_releases_in_order_each_once() -> None:
    timer = Timer()
    late, early = _item("b", T0 + timedelta(seconds=2)), _item("a", T0 + timedelta(seconds=1))
    assert timer.add(AttemptRef("j", "b", 1), late, late.run.due_time)
    assert timer.add(AttemptRef("j", "a", 1), early, early.run.due_time)
    assert not timer.add(AttemptRef("j", "a", 1), early, early.run.due_time)
    assert timer.next_release() == early.run.due_time
    assert timer.pop_due(T0, 10) == []
    assert [ref.run_id for ref, _ in timer.pop_due(T0 + timedelta(seconds=5), 10)] == ["a", "b"]
    assert len(timer) == 0


def _cron(expression: str, **fields: object) -> job_pb2.Schedule.Cron:
    return job_pb2.Schedule.Cron(expression=expression, **fields)  # type: ignore[arg-type]


def test_occurrences_up_to_the_window_and_the_next_one_left() -> None:
    plan = plan_occurrences("j", _cron("*/10 * * * * *"), T0, T0 + timedelta(seconds=30), T0)
    assert plan.schedule_times == [T0 + timedelta(seconds=s) for s in (0, 10, 20, 30)]
    assert plan.next_run_time == T0 + timedelta(seconds=40)
    assert plan.skipped_since is None


def test_occurrences_older_than_the_catch_up_window_are_skipped() -> None:
    cron = _cron("* * * * *")
    cron.catchup_window.FromSeconds(120)
    now = T0 + timedelta(hours=5)
    plan = plan_occurrences("j", cron, T0, now, now)
    assert plan.skipped_since == T0
    assert plan.schedule_times == [now - timedelta(minutes=2), now - timedelta(minutes=1), now]


def test_an_end_time_completes_the_schedule() -> None:
    cron = _cron("* * * * *")
    cron.end_time.FromDatetime(T0 + timedelta(minutes=2))
    plan = plan_occurrences("j", cron, T0, T0 + timedelta(hours=1), T0)
    assert len(plan.schedule_times) == 3
    assert plan.next_run_time is None


def test_jitter_is_bounded_and_the_same_for_every_watcher() -> None:
    jitter = timedelta(seconds=30)
    delays = {jitter_of("j", T0 + timedelta(minutes=i), jitter) for i in range(50)}
    assert all(timedelta(0) <= delay < jitter for delay in delays)
    assert len(delays) > 40  # spread out
    assert jitter_of("j", T0, jitter) == jitter_of("j", T0, jitter)
