"""The sweeper on SQLite and the in-process bus: an attempt past its deadline is lost only when nothing says
its executor is alive; a session a server renewed, or a heartbeat left on the bus, within the heartbeat
timeout keeps it, and moves its deadline on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.attempts import AttemptRef, Dispatchable
from jobmesh.core.definitions import SchedulingPolicy, build_job
from jobmesh.core.dispatch import Dispatcher
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.lifecycle import AttemptLifecycle
from jobmesh.core.ports.pipeline_store import Heartbeat
from jobmesh.core.ports.signals import SignalBus
from jobmesh.core.ports.store import NewJob
from jobmesh.core.records import RunState
from jobmesh.v1 import job_pb2
from jobmesh.watcher.sweeper import Sweeper

CLAIMED = datetime.now(UTC).replace(microsecond=0)
TIMEOUT = timedelta(seconds=15)  # the default heartbeat timeout
SWEPT = CLAIMED + TIMEOUT + timedelta(seconds=5)  # past the claim's deadline
EXECUTOR = "executor-1"


@pytest.fixture
def bus() -> Iterator[SignalBus]:
    opened = open_signals(f"memory://sweeper-{uuid.uuid4().hex[:8]}")
    yield opened
    opened.close()


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def fresh_sweeper(store: SqlStore, bus: SignalBus, clock: Clock) -> Sweeper:
    queue = MemoryRunQueue()
    return Sweeper(
        store=store,
        lifecycle=AttemptLifecycle(store, queue, clock),
        signals=bus,
        dispatcher=Dispatcher(store, queue, clock),
        clock=clock,
    )


def sweeper(store: SqlStore, bus: SignalBus) -> Sweeper:
    """A sweeper at SWEPT that has found the database reachable since the claim (it swept then)."""
    clock = Clock(CLAIMED)
    swept = fresh_sweeper(store, bus, clock)
    assert swept.sweep_lost() == []
    clock.now = SWEPT
    return swept


def running(store: SqlStore, job_id: str) -> AttemptRef:
    spec = job_pb2.Job(target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])))
    spec.schedule.immediate.SetInParent()
    spec.retry_policy.max_attempts = 2
    record, first = build_job(job_id, spec, CLAIMED, SchedulingPolicy())
    assert first is not None
    store.create_jobs([NewJob(record, first)])
    ref = AttemptRef.of(first)
    [claim] = store.claim([ref], EXECUTOR, CLAIMED)
    assert claim.run is not None
    return ref


def state_of(store: SqlStore, ref: AttemptRef) -> tuple[RunState, int]:
    run = store.get_run(ref.job_id, ref.run_id)
    return run.state, run.attempt


QUIET = timedelta(seconds=9)  # a session another server renewed within this stays that server's


def test_an_attempt_whose_session_was_renewed_within_its_timeout_is_kept_and_its_deadline_moves(
    store: SqlStore, bus: SignalBus
) -> None:
    ref = running(store, "renewed")
    store.renew_sessions([EXECUTOR], "server-a", SWEPT - timedelta(seconds=10), stale_after=QUIET)
    assert sweeper(store, bus).sweep_lost() == []
    assert state_of(store, ref) == (RunState.RUNNING, 1)
    assert store.lost_attempts(SWEPT, limit=10) == []  # out of the sweep until the renewal's timeout passes
    assert [AttemptRef.of(item.run) for item in store.lost_attempts(SWEPT + TIMEOUT, limit=10)] == [ref]


def test_an_attempt_whose_session_lapsed_is_lost_and_retried(store: SqlStore, bus: SignalBus) -> None:
    ref = running(store, "lapsed")
    store.renew_sessions([EXECUTOR], "server-a", SWEPT - TIMEOUT - timedelta(seconds=1), stale_after=QUIET)
    [retry] = sweeper(store, bus).sweep_lost()
    assert retry.run.attempt == 2
    run = store.get_run(ref.job_id, ref.run_id)
    assert (run.state, run.previous_attempts[0].error_type) == (RunState.SCHEDULED, "HeartbeatLost")


def test_a_heartbeat_on_the_bus_keeps_an_attempt_whose_session_lapsed(
    store: SqlStore, bus: SignalBus
) -> None:
    ref = running(store, "on-the-bus")
    store.renew_sessions([EXECUTOR], "server-a", CLAIMED, stale_after=QUIET)
    bus.put_heartbeats(EXECUTOR, [ref], SWEPT - timedelta(seconds=2), ttl=timedelta(minutes=1))
    assert sweeper(store, bus).sweep_lost() == []
    assert state_of(store, ref) == (RunState.RUNNING, 1)


def test_another_executors_session_keeps_nothing(store: SqlStore, bus: SignalBus) -> None:
    ref = running(store, "others")
    store.renew_sessions(["executor-2"], "server-a", SWEPT, stale_after=QUIET)
    assert len(sweeper(store, bus).sweep_lost()) == 1
    assert state_of(store, ref) == (RunState.SCHEDULED, 2)


def test_a_heartbeat_stored_after_the_scan_keeps_the_attempt(
    store: SqlStore, bus: SignalBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end is decided on the run under the write's lock: a heartbeat that a server stored between the
    sweep's scan and its write moved the deadline on, and the attempt stays its executor's."""
    ref = running(store, "beaten-late")
    scan = store.lost_attempts

    def scanned_then_beaten(now: datetime, *, limit: int) -> list[Dispatchable]:
        found = scan(now, limit=limit)
        store.heartbeat(EXECUTOR, [Heartbeat(ref, SWEPT + TIMEOUT)], SWEPT)
        return found

    monkeypatch.setattr(store, "lost_attempts", scanned_then_beaten)
    assert sweeper(store, bus).sweep_lost() == []
    assert state_of(store, ref) == (RunState.RUNNING, 1)
    assert store.get_run(ref.job_id, ref.run_id).heartbeat_deadline == SWEPT + TIMEOUT


