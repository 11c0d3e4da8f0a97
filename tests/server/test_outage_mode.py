"""Executors' reports while the database is away, and after: `AttemptReports` with an `OutageMode` on a SQLite
store that can be taken away (`DownStore`), the in-process signal bus, and a journal file.

The acceptance test (tests/acceptance/test_database_outage.py) runs the same on real processes; here each
path is taken by hand, the bad ones included."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import field_mask_pb2

from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.adapters.signals.memory import MemoryHub, MemorySignalBus
from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.definitions import SchedulingPolicy, build_job, heartbeat_timeout_of
from jobmesh.core.definitions import new_run as new_run_record
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.lifecycle import AttemptLifecycle
from jobmesh.core.ports.signals import SignalsUnavailable
from jobmesh.core.ports.store import NewJob
from jobmesh.core.records import RunState, RunTrigger
from jobmesh.core.timestamps import set_timestamp
from jobmesh.server.api.job_commands import JobCommands
from jobmesh.server.auth.authorization import Access
from jobmesh.server.executors import outage_mode
from jobmesh.server.executors.attempt_reports import AttemptReports
from jobmesh.server.executors.outage_journal import JournalEntry, OutageJournal, opened_journal
from jobmesh.server.executors.outage_mode import OutageMode, apply_journal, apply_orphans, journal_path
from jobmesh.server.principals import UNRESTRICTED, ExecutorGrant, Role
from jobmesh.v1 import job_pb2, run_pb2
from tests.adapters.signals.helpers import eventually

NOW = datetime(2030, 5, 17, 8, 30, 15, 250000, tzinfo=UTC)
E1, E2 = "executors/e1", "executors/e2"
GRANTED, DUPLICATE = pb.CLAIM_OUTCOME_GRANTED, pb.CLAIM_OUTCOME_DUPLICATE


class DownStore:
    """The store, whose every call raises StoreUnavailable while `down`."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self.down = False

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise StoreUnavailable("the database is away (the test)")
            return found(*args, **kwargs)

        return call


class DownSignals(MemorySignalBus):
    """The in-process signal bus, whose fences raise SignalsUnavailable while `down`."""

    down = False

    def fence_attempts(self, attempts: Sequence[AttemptRef], owner: str, ttl: timedelta) -> set[AttemptRef]:
        if self.down:
            raise SignalsUnavailable("redis is away (the test)")
        return super().fence_attempts(attempts, owner, ttl)

    def fence_owners(self, attempts: Sequence[AttemptRef]) -> dict[AttemptRef, str]:
        if self.down:
            raise SignalsUnavailable("redis is away (the test)")
        return super().fence_owners(attempts)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class Server:
    """One server's reports, journal and outage mode over a shared store and signal bus."""

    def __init__(self, store: DownStore, signals: DownSignals, journal: OutageJournal, clock: Clock) -> None:
        self.store, self.signals, self.journal, self.clock = store, signals, journal, clock
        self.outage = OutageMode(journal, signals)
        lifecycle = AttemptLifecycle(store, MemoryRunQueue(), clock)
        self.reports = AttemptReports(store, lifecycle, clock, outage=self.outage)

    def claim(self, executor: str, *refs: AttemptRef, grant: ExecutorGrant | None = None) -> list[int]:
        [answer] = self.reports.claims(executor, [ref.to_proto() for ref in refs], grant)
        return [result.outcome for result in answer.claim_results.results]

    def apply(self) -> int:
        return apply_journal(self.journal, self.reports.apply_journaled)


@pytest.fixture
def sql(tmp_path: Path, migrated_sqlite: Callable[[Path], str]) -> Iterator[SqlStore]:
    store = open_store(migrated_sqlite(tmp_path / "store.db"))
    assert isinstance(store, SqlStore)
    yield store
    store.close()


@pytest.fixture
def store(sql: SqlStore) -> DownStore:
    return DownStore(sql)


@pytest.fixture
def signals() -> DownSignals:
    return DownSignals(MemoryHub())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "journals"


