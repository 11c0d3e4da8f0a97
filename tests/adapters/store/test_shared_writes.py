"""Writes of concurrent calls of one kind that locks no run share a transaction, and one call's failure
stays that call's (both stores)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TypeVar, cast

import pytest
from sqlalchemy import Connection, event, text
from sqlalchemy import exc as sa_exc

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.ports.pipeline_store import ClaimStatus
from tests.adapters.store.backend import Backend
from tests.adapters.store.pipeline_support import add_job, add_run, ref
from tests.support import eventually

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
LEASES = "try_lease"  # the kind of write `try_lease` is
TTL = timedelta(minutes=5)
HELD_FOR = 10  # seconds a call may take beside a held write, on a loaded machine
T = TypeVar("T")


class HeldWrite:
    """A write (of leases, by default) that holds its transaction until released, so that the calls of its
    kind after it queue."""

    def __init__(self, store: SqlStore, kind: str = LEASES) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self.thread = threading.Thread(target=store._run_write, args=(kind, self._work))

    def _work(self, connection: Connection) -> None:
        self.inside.set()
        assert self.release.wait(30)

    def __enter__(self) -> HeldWrite:
        self.thread.start()
        assert self.inside.wait(30)
        return self

    def __exit__(self, *_: object) -> None:
        self.release.set()
        self.thread.join(30)


def _in_threads(calls: dict[str, Callable[[], object]]) -> tuple[dict[str, object], list[threading.Thread]]:
    answers: dict[str, object] = {}

    def call(name: str, work: Callable[[], object]) -> None:
        try:
            answers[name] = work()
        except Exception as error:  # recorded for the test to look at
            answers[name] = error

    threads = [threading.Thread(target=call, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    return answers, threads


@pytest.fixture
def commits(store: SqlStore) -> Iterator[list[int]]:
    counted: list[int] = []

    def on_commit(_connection: Connection) -> None:
        counted.append(1)

    event.listen(store.engine, "commit", on_commit)
    yield counted
    event.remove(store.engine, "commit", on_commit)


def test_calls_that_queue_behind_a_write_commit_together(store: SqlStore, commits: list[int]) -> None:
    with HeldWrite(store):
        answers, threads = _in_threads(
            {f"lease-{n}": partial(store.try_lease, f"lease-{n}", "me", TTL, NOW) for n in range(10)}
        )
        eventually(lambda: len(store._writes[LEASES]._waiting) == 10, 10, "ten calls queued")
    for thread in threads:
        thread.join(30)
    assert answers == {f"lease-{n}": True for n in range(10)}
    assert len(commits) == 2  # the held write's, then one for the ten
    assert not any(store.try_lease(f"lease-{n}", "another", TTL, NOW) for n in range(10))


def test_a_call_that_fails_fails_alone(store: SqlStore, commits: list[int]) -> None:
    assert store.try_lease("taken", "me", TTL, NOW)
    duplicate = text("INSERT INTO leases (name, holder, expires_at) VALUES ('taken', 'x', :at)")
    calls: dict[str, Callable[[], object]] = {
        "before": lambda: store.try_lease("before", "me", TTL, NOW),
        "refused by the database": lambda: store._run_write(
            LEASES, lambda connection: connection.execute(duplicate, {"at": NOW})
        ),
        "refused by its own check": lambda: store.try_lease("no ttl", "me", timedelta(0), NOW),
        "after": lambda: store.try_lease("after", "me", TTL, NOW),
    }
    with HeldWrite(store):
        answers, threads = _in_threads(calls)
        eventually(lambda: len(store._writes[LEASES]._waiting) == len(calls), 10, "the calls queued")
    for thread in threads:
        thread.join(30)
    assert answers["before"] is True
    assert answers["after"] is True
    assert isinstance(answers["refused by the database"], sa_exc.IntegrityError)
    assert isinstance(answers["refused by its own check"], ValueError)
    assert not store.try_lease("before", "another", TTL, NOW)
    assert not store.try_lease("after", "another", TTL, NOW)
    assert store.try_lease("no ttl", "another", TTL, NOW)  # nothing of the failed calls was written


def test_calls_of_another_kind_keep_to_their_own_transactions(
    backend: Backend, store: SqlStore, commits: list[int]
) -> None:
    if backend.name == "sqlite":
        pytest.skip("SQLite has one writer at a time: a held write holds every other")
    with HeldWrite(store):
        # A session renewal is another kind of write: it commits while the leases' transaction is held.
        renewed = _while_held(partial(store.renew_sessions, ["executor-1"], "server-1", NOW, stale_after=TTL))
        assert renewed == frozenset({"executor-1"})
        assert len(commits) == 1


def test_writes_that_lock_runs_keep_a_transaction_each(backend: Backend, store: SqlStore) -> None:
    if backend.name == "sqlite":
        pytest.skip("SQLite has one writer at a time: a held write holds every other")
    add_job(store, "alone")
    record = add_run(store, 60, job_id="alone")
    with HeldWrite(store, "claim"):  # were claims shared, this claim would wait behind the held one
        [claim] = _while_held(partial(store.claim, [ref(record)], "executor-1", NOW))
    assert claim.status is ClaimStatus.GRANTED


def _while_held(call: Callable[[], T]) -> T:
    """The call's answer, which must come while the held write still holds its transaction (it waits 30 s
    for its release): a call queued behind it would not answer within HELD_FOR."""
    answers, [thread] = _in_threads({"call": call})
    thread.join(HELD_FOR)
    assert "call" in answers, f"no answer within {HELD_FOR} s: the call waited behind the held write"
    return cast(T, answers["call"])