class Outage:
    """A store whose scans for lost attempts fail while `down`."""

    def __init__(self, store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.down = False
        scan = store.lost_attempts

        def lost_attempts(now: datetime, *, limit: int) -> list[Dispatchable]:
            if self.down:
                raise StoreUnavailable("the database is away")
            return scan(now, limit=limit)

        monkeypatch.setattr(store, "lost_attempts", lost_attempts)


def test_after_an_outage_an_attempt_is_judged_only_once_the_database_was_reachable_for_its_timeout(
    store: SqlStore, bus: SignalBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Heartbeats and renewals sent while the database was away were never written: the attempt looks
    silent, and is not ended lost until its executor has had a whole timeout to be heard again."""
    ref = running(store, "outage")
    clock = Clock(CLAIMED)
    swept = fresh_sweeper(store, bus, clock)
    assert swept.sweep_lost() == []
    outage = Outage(store, monkeypatch)
    outage.down = True
    clock.now = CLAIMED + timedelta(seconds=10)
    with pytest.raises(StoreUnavailable):
        swept.sweep_lost()
    outage.down = False
    back = SWEPT
    clock.now = back
    assert swept.sweep_lost() == []
    clock.now = back + TIMEOUT - timedelta(seconds=1)
    assert swept.sweep_lost() == []
    assert state_of(store, ref) == (RunState.RUNNING, 1)
    clock.now = back + TIMEOUT
    assert len(swept.sweep_lost()) == 1  # silent for a whole timeout with the database there: lost
    assert state_of(store, ref) == (RunState.SCHEDULED, 2)


def test_a_watcher_that_just_took_the_lead_judges_nothing_for_a_timeout(
    store: SqlStore, bus: SignalBus
) -> None:
    """It did not sweep while it stood by: whether the database was reachable meanwhile is unknown."""
    ref = running(store, "new-leader")
    swept = sweeper(store, bus)  # would end the attempt now
    swept.forget_reachability()  # ... but it just took the lead
    assert swept.sweep_lost() == []
    assert state_of(store, ref) == (RunState.RUNNING, 1)
    later = Clock(SWEPT + TIMEOUT)
    swept_later = fresh_sweeper(store, bus, later)
    assert swept_later.sweep_lost() == []  # a fresh one likewise
    later.now += TIMEOUT
    assert len(swept_later.sweep_lost()) == 1


def test_a_lost_attempt_ends_when_its_executor_was_last_heard(store: SqlStore, bus: SignalBus) -> None:
    ref = running(store, "last-heard")
    heard = CLAIMED + timedelta(seconds=3)
    store.heartbeat(EXECUTOR, [Heartbeat(ref, heard + TIMEOUT)], heard)
    clock = Clock(CLAIMED)
    swept = fresh_sweeper(store, bus, clock)
    assert swept.sweep_lost() == []
    clock.now = heard + TIMEOUT + timedelta(seconds=7)
    assert len(swept.sweep_lost()) == 1
    [lost] = store.get_run(ref.job_id, ref.run_id).previous_attempts
    assert lost.end_time == heard, lost