@pytest.fixture
def server(store: DownStore, signals: DownSignals, folder: Path) -> Iterator[Server]:
    with opened_journal(journal_path(folder, "server-1")) as journal:
        yield Server(store, signals, journal, Clock())


def new_run(store: DownStore, job_id: str) -> AttemptRef:
    """An immediate job's first run, due now and not yet claimed."""
    spec = job_pb2.Job(
        schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()),
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])),
    )
    record, first = build_job(job_id, spec, NOW - timedelta(seconds=1), SchedulingPolicy())
    assert first is not None
    store.create_jobs([NewJob(record, first)])
    return AttemptRef.of(first)


def succeeded(ref: AttemptRef, end: datetime | None = None) -> pb.AttemptResult:
    result = pb.AttemptResult(attempt=ref.to_proto(), state=run_pb2.RUN_STATE_SUCCEEDED, exit_code=0)
    if end is not None:
        set_timestamp(result.end_time, end)
    return result


def log_chunk(ref: AttemptRef, *texts: str) -> pb.LogChunk:
    return pb.LogChunk(attempt=ref.to_proto(), lines=[run_pb2.LogLine(text=text) for text in texts])


def log_texts(store: DownStore, ref: AttemptRef) -> list[str]:
    lines = store.list_logs(ref.job_id, ref.run_id, after_sequence=0, limit=100)
    return [line.text for line in lines]


def kinds(journal: OutageJournal) -> list[tuple[str, str | None]]:
    return [(entry.executor, entry.request.WhichOneof("message")) for entry in journal.entries()]


def test_while_down_each_attempt_is_granted_once_across_executors(server: Server, store: DownStore) -> None:
    a, b, c = (new_run(store, name) for name in ("a", "b", "c"))
    store.down = True

    assert server.claim(E1, a, b) == [GRANTED, GRANTED]
    assert server.claim(E2, a, c, b) == [DUPLICATE, GRANTED, DUPLICATE]
    assert server.claim(E1, c, a, a) == [DUPLICATE, GRANTED, DUPLICATE]  # its own again; a repeat once

    entries = list(server.journal.entries())
    claimed = [
        (entry.executor, [AttemptRef.from_proto(r) for r in entry.request.claims.attempts])
        for entry in entries
    ]
    assert claimed == [(E1, [a, b]), (E2, [c]), (E1, [a])]
    assert all(entry.at == NOW for entry in entries)
    assert server.signals.fence_owners([a, b, c]) == {a: E1, b: E1, c: E2}


def test_a_granted_claim_answers_a_start_time_of_now(server: Server, store: DownStore) -> None:
    a = new_run(store, "a")
    store.down = True

    [answer] = server.reports.claims(E1, [a.to_proto()])

    [result] = answer.claim_results.results
    assert result.outcome == GRANTED
    assert result.start_time.ToDatetime(tzinfo=UTC) == NOW


def test_while_down_results_are_acked_and_journaled_and_heartbeats_kept_alive(
    server: Server, store: DownStore
) -> None:
    a, b = new_run(store, "a"), new_run(store, "b")
    store.down = True
    server.claim(E1, a, b)

    beats = server.reports.heartbeats(E1, [a.to_proto(), b.to_proto()])
    hello = server.reports.connected(E2, [b.to_proto()])  # skips the orphans, which it cannot read
    assert server.reports.logs(E1, [log_chunk(a, "one", "two")]) == []
    assert server.reports.progress(E1, [pb.ProgressUpdate(attempt=a.to_proto(), progress=0.5)]) == []
    [acks] = server.reports.results(E1, [succeeded(a)])

    assert [AttemptRef.from_proto(r) for r in beats[0].heartbeat_answer.kept_alive] == [a, b]
    assert len(beats) == 1  # nothing fenced, nothing cancelled
    assert [AttemptRef.from_proto(r) for r in hello[0].heartbeat_answer.kept_alive] == [b]
    assert [AttemptRef.from_proto(r) for r in acks.acks.recorded] == [a]
    assert not acks.acks.fenced
    assert kinds(server.journal) == [(E1, "claims"), (E1, "logs"), (E1, "progress"), (E1, "results")]
    assert [line.text for line in list(server.journal.entries())[1].request.logs.chunks[0].lines] == [
        "one",
        "two",
    ]


