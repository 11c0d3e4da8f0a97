"""Pipeline contract: attempt log sequencing, leases, and the run's heartbeat columns."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from jobmesh.adapters.store.migrate import upgrade
from jobmesh.adapters.store.sql import SqlStore
from tests.adapters.store.builders import at, log
from tests.adapters.store.pipeline_support import add_job, add_run

TTL = timedelta(seconds=10)


# Logs ----------------------------------------------------------------------------------------------------


def test_attempt_logs_are_numbered_per_run_after_the_last_line(store: SqlStore) -> None:
    store.append_logs([log("alpha", "r1", n) for n in (1, 2, 7)])  # 7 is the last stored line
    lines = [
        log("alpha", "r1", 0, "a"),
        log("alpha", "r2", 0, "b"),
        log("alpha", "r1", 99, "c", attempt=2),  # the given sequence is ignored
        log("beta", "r1", 0, "d"),
        log("alpha", "r2", 0, "e"),
    ]
    stored = store.append_attempt_logs(lines)
    assert [(line.job_id, line.run_id, line.sequence, line.text) for line in stored] == [
        ("alpha", "r1", 8, "a"),
        ("alpha", "r2", 1, "b"),
        ("alpha", "r1", 9, "c"),
        ("beta", "r1", 1, "d"),
        ("alpha", "r2", 2, "e"),
    ]
    assert store.list_logs("alpha", "r1", after_sequence=7, limit=10) == [stored[0], stored[2]]
    assert store.list_logs("alpha", "r2", after_sequence=0, limit=10) == [stored[1], stored[4]]
    assert store.append_attempt_logs([]) == []


def test_concurrent_appends_to_one_run_never_collide(store: SqlStore) -> None:
    def append(worker: int) -> None:
        for batch in range(5):
            store.append_attempt_logs([log("alpha", "r1", 0, f"{worker}-{batch}-{i}") for i in range(20)])

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(append, range(6)))
    lines = store.list_logs("alpha", "r1", after_sequence=0, limit=1000)
    assert [line.sequence for line in lines] == list(range(1, 6 * 5 * 20 + 1))
    # Each batch got a contiguous block, in its own order.
    first = lines[0].text.rsplit("-", 1)[0]
    assert [line.text for line in lines[:20]] == [f"{first}-{i}" for i in range(20)]


# Leases --------------------------------------------------------------------------------------------------


def test_a_lease_is_taken_renewed_refused_and_taken_over(store: SqlStore) -> None:
    assert store.try_lease("leader", "w1", TTL, at(0))
    assert store.try_lease("leader", "w1", TTL, at(5))  # renewed: valid until at(15)
    assert not store.try_lease("leader", "w2", TTL, at(14))
    assert store.try_lease("other", "w2", TTL, at(14))  # leases are independent
    assert store.try_lease("leader", "w2", TTL, at(15))  # expired: taken over
    assert not store.try_lease("leader", "w1", TTL, at(16))
    with pytest.raises(ValueError, match="ttl"):
        store.try_lease("leader", "w2", timedelta(0), at(16))


def test_a_released_lease_is_free_at_once(store: SqlStore) -> None:
    assert store.try_lease("leader", "w1", TTL, at(0))
    store.release_lease("leader", "w2")  # not its holder: nothing happens
    assert not store.try_lease("leader", "w2", TTL, at(1))
    store.release_lease("leader", "w1")
    assert store.try_lease("leader", "w2", TTL, at(1))
    store.release_lease("missing", "w1")


def test_racing_candidates_never_both_hold_a_lease(store: SqlStore) -> None:
    """Eight candidates race for a free lease, then for the expired lease, ten rounds: one winner each."""

    def take(name: str, worker: int, moment: datetime) -> bool:
        return store.try_lease(name, f"w{worker}", TTL, moment)

    for round_ in range(10):
        # Every round starts after the previous lease of that name expired.
        name, moment = f"race-{round_ % 2}", at(round_ * 100)
        with ThreadPoolExecutor(max_workers=8) as pool:
            assert sum(pool.map(partial(take, name), range(8), [moment] * 8)) == 1


# Executor sessions ---------------------------------------------------------------------------------------


QUIET = timedelta(seconds=9)


def test_sessions_are_renewed_together_and_never_moved_back(store: SqlStore) -> None:
    assert store.session_renewals(["e1", "e2"]) == {}
    assert store.renew_sessions(["e1", "e2", "e1"], "server-a", at(10), stale_after=QUIET) == {"e1", "e2"}
    assert store.session_renewals(["e1", "e2", "e3"]) == {"e1": at(10), "e2": at(10)}
    assert store.renew_sessions(["e1", "e2"], "server-a", at(9), stale_after=QUIET) == {"e1", "e2"}
    assert store.session_renewals(["e1", "e2"]) == {"e1": at(10), "e2": at(10)}  # a late renewal
    assert store.renew_sessions([], "server-a", at(30), stale_after=QUIET) == frozenset()  # no statement
    many = [f"executor-{index}" for index in range(2500)]  # more than one chunk
    assert store.renew_sessions(many, "server-a", at(40), stale_after=QUIET) == set(many)
    assert set(store.session_renewals(many).values()) == {at(40)}


def test_a_session_another_server_renewed_within_the_quiet_limit_stays_its_own(store: SqlStore) -> None:
    store.renew_sessions(["e1", "e2"], "server-a", at(10), stale_after=QUIET)
    # Server b, 5 s later: e1 is server a's and live, e3 is new.
    assert store.renew_sessions(["e1", "e3"], "server-b", at(15), stale_after=QUIET) == {"e3"}
    assert store.session_renewals(["e1", "e3"]) == {"e1": at(10), "e3": at(15)}
    assert store.renew_sessions(["e1"], "server-a", at(16), stale_after=QUIET) == {"e1"}
    # Server a stops renewing e1 (its stream went quiet): a quiet limit later, server b takes it over.
    assert store.renew_sessions(["e1"], "server-b", at(24), stale_after=QUIET) == frozenset()
    assert store.renew_sessions(["e1"], "server-b", at(25), stale_after=QUIET) == {"e1"}
    assert store.renew_sessions(["e1"], "server-a", at(26), stale_after=QUIET) == frozenset()
    assert store.session_renewals(["e1"]) == {"e1": at(25)}


def test_a_released_session_is_free_for_any_server_at_once(store: SqlStore) -> None:
    store.renew_sessions(["e1"], "server-a", at(60), stale_after=QUIET)
    store.release_session("e1", "server-b")  # not b's to release: nothing changes
    assert store.renew_sessions(["e1"], "server-b", at(61), stale_after=QUIET) == frozenset()
    store.release_session("e1", "server-a")
    assert store.session_renewals(["e1"]) == {"e1": at(60)}  # the sweeper still sees the renewal
    assert store.renew_sessions(["e1"], "server-b", at(61), stale_after=QUIET) == {"e1"}
    assert store.renew_sessions(["e1"], "server-a", at(62), stale_after=QUIET) == frozenset()


def test_a_dead_servers_sessions_are_all_free_at_once(store: SqlStore) -> None:
    store.renew_sessions(["e1", "e2", "e3"], "server-a", at(70), stale_after=QUIET)
    store.renew_sessions(["e4"], "server-b", at(70), stale_after=QUIET)
    store.release_session("e3", "server-a")  # its stream had ended: released already
    assert store.release_server_sessions("server-a") == {"e1", "e2"}
    assert store.release_server_sessions("server-a") == frozenset()
    assert store.session_renewals(["e1", "e2"]) == {"e1": at(70), "e2": at(70)}  # for the sweeper
    # Within the quiet limit: server a's names are any server's, server b's stays its own.
    assert store.renew_sessions(["e1", "e2", "e4"], "server-c", at(71), stale_after=QUIET) == {"e1", "e2"}
    assert store.renew_sessions(["e4"], "server-b", at(72), stale_after=QUIET) == {"e4"}


def test_racing_servers_take_a_free_session_once(store: SqlStore) -> None:
    with ThreadPoolExecutor(8) as pool:
        held = list(
            pool.map(
                lambda server: store.renew_sessions(["e1"], f"server-{server}", at(50), stale_after=QUIET),
                range(8),
            )
        )
    assert sorted(len(names) for names in held) == [0] * 7 + [1]


# The run's heartbeat columns ---------------------------------------------------------------------------


def test_heartbeat_timeout_and_deadline_round_trip(store: SqlStore) -> None:
    add_job(store)
    record = add_run(
        store, heartbeat_timeout=timedelta(seconds=90, milliseconds=250), heartbeat_deadline=at(9)
    )
    assert store.get_run("alpha", record.run_id) == record


def _running_row(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (job_id, spec, display_name, labels, schedule_kind, priority, queue, state,"
                " create_time, update_time, version) VALUES ('alpha', :spec, 'a', '{}', 'RUN_AT', 'NORMAL',"
                " 'default', 'ACTIVE', :t, :t, 1)"
            ),
            {"spec": b"", "t": at(0)},
        )
        connection.execute(
            text(
                "INSERT INTO job_runs (job_id, run_id, schedule_time, attempt, due_time, state, trigger,"
                " priority, queue, executor, start_time, last_heartbeat_time, progress, progress_message,"
                " create_time, update_time) VALUES ('alpha', 'r1', :t, 1, :t, 'RUNNING', 'SCHEDULE',"
                " 'NORMAL', 'default', 'ex1', :t, :beat, 0, '', :t, :t)"
            ),
            {"t": at(0), "beat": at(30)},
        )
    engine.dispose()


def test_the_upgrade_gives_running_attempts_a_deadline(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url, "0001")
    _running_row(url)
    upgrade(url)
    with SqlStore(url) as store:
        before = store.get_run("alpha", "r1")
        assert (before.heartbeat_timeout, before.heartbeat_deadline) == (timedelta(seconds=15), at(45))
        assert [item.run.run_id for item in store.lost_attempts(at(46), limit=10)] == ["r1"]


@pytest.mark.postgres
def test_the_upgrade_gives_running_attempts_a_deadline_on_postgres(
    new_pg_schema: Callable[[str], Any],
) -> None:
    with new_pg_schema("jm_upgrade") as url:
        upgrade(url, "0001")
        _running_row(url)
        upgrade(url)
        with SqlStore(url) as store:
            assert store.get_run("alpha", "r1").heartbeat_deadline == at(45)
