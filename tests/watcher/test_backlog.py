"""The releaser's backlog: runs released long after their time (the queue was away) go out behind those that
can still start on time, a share at a release, oldest first, each once."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from jobmesh.adapters.signals.memory import MemorySignalBus
from jobmesh.core.attempts import AttemptRef, Dispatchable
from jobmesh.core.cancels import CancelRouter
from jobmesh.core.definitions import SchedulingPolicy, build_job, new_run
from jobmesh.core.records import RunTrigger
from jobmesh.core.shards import ALL_SHARDS, shard_of
from jobmesh.v1 import job_pb2
from jobmesh.watcher import releaser as releaser_module
from jobmesh.watcher.releaser import Releaser
from jobmesh.watcher.timer import Timer

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


class _Dispatched:
    """Stands in for the dispatcher: records each batch it is handed, and fails while `down`."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.down = False

    def dispatch(self, items: Sequence[Dispatchable]) -> bool:
        if self.down:
            return False
        self.batches.append([item.run.run_id for item in items])
        return True


def _runs(count: int, due: datetime, tag: str) -> list[Dispatchable]:
    spec = job_pb2.Job(target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])))
    items = []
    for number in range(count):
        job, _ = build_job(
            f"{tag}-{number:03}", spec, NOW, SchedulingPolicy(immediate_threshold=timedelta(0))
        )
        run = new_run(job, due + timedelta(milliseconds=number), NOW, RunTrigger.RUN_NOW)
        items.append(Dispatchable(run, job.spec))
    return items


def _releaser(dispatched: _Dispatched, batch: int) -> Releaser:
    return Releaser(
        None,  # type: ignore[arg-type]  # no cron run here: the store is never asked
        dispatched,  # type: ignore[arg-type]
        CancelRouter(MemorySignalBus()),
        Timer(),
        lambda: NOW,
        lead=timedelta(0),
        batch=batch,
        held=lambda: ALL_SHARDS,
    )


def _ids(items: Sequence[Dispatchable]) -> list[str]:
    return [item.run.run_id for item in items]


def test_runs_due_lately_go_out_before_a_backlog_of_long_late_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(releaser_module, "BACKLOG_BATCH", 4)
    dispatched = _Dispatched()
    releaser = _releaser(dispatched, batch=3)
    backlog = _runs(10, NOW - timedelta(seconds=30), "old")
    fresh = _runs(3, NOW - timedelta(seconds=1), "new")
    releaser.hold(backlog + fresh)

    while releaser.release_due():
        pass

    first = dispatched.batches[0]
    assert first[:3] == _ids(fresh)  # not behind the 10 due 30 s ago
    assert first[3:] == _ids(backlog)[:4]
    sent = [run_id for batch in dispatched.batches for run_id in batch]
    assert sent == _ids(fresh) + _ids(backlog)  # the backlog oldest first, every run once


def test_a_backlog_that_cannot_go_out_is_kept_and_sent_when_the_queue_is_back() -> None:
    dispatched = _Dispatched()
    releaser = _releaser(dispatched, batch=100)
    backlog = _runs(5, NOW - timedelta(seconds=30), "old")
    releaser.hold(backlog)
    dispatched.down = True
    assert releaser.release_due() == 0
    assert dispatched.batches == []

    dispatched.down = False
    later = NOW + releaser_module.RETRY_DELAY
    releaser._clock = lambda: later  # the retry's instant has come
    while releaser.release_due():
        pass
    assert sorted(run_id for batch in dispatched.batches for run_id in batch) == sorted(_ids(backlog))


def test_a_lost_shards_backlog_is_let_go() -> None:
    dispatched = _Dispatched()
    releaser = _releaser(dispatched, batch=100)
    dispatched.down = True
    backlog = _runs(20, NOW - timedelta(seconds=30), "old")
    releaser.hold(backlog)
    releaser._take_due(NOW)  # into the backlog
    lost = {shard_of(backlog[0].run.job_id)}
    kept = [item for item in backlog if shard_of(item.run.job_id) not in lost]

    assert releaser.drop(lost) == len(backlog) - len(kept)
    dispatched.down = False
    while releaser.release_due():
        pass
    assert sorted(run_id for batch in dispatched.batches for run_id in batch) == sorted(_ids(kept))


def test_a_run_due_within_the_bound_is_not_backlog() -> None:
    dispatched = _Dispatched()
    releaser = _releaser(dispatched, batch=100)
    [edge] = _runs(1, NOW - releaser_module.BACKLOG_AFTER, "edge")
    releaser.hold([edge])
    assert _ids(releaser._take_due(NOW)) == [edge.run.run_id]
    assert AttemptRef.of(edge.run) not in releaser._backlog