def test_a_restricted_grant_raises_while_down_and_fences_nothing(server: Server, store: DownStore) -> None:
    a = new_run(store, "a")
    store.down = True
    restricted = ExecutorGrant(E1, queues=frozenset({"default"}))

    with pytest.raises(StoreUnavailable):
        server.claim(E1, a, grant=restricted)

    assert list(server.journal.entries()) == []
    assert server.signals.fence_owners([a]) == {}
    assert server.claim(E1, a, grant=ExecutorGrant(E1)) == [GRANTED]  # a grant of everything is fenced


def test_with_the_signal_bus_down_too_claims_wait(server: Server, store: DownStore) -> None:
    a = new_run(store, "a")
    store.down = True
    server.signals.down = True

    with pytest.raises(StoreUnavailable, match="signal bus"):
        server.claim(E1, a)

    assert list(server.journal.entries()) == []
    server.signals.down = False
    assert server.signals.fence_owners([a]) == {}
    assert server.claim(E2, a) == [GRANTED]


def test_a_report_with_no_outage_mode_raises_while_down(store: DownStore) -> None:
    a = new_run(store, "a")
    lifecycle = AttemptLifecycle(store, MemoryRunQueue(), Clock())
    reports = AttemptReports(store, lifecycle, Clock())
    store.down = True

    calls: list[Callable[[], object]] = [
        lambda: reports.claims(E1, [a.to_proto()]),
        lambda: reports.results(E1, [succeeded(a)]),
        lambda: reports.heartbeats(E1, [a.to_proto()]),
        lambda: reports.logs(E1, [log_chunk(a, "x")]),
    ]
    for call in calls:
        with pytest.raises(StoreUnavailable):
            call()


def test_once_up_the_journal_makes_the_run_start_at_the_claims_time_and_succeed(
    server: Server, store: DownStore
) -> None:
    a = new_run(store, "a")
    store.down = True
    server.claim(E1, a)
    claimed_at = server.clock.now
    server.clock.now += timedelta(seconds=3)
    server.reports.logs(E1, [log_chunk(a, "one", "two")])
    server.reports.progress(E1, [pb.ProgressUpdate(attempt=a.to_proto(), progress=0.75, message="most")])
    server.clock.now += timedelta(seconds=2)
    ended_at = server.clock.now
    server.reports.results(E1, [succeeded(a)])
    server.clock.now += timedelta(minutes=5)  # the database comes back later
    store.down = False

    [claim, *rest] = list(server.journal.entries())
    server.reports.apply_journaled(claim)
    running = store.get_run(a.job_id, a.run_id)
    assert (running.state, running.executor, running.attempt) == (RunState.RUNNING, E1, 1)
    assert running.start_time == claimed_at
    server.journal.drop_first(1)

    assert server.apply() == len(rest) == 3

    run = store.get_run(a.job_id, a.run_id)
    assert run.state is RunState.SUCCEEDED
    assert run.attempt == 1
    assert run.start_time == claimed_at
    assert run.end_time == ended_at
    assert run.progress == 0.75
    assert log_texts(store, a) == ["one", "two"]
    assert list(server.journal.entries()) == []
    assert len(server.journal) == 0


def test_once_up_claims_of_attempts_fenced_by_another_executor_are_duplicates(
    server: Server, store: DownStore
) -> None:
    a, b = new_run(store, "a"), new_run(store, "b")
    store.down = True
    server.claim(E1, a)
    store.down = False

    # Its journal not applied yet (another server's, say): the store is not asked for `a`.
    assert server.claim(E2, a, b) == [DUPLICATE, GRANTED]
    assert store.get_run(a.job_id, a.run_id).state is not RunState.RUNNING

    server.apply()
    run = store.get_run(a.job_id, a.run_id)
    assert (run.state, run.executor) == (RunState.RUNNING, E1)
    assert server.claim(E2, a) == [DUPLICATE]


