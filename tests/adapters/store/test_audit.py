"""The audit trail and namespaces in the store, on every backend: an event is committed with its change or not
at all, lists are scoped to namespaces, request ids are unique per namespace, and migration 0006 puts existing
rows in the default namespace."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from jobmesh.adapters.store.migrate import upgrade
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.audit import AuditAction, AuditEvent
from jobmesh.core.errors import JobmeshError
from jobmesh.core.filters import AUDIT_FIELDS, DEFAULT_AUDIT_ORDER, DEFAULT_RUN_ORDER, ListQuery, parse_filter
from jobmesh.core.ports.store import CreateStatus
from tests.adapters.store.builders import BASE, at, new_job, run


def event(
    event_id: str, action: AuditAction, resource: str, namespace: str = "default", **kw: Any
) -> AuditEvent:
    return AuditEvent(
        event_id=event_id,
        time=kw.pop("time", BASE),
        actor=kw.pop("actor", "alice"),
        action=action,
        resource=resource,
        job_id=resource.split("/")[1],
        namespace=namespace,
        **kw,
    )


def trail(store: SqlStore, text_filter: str = "", namespaces: frozenset[str] | None = None) -> list[str]:
    query = ListQuery(parse_filter(text_filter, AUDIT_FIELDS), DEFAULT_AUDIT_ORDER, 100, "", namespaces)
    return [e.event_id for e in store.list_audit_events(query).items]


def test_each_write_commits_its_event(store: SqlStore) -> None:
    [created] = store.create_jobs(
        [replace(new_job("alpha", first_run="r1"), audit=event("e1", AuditAction.CREATE, "jobs/alpha"))]
    )
    assert created.status is CreateStatus.CREATED
    current = store.get_job("alpha")
    store.update_job(
        replace(current, display_name="renamed", update_time=at(1)),
        expected_version=current.version,
        audit=event("e2", AuditAction.UPDATE, "jobs/alpha", time=at(1)),
    )
    store.cancel_run(
        "alpha",
        "r1",
        reason="no",
        now=at(2),
        audit=lambda _run: event("e3", AuditAction.CANCEL, "jobs/alpha/runs/r1", time=at(2)),
    )
    # Already cancelled: nothing changes, nothing is written.
    store.cancel_run(
        "alpha",
        "r1",
        reason="no",
        now=at(3),
        audit=lambda _run: event("e4", AuditAction.CANCEL, "jobs/alpha/runs/r1", time=at(3)),
    )
    outcome = store.create_run(
        run("alpha", "r2", request_id="q", request_hash="h"),
        audit=event("e5", AuditAction.RUN_NOW, "jobs/alpha/runs/r2", time=at(4), request_id="q"),
    )
    assert outcome.status is CreateStatus.CREATED
    replayed = store.create_run(
        run("alpha", "r3", request_id="q", request_hash="h"),
        audit=event("e6", AuditAction.RUN_NOW, "jobs/alpha/runs/r3", time=at(5)),
    )
    assert replayed.status is CreateStatus.REPLAYED
    store.delete_job(
        "alpha",
        expected_version=None,
        now=at(6),
        audit=event("e7", AuditAction.DELETE, "jobs/alpha", time=at(6)),
    )
    assert trail(store) == ["e7", "e5", "e3", "e2", "e1"]
    [e5] = store.list_audit_events(
        ListQuery(parse_filter('request_id = "q"', AUDIT_FIELDS), DEFAULT_AUDIT_ORDER, 10, "")
    ).items
    assert (e5.action, e5.resource, e5.actor, e5.job_id) == (
        AuditAction.RUN_NOW,
        "jobs/alpha/runs/r2",
        "alice",
        "alpha",
    )


def test_a_change_whose_event_cannot_be_written_does_not_happen(store: SqlStore) -> None:
    store.create_jobs([replace(new_job("alpha"), audit=event("e1", AuditAction.CREATE, "jobs/alpha"))])
    current = store.get_job("alpha")
    with pytest.raises(JobmeshError):  # the event's id is taken: its insert fails, and the update with it
        store.update_job(
            replace(current, display_name="renamed"),
            expected_version=current.version,
            audit=event("e1", AuditAction.UPDATE, "jobs/alpha"),
        )
    assert store.get_job("alpha").display_name == current.display_name
    assert store.get_job("alpha").version == current.version
    assert trail(store) == ["e1"]


def test_lists_are_scoped_to_namespaces_whatever_the_filter(store: SqlStore) -> None:
    store.create_jobs(
        [
            replace(
                new_job("alpha", first_run="a1", namespace="red"),
                audit=event("e1", AuditAction.CREATE, "jobs/alpha", "red"),
            ),
            replace(
                new_job("beta", first_run="b1", namespace="blue"),
                audit=event("e2", AuditAction.CREATE, "jobs/beta", "blue"),
            ),
        ]
    )
    # A run takes its job's namespace (`core.definitions.new_run`); the builders set it by hand.
    store.create_run(run("alpha", "a2", namespace="red"))
    red = frozenset({"red"})
    query = ListQuery(parse_filter('namespace = "blue"', AUDIT_FIELDS), DEFAULT_AUDIT_ORDER, 10, "", red)
    assert store.list_audit_events(query).items == []
    assert trail(store, namespaces=red) == ["e1"]
    assert trail(store, namespaces=frozenset()) == []
    assert trail(store, 'namespace = "blue"') == ["e2"]
    runs = ListQuery((), DEFAULT_RUN_ORDER, 10, "", red)
    assert {r.run_id for r in store.list_runs(None, runs).items} == {
        "a2"
    }  # a1 and b1 were built in "default"
    blue_runs = ListQuery((), DEFAULT_RUN_ORDER, 10, "", frozenset({"default"}))
    assert {r.run_id for r in store.list_runs(None, blue_runs).items} == {"a1", "b1"}


def test_request_ids_are_unique_per_namespace(store: SqlStore) -> None:
    first = new_job("alpha", request_id="same", request_hash="h1", namespace="red")
    elsewhere = new_job("beta", request_id="same", request_hash="h2", namespace="blue")
    reused = new_job("gamma", request_id="same", request_hash="h3", namespace="red")
    outcomes = store.create_jobs([first, elsewhere, reused])
    assert [o.status for o in outcomes] == [
        CreateStatus.CREATED,
        CreateStatus.CREATED,
        CreateStatus.REQUEST_ID_REUSED,
    ]
    [again] = store.create_jobs([new_job("delta", request_id="same", request_hash="h2", namespace="blue")])
    assert again.status is CreateStatus.REPLAYED
    assert again.job is not None
    assert again.job.job_id == "beta"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of one's own, to migrate step by step."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    with request.getfixturevalue("new_pg_schema")("jm_ns") as url:
        yield url


def test_migration_0006_puts_existing_rows_in_the_default_namespace(old_url: str) -> None:
    upgrade(old_url, "0005")
    engine = create_engine(old_url)
    postgres = engine.dialect.name == "postgresql"
    moment = "2026-11-30 12:00:00+00:00" if postgres else "2026-11-30 12:00:00.000000"
    labels = "CAST(:labels AS jsonb)" if postgres else ":labels"
    old_job = (
        "INSERT INTO jobs (job_id, spec, display_name, labels, schedule_kind, priority, queue, state,"
        " create_time, update_time, version, request_id, request_hash) VALUES (:id, :spec, 'old',"
        f" {labels}, 'RUN_AT', 'NORMAL', 'default', 'ACTIVE', :t, :t, 1, :req, 'h')"
    )
    old_run = (
        "INSERT INTO job_runs (job_id, run_id, schedule_time, attempt, due_time, state, trigger, priority,"
        " queue, progress, progress_message, create_time, update_time) VALUES ('old-one', 'r1', :t, 1, :t,"
        " 'SCHEDULED', 'SCHEDULE', 'NORMAL', 'default', 0, '', :t, :t)"
    )
    try:
        with engine.begin() as connection:
            for job_id, request_id in (("old-one", "req-1"), ("old-two", None)):
                values = {"id": job_id, "spec": b"", "labels": "{}", "t": moment, "req": request_id}
                connection.execute(text(old_job), values)
            connection.execute(text(old_run), {"t": moment})
    finally:
        engine.dispose()
    upgrade(old_url)
    store = SqlStore(old_url)
    try:
        assert store.get_job("old-one").namespace == "default"
        assert store.get_run("old-one", "r1").namespace == "default"
        scoped = ListQuery((), DEFAULT_RUN_ORDER, 10, "", frozenset({"default"}))
        assert [r.run_id for r in store.list_runs(None, scoped).items] == ["r1"]
        # The old request id now belongs to the default namespace only.
        outcomes = store.create_jobs(
            [
                new_job("new-one", request_id="req-1", request_hash="h"),
                new_job("new-two", request_id="req-1", request_hash="h", namespace="red"),
            ]
        )
        assert [o.status for o in outcomes] == [CreateStatus.REPLAYED, CreateStatus.CREATED]
        assert outcomes[0].job is not None
        assert outcomes[0].job.job_id == "old-one"
    finally:
        store.close()


def test_a_scope_of_several_namespaces_pages_in_order(store: SqlStore) -> None:
    colours = ("red", "blue", "green")
    store.create_jobs([new_job(f"job-{c}", namespace=c) for c in colours])
    for index in range(12):
        colour = colours[index % 3]
        store.create_run(run(f"job-{colour}", f"r{index:02d}", schedule_time=at(index), namespace=colour))
    seen, token = [], ""
    while True:
        page = store.list_runs(None, ListQuery((), DEFAULT_RUN_ORDER, 3, token, frozenset({"red", "blue"})))
        seen += [r.run_id for r in page.items]
        token = page.next_page_token
        if not token:
            break
    assert seen == [f"r{i:02d}" for i in reversed(range(12)) if colours[i % 3] != "green"]