def test_fences_cannot_be_read_with_the_signal_bus_away_and_the_store_decides(
    server: Server, store: DownStore
) -> None:
    a = new_run(store, "a")
    server.signals.down = True

    assert server.claim(E1, a) == [GRANTED]
    assert server.claim(E2, a) == [DUPLICATE]


def test_journaled_reports_the_store_refuses_are_not_applied(server: Server, store: DownStore) -> None:
    """E2's logs and result for an attempt E1 holds (sent though its claim was a duplicate) are dropped when
    the journal is applied; E1's stand."""
    a = new_run(store, "a")
    store.down = True
    server.claim(E1, a)
    server.claim(E2, a)
    server.reports.logs(E2, [log_chunk(a, "not mine")])
    server.reports.results(E2, [succeeded(a)])
    server.reports.logs(E1, [log_chunk(a, "mine")])
    store.down = False

    assert server.apply() == 4

    run = store.get_run(a.job_id, a.run_id)
    assert (run.state, run.executor) == (RunState.RUNNING, E1)
    assert log_texts(store, a) == ["mine"]


def test_apply_journal_stopped_midway_keeps_the_rest_for_next_time(server: Server, store: DownStore) -> None:
    a = new_run(store, "a")
    store.down = True
    server.claim(E1, a)
    server.reports.logs(E1, [log_chunk(a, "first")])
    server.reports.logs(E1, [log_chunk(a, "second", "third")])
    server.reports.results(E1, [succeeded(a)])
    store.down = False
    applied: list[JournalEntry] = []

    def away_at_the_third(entry: JournalEntry) -> None:
        if len(applied) == 2:
            store.down = True
        server.reports.apply_journaled(entry)
        applied.append(entry)

    with pytest.raises(StoreUnavailable):
        apply_journal(server.journal, away_at_the_third)

    assert len(server.journal) == 2
    assert kinds(server.journal) == [(E1, "logs"), (E1, "results")]
    store.down = False
    assert log_texts(store, a) == ["first"]
    assert store.get_run(a.job_id, a.run_id).state is RunState.RUNNING

    assert server.apply() == 2

    assert log_texts(store, a) == ["first", "second", "third"]
    assert store.get_run(a.job_id, a.run_id).state is RunState.SUCCEEDED
    assert len(server.journal) == 0
    assert server.apply() == 0


def test_apply_journal_failing_at_the_first_entry_keeps_everything(server: Server, store: DownStore) -> None:
    a = new_run(store, "a")
    store.down = True
    server.claim(E1, a)
    server.reports.logs(E1, [log_chunk(a, "only")])

    with pytest.raises(StoreUnavailable):
        server.apply()

    assert kinds(server.journal) == [(E1, "claims"), (E1, "logs")]
    assert len(server.journal) == 2


def test_apply_orphans_applies_a_journal_no_one_holds_and_removes_it(
    server: Server, store: DownStore, folder: Path
) -> None:
    a, b = new_run(store, "a"), new_run(store, "b")
    store.down = True
    with opened_journal(journal_path(folder, "dead-server")) as dead:
        OutageMode(dead, server.signals).fence(E1, [a], NOW)
    server.claim(E2, b)  # the live server's own journal, held by `server`
    store.down = False

    assert apply_orphans(folder, server.reports.apply_journaled) == 1

    assert not journal_path(folder, "dead-server").exists()
    assert store.get_run(a.job_id, a.run_id).state is RunState.RUNNING
    assert store.get_run(b.job_id, b.run_id).state is not RunState.RUNNING  # the held one is skipped
    assert kinds(server.journal) == [(E2, "claims")]
    assert server.journal.path.exists()
    assert apply_orphans(folder, server.reports.apply_journaled) == 0


def test_an_orphan_the_store_cannot_take_is_kept_and_released(
    server: Server, store: DownStore, folder: Path
) -> None:
    a = new_run(store, "a")
    path = journal_path(folder, "dead-server")
    store.down = True
    with opened_journal(path) as dead:
        OutageMode(dead, server.signals).fence(E1, [a], NOW)

    with pytest.raises(StoreUnavailable):
        apply_orphans(folder, server.reports.apply_journaled)

    assert path.exists()
    store.down = False
    assert apply_orphans(folder, server.reports.apply_journaled) == 1  # not left locked by the failed try
    assert not path.exists()


def test_an_empty_orphan_is_removed(server: Server, folder: Path) -> None:
    path = journal_path(folder, "dead-server")
    with opened_journal(path):
        pass

    assert apply_orphans(folder, server.reports.apply_journaled) == 0

    assert not path.exists()


def test_closing_keeps_a_journal_that_holds_reports_and_removes_an_empty_one(
    store: DownStore, signals: DownSignals, folder: Path
) -> None:
    a = new_run(store, "a")
    holding, empty = journal_path(folder, "holding"), journal_path(folder, "empty")
    store.down = True
    for path in (holding, empty):
        journal = OutageJournal(path)
        journal.open()
        mode = OutageMode(journal, signals)
        if path == holding:
            mode.fence(E1, [a], NOW)
        mode.close()

    assert holding.exists()
    assert not empty.exists()
    assert len(list(OutageJournal(holding).entries())) == 1


def test_the_background_thread_applies_the_journal_once_the_store_is_back(
    server: Server, store: DownStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outage_mode, "REPLAY_EVERY", 0.02)
    a = new_run(store, "a")
    store.down = True
    server.claim(E1, a)
    server.reports.results(E1, [succeeded(a)])
    server.outage.start(server.reports.apply_journaled)
    try:
        assert not eventually(lambda: len(server.journal) == 0, timeout=0.2)  # still away: kept
        store.down = False
        assert eventually(lambda: len(server.journal) == 0, timeout=5.0)
        assert store.get_run(a.job_id, a.run_id).state is RunState.SUCCEEDED
    finally:
        server.outage.close()
    assert not server.journal.path.exists()


def test_a_result_journaled_by_another_server_before_the_claims_journal_is_applied(
    server: Server, store: DownStore, signals: DownSignals, folder: Path
) -> None:
    """The executor's stream moved to another server during the outage: its claim is in this server's
    journal, its logs and result in the other's, and the other's is applied first."""
    a = new_run(store, "a")
    store.down = True
    server.claim(E1, a)
    server.clock.now += timedelta(seconds=2)
    with opened_journal(journal_path(folder, "server-2")) as journal:
        other = Server(store, signals, journal, server.clock)
        other.reports.logs(E1, [log_chunk(a, "done")])
        other.reports.results(E1, [succeeded(a)])
        store.down = False

        other.apply()
    server.apply()

    run = store.get_run(a.job_id, a.run_id)
    assert (run.state, log_texts(store, a)) == (RunState.SUCCEEDED, ["done"])
    assert (run.attempt, run.executor) == (1, E1)
    assert run.start_time == NOW + timedelta(seconds=2)  # as of its first report the other server took


def test_a_journaled_report_claims_nothing_for_an_executor_without_the_fence(
    server: Server, store: DownStore, signals: DownSignals, folder: Path
) -> None:
    a = new_run(store, "a")
    store.down = True
    server.claim(E1, a)
    with opened_journal(journal_path(folder, "server-2")) as journal:
        other = Server(store, signals, journal, server.clock)
        other.reports.logs(E2, [log_chunk(a, "not mine")])
        other.reports.results(E2, [succeeded(a)])
        store.down = False

        assert other.apply() == 2

    run = store.get_run(a.job_id, a.run_id)
    assert run.state in {RunState.SCHEDULED, RunState.QUEUED}
    assert log_texts(store, a) == []
    server.apply()
    assert (store.get_run(a.job_id, a.run_id).state, store.get_run(a.job_id, a.run_id).executor) == (
        RunState.RUNNING,
        E1,
    )


def test_a_live_result_that_comes_before_its_claims_journal_is_applied_is_recorded(
    server: Server, store: DownStore
) -> None:
    """The database is back, and the result of an attempt granted on its fence arrives as the executor sends
    it, before the journal that holds the claim is applied: the attempt is claimed as of the start it
    reports, and ended; the journal's claim then finds it done. It is not acknowledged as fenced and lost."""
    a = new_run(store, "a")
    store.down = True
    server.claim(E1, a)
    store.down = False
    server.clock.now += timedelta(seconds=3)
    result = succeeded(a, end=server.clock.now)
    set_timestamp(result.start_time, NOW + timedelta(seconds=1))

    [answer] = server.reports.results(E1, [result])

    assert [ref.run for ref in answer.acks.recorded] == [a.run_name]
    assert not answer.acks.fenced
    server.apply()  # the journal's claim comes after: a duplicate
    run = store.get_run(a.job_id, a.run_id)
    assert (run.state, run.attempt, run.executor) == (RunState.SUCCEEDED, 1, E1)
    assert run.start_time == NOW + timedelta(seconds=1)


def test_a_live_result_of_an_attempt_fenced_by_another_executor_is_still_fenced(
    server: Server, store: DownStore
) -> None:
    a = new_run(store, "a")
    store.down = True
    server.claim(E1, a)
    store.down = False

    [answer] = server.reports.results(E2, [succeeded(a)])

    assert [ref.run for ref in answer.acks.fenced] == [a.run_name]
    assert store.get_run(a.job_id, a.run_id).state in {RunState.SCHEDULED, RunState.QUEUED}


# An attempt recorded as an executor's own that its heartbeat batches leave out for the attempt's heartbeat
# timeout is held by nobody: it ends NotHeld and is retried, rather than kept alive for ever by the
# executor's renewed session (its result lost on the way, say). One left out only once, as a claim whose
# answer was still on its way, is not.

UNNAMED_TIMEOUT = timedelta(seconds=15)  # the default heartbeat timeout of the runs new_run makes


def claimed(server: Server, job_id: str) -> AttemptRef:
    ref = new_run(server.store, job_id)
    [claim] = server.store.claim([ref], E1, server.clock.now)
    assert claim.run is not None
    return ref


def test_an_attempt_left_out_of_the_batches_for_its_timeout_ends_not_held(server: Server) -> None:
    lost, kept = claimed(server, "lost"), claimed(server, "kept")
    server.reports.heartbeats(E1, [kept.to_proto()])
    server.clock.now += UNNAMED_TIMEOUT - timedelta(seconds=1)
    server.reports.heartbeats(E1, [kept.to_proto()])
    assert server.store.get_run(lost.job_id, lost.run_id).state is RunState.RUNNING  # not yet

    server.clock.now += timedelta(seconds=1)
    server.reports.heartbeats(E1, [kept.to_proto()])

    run = server.store.get_run(lost.job_id, lost.run_id)
    assert run.state is not RunState.RUNNING
    assert (
        run.previous_attempts[-1].error_type == "NotHeld"
        if run.previous_attempts
        else run.error_type == "NotHeld"
    )
    assert server.store.get_run(kept.job_id, kept.run_id).state is RunState.RUNNING


def test_an_attempt_left_out_once_and_named_again_is_kept(server: Server) -> None:
    late = claimed(server, "late")
    server.reports.heartbeats(E1, [])  # the batch left before the claim's answer came
    server.clock.now += timedelta(seconds=3)
    server.reports.heartbeats(E1, [late.to_proto()])
    server.clock.now += UNNAMED_TIMEOUT
    server.reports.heartbeats(E1, [late.to_proto()])
    assert server.store.get_run(late.job_id, late.run_id).state is RunState.RUNNING


def test_nothing_is_judged_while_the_database_is_away(server: Server) -> None:
    lost = claimed(server, "lost")
    server.reports.heartbeats(E1, [])
    server.store.down = True
    server.clock.now += 2 * UNNAMED_TIMEOUT
    server.reports.heartbeats(E1, [])  # answered (the outage mode keeps them alive), nothing judged
    server.store.down = False
    assert server.store.get_run(lost.job_id, lost.run_id).state is RunState.RUNNING


# A pause, a delete or a schedule change while claims granted on their fences wait in a journal ---------


def cron_runs(store: DownStore, job_id: str, count: int) -> list[AttemptRef]:
    """A cron job (every minute) and `count` of its runs made ahead, none claimed yet."""
    spec = job_pb2.Job(
        schedule=job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="* * * * *")),
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])),
    )
    record, _ = build_job(job_id, spec, NOW - timedelta(minutes=5), SchedulingPolicy())
    store.create_jobs([NewJob(record, None)])
    runs = [
        new_run_record(
            record,
            NOW + timedelta(minutes=minute),
            NOW,
            RunTrigger.SCHEDULE,
            heartbeat_timeout=heartbeat_timeout_of(spec),
        )
        for minute in range(count)
    ]
    for run in runs:
        store.create_run(run)
    return [AttemptRef.of(run) for run in runs]


def commands(server: Server) -> JobCommands:
    store: Any = server.store  # a DownStore passes for the store it wraps
    return JobCommands(store, SchedulingPolicy(), server.clock, fenced=server.outage.fenced)


OPERATOR = Access(UNRESTRICTED, "PauseJob", Role.OPERATOR)


@pytest.mark.parametrize("change", ["pause", "delete", "schedule"])
def test_a_change_spares_the_runs_claimed_on_their_fences_and_their_claims_are_recorded_after(
    server: Server, store: DownStore, change: str
) -> None:
    """One run of a cron job is claimed on its fence while the database is away; it comes back, and the job
    is paused, deleted or rescheduled before the journal is applied. The run started: it is not withdrawn,
    and its journaled claim and result are recorded, although the job's state would refuse a claim now. The
    job's other pending run is withdrawn."""
    fenced, other = cron_runs(store, "cron", 2)
    store.down = True
    assert server.claim(E1, fenced) == [GRANTED]
    server.reports.results(E1, [succeeded(fenced)])
    store.down = False

    name = f"jobs/{fenced.job_id}"
    if change == "pause":
        commands(server).pause_job(name, OPERATOR)
    elif change == "delete":
        commands(server).delete_job(name, "", OPERATOR)
    else:
        hourly = job_pb2.Job(
            name=name, schedule=job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="0 * * * *"))
        )
        commands(server).update_job(hourly, field_mask_pb2.FieldMask(paths=["schedule"]), OPERATOR)

    assert store.get_run(fenced.job_id, fenced.run_id).state is RunState.SCHEDULED
    assert store.get_run(other.job_id, other.run_id).state is RunState.CANCELLED
    assert server.apply() == 2
    run = store.get_run(fenced.job_id, fenced.run_id)
    assert (run.state, run.attempt, run.executor, run.start_time) == (RunState.SUCCEEDED, 1, E1, NOW)


def test_a_pause_with_the_signal_bus_away_withdraws_every_pending_run(
    server: Server, store: DownStore, signals: DownSignals
) -> None:
    """Fences that cannot be read spare nothing (as a claim through the database is then not refused for
    them: `OutageMode.fenced_by_others`); the pause is not held up."""
    runs = cron_runs(store, "cron", 2)
    signals.down = True
    commands(server).pause_job(f"jobs/{runs[0].job_id}", OPERATOR)
    assert [store.get_run(ref.job_id, ref.run_id).state for ref in runs] == [RunState.CANCELLED] * 2
