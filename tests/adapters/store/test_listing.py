"""Store contract, listings: every filter field and operator, orders, keyset paging and page tokens."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobmesh.adapters.store.schema import FAR_FUTURE
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.errors import InvalidArgument
from jobmesh.core.filters import JOB_FIELDS, RUN_FIELDS
from jobmesh.core.ports.store import NewJob
from jobmesh.core.records import JobRecord, JobState, RunRecord, RunState
from tests.adapters.store.backend import Backend
from tests.adapters.store.builders import at, job, run
from tests.adapters.store.catalog import (
    TEAMS,
    catalog_jobs,
    catalog_runs,
    collect,
    expected_jobs,
    expected_runs,
    iso,
    job_query,
    load,
    run_keys,
    run_query,
)

Catalog = tuple[list[JobRecord], list[RunRecord]]


@pytest.fixture(scope="session")
def sqlite_template(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Here the migrated template SQLite tests copy holds the catalog too: each test still gets a file of its
    own, without writing the catalog's 240 rows again."""
    path = tmp_path_factory.mktemp("catalog") / "store.db"
    shutil.copyfile(sqlite_template, path)
    store = SqlStore(f"sqlite:///{path}")
    try:
        load(store)
    finally:
        store.close()
    return path


@pytest.fixture
def catalog(backend: Backend) -> Catalog:
    if backend.name == "sqlite":
        return catalog_jobs(), catalog_runs()  # loaded into the template the test's file was copied from
    return load(backend.store)


def _job_ids(store: SqlStore, filter_text: str, *, show_deleted: bool = True) -> list[str]:
    page = store.list_jobs(job_query(filter_text, "name", page_size=1000), show_deleted=show_deleted)
    return [record.job_id for record in page.items]


T = at(60 * 4)


def _label(record: JobRecord, key: str) -> str | None:
    return record.labels.get(key)


def _next(record: JobRecord) -> datetime:
    return record.next_run_time or FAR_FUTURE


JOB_FILTERS: list[tuple[str, Callable[[JobRecord], bool]]] = [
    ("state = PAUSED", lambda j: j.state is JobState.PAUSED),
    ("state != active", lambda j: j.state is not JobState.ACTIVE),
    ("schedule = CRON", lambda j: j.schedule_kind.value == "CRON"),
    ("schedule != IMMEDIATE", lambda j: j.schedule_kind.value != "IMMEDIATE"),
    ("priority = HIGH", lambda j: j.priority.value == "HIGH"),
    ("priority != LOW", lambda j: j.priority.value != "LOW"),
    ('queue = "q1"', lambda j: j.queue == "q1"),
    ("queue != q1", lambda j: j.queue != "q1"),
    ('display_name = "n03"', lambda j: j.display_name == "n03"),
    ("display_name != n03", lambda j: j.display_name != "n03"),
    ('display_name = "N0*"', lambda j: j.display_name.startswith("n0")),  # wildcards ignore case
    ('display_name != "*3"', lambda j: not j.display_name.endswith("3")),
    ('display_name = "n_*"', lambda j: False),  # LIKE's own `_` and `%` match themselves
    ('display_name = "%"', lambda j: False),
    ('name = "jobs/*05"', lambda j: j.job_id.endswith("05")),
    ('name = "jobs/j*"', lambda j: True),
    ('name = "jobs/j005"', lambda j: j.job_id == "j005"),
    ("name != jobs/j005", lambda j: j.job_id != "j005"),
    ("labels.team = billing", lambda j: j.labels.get("team") == "billing"),
    ("labels.team != billing", lambda j: j.labels.get("team") != "billing"),  # absent counts as different
    (
        "labels.tier = gold AND labels.team = ops",
        lambda j: (_label(j, "tier"), _label(j, "team")) == ("gold", "ops"),
    ),
    ("labels:tier", lambda j: "tier" in j.labels),
    ("labels.nothing = x", lambda j: False),
    (f'create_time = "{iso(T)}"', lambda j: j.create_time == T),
    (f'create_time != "{iso(T)}"', lambda j: j.create_time != T),
    (f'create_time < "{iso(T)}"', lambda j: j.create_time < T),
    (f'create_time <= "{iso(T)}"', lambda j: j.create_time <= T),
    (f'create_time > "{iso(T)}"', lambda j: j.create_time > T),
    (f'create_time >= "{iso(T)}"', lambda j: j.create_time >= T),
    (f'update_time > "{iso(at(60))}"', lambda j: j.update_time > at(60)),
    (f'next_run_time <= "{iso(at(3 * 3600))}"', lambda j: at(0) <= _next(j) <= at(3 * 3600)),
    (f'next_run_time > "{iso(at(3 * 3600))}"', lambda j: at(3 * 3600) < _next(j) < FAR_FUTURE),
    (
        f'state = ACTIVE AND labels.team = ops AND create_time >= "{iso(T)}" AND queue = q0',
        lambda j: (
            (j.state, _label(j, "team"), j.queue) == (JobState.ACTIVE, "ops", "q0") and j.create_time >= T
        ),
    ),
]


def test_every_job_filter(store: SqlStore, catalog: Catalog) -> None:
    jobs, _ = catalog
    for filter_text, predicate in JOB_FILTERS:
        expected = sorted(j.job_id for j in jobs if predicate(j))
        assert _job_ids(store, filter_text) == expected, filter_text


def test_deleted_jobs_are_listed_only_when_asked(store: SqlStore, catalog: Catalog) -> None:
    jobs, _ = catalog
    visible = sorted(j.job_id for j in jobs if j.state is not JobState.DELETED)
    assert _job_ids(store, "", show_deleted=False) == visible
    assert len(_job_ids(store, "", show_deleted=True)) == len(jobs)
    assert _job_ids(store, "state = DELETED", show_deleted=False) == []


def _run_ids(store: SqlStore, filter_text: str, job_id: str | None = None) -> list[str]:
    page = store.list_runs(job_id, run_query(filter_text, "create_time", page_size=1000))
    return run_keys(page.items)


def _team(job_id: str, jobs: list[JobRecord]) -> str | None:
    return next(j.labels.get("team") for j in jobs if j.job_id == job_id)


RUN_FILTERS: list[tuple[str, Callable[[RunRecord, list[JobRecord]], bool]]] = [
    ("state = RUNNING", lambda r, _: r.state is RunState.RUNNING),
    ("state != SUCCEEDED", lambda r, _: r.state is not RunState.SUCCEEDED),
    ('job = "jobs/j002"', lambda r, _: r.job_id == "j002"),
    ("job != jobs/j002", lambda r, _: r.job_id != "j002"),
    ("attempt = 2", lambda r, _: r.attempt == 2),
    ("attempt != 2", lambda r, _: r.attempt != 2),
    ("attempt < 2", lambda r, _: r.attempt < 2),
    ("attempt <= 2", lambda r, _: r.attempt <= 2),
    ("attempt > 2", lambda r, _: r.attempt > 2),
    ("attempt >= 2", lambda r, _: r.attempt >= 2),
    ("trigger = REPLAY", lambda r, _: r.trigger.value == "REPLAY"),
    ("trigger != REPLAY", lambda r, _: r.trigger.value != "REPLAY"),
    ("executor = ex1", lambda r, _: r.executor == "ex1"),
    ('executor = ""', lambda r, _: r.executor is None),
    ("executor != ex1", lambda r, _: r.executor != "ex1"),
    ("labels.team = ops", lambda r, jobs: _team(r.job_id, jobs) == "ops"),
    ("labels.team != ops", lambda r, jobs: _team(r.job_id, jobs) != "ops"),
    ("labels:tier", lambda r, _: r.job_id in ("j000", "j004")),
    (f'schedule_time < "{iso(at(300))}"', lambda r, _: r.schedule_time < at(300)),
    (f'schedule_time = "{iso(at(300))}"', lambda r, _: r.schedule_time == at(300)),
    (f'due_time >= "{iso(at(301))}"', lambda r, _: r.due_time >= at(301)),
    (f'start_time > "{iso(at(400))}"', lambda r, _: r.start_time is not None and r.start_time > at(400)),
    (f'end_time <= "{iso(at(500))}"', lambda r, _: r.end_time is not None and r.end_time <= at(500)),
    (f'create_time != "{iso(at(7))}"', lambda r, _: r.create_time != at(7)),
    (f'update_time > "{iso(at(20))}"', lambda r, _: r.update_time > at(20)),
    (
        "state = FAILED AND labels.team = core AND attempt >= 1",
        lambda r, jobs: r.state is RunState.FAILED and _team(r.job_id, jobs) == "core",
    ),
]


def test_every_run_filter(store: SqlStore, catalog: Catalog) -> None:
    jobs, runs = catalog
    by_creation = sorted(runs, key=lambda r: r.create_time)
    for filter_text, predicate in RUN_FILTERS:
        expected = run_keys([r for r in by_creation if predicate(r, jobs)])
        assert _run_ids(store, filter_text) == expected, filter_text
        one_job = [key for key in expected if key.startswith("j003/")]
        assert _run_ids(store, filter_text, "j003") == one_job, filter_text


def test_runs_of_one_job_and_of_every_job(store: SqlStore, catalog: Catalog) -> None:
    _, runs = catalog
    assert len(_run_ids(store, "")) == len(runs)
    assert _run_ids(store, "", "j001") == run_keys(
        sorted((r for r in runs if r.job_id == "j001"), key=lambda r: r.create_time)
    )
    assert _run_ids(store, "", "ghost") == []


# Orders and pages --------------------------------------------------------------------------------------


JOB_ORDERS = [
    *("", "create_time", "display_name", "display_name desc, create_time", "name desc", "next_run_time"),
    *("next_run_time desc", "update_time desc, display_name", "create_time, next_run_time desc"),
]
RUN_ORDERS = [
    *("", "schedule_time", "start_time", "end_time desc", "due_time, schedule_time desc", "create_time desc"),
    *("update_time, start_time desc", "end_time, due_time"),
]


def test_jobs_page_through_every_order_without_loss_or_duplicates(store: SqlStore, catalog: Catalog) -> None:
    jobs, _ = catalog
    for order_by in JOB_ORDERS:
        query = job_query("", order_by, page_size=7)
        listed = [j.job_id for j in collect(lambda q: store.list_jobs(q, show_deleted=True), query)]
        assert listed == expected_jobs(jobs, query.order_by), order_by
        query = job_query("labels.team = ops", order_by, page_size=7)
        listed = [j.job_id for j in collect(lambda q: store.list_jobs(q, show_deleted=False), query)]
        live_ops = [j for j in jobs if j.labels.get("team") == "ops" and j.state is not JobState.DELETED]
        assert listed == expected_jobs(live_ops, query.order_by), order_by


def test_runs_page_through_every_order_without_loss_or_duplicates(store: SqlStore, catalog: Catalog) -> None:
    _, runs = catalog
    for order_by in RUN_ORDERS:
        query = run_query("", order_by, page_size=7)
        listed = run_keys(collect(lambda q: store.list_runs(None, q), query))
        assert listed == expected_runs(runs, query.order_by, one_job=False), order_by
        mine = [r for r in runs if r.job_id == "j004"]
        listed = run_keys(collect(lambda q: store.list_runs("j004", q), run_query("", order_by, page_size=3)))
        assert listed == expected_runs(mine, query.order_by, one_job=True), order_by


def test_runs_of_every_job_page_across_namespaces_without_loss_or_duplicates(
    store: SqlStore, catalog: Catalog
) -> None:
    """Unscoped, PostgreSQL walks each namespace's runs in turn and merges them (`sql_query._per_namespace`):
    a page boundary may fall in any namespace, and scoped lists see only theirs."""
    _, runs = catalog
    extra = []
    for i, namespace in enumerate(["team-a", "team-b", "team-a", "zz"]):
        store.create_jobs([NewJob(job(f"ns{i}", namespace=namespace))])
        extra += [
            run(f"ns{i}", f"nr{i}{k}", namespace=namespace, schedule_time=at(60 * ((i + k) % 20)))
            for k in range(5)
        ]
    for record in extra:
        store.create_run(record)
    everything = [*runs, *extra]
    for order_by in ("", "schedule_time", "end_time desc"):
        for page_size in (2, 7, 1000):
            query = run_query("", order_by, page_size=page_size)
            listed = run_keys(collect(lambda q: store.list_runs(None, q), query))
            assert listed == expected_runs(everything, query.order_by, one_job=False), (order_by, page_size)
    scoped = replace(run_query("", "", page_size=3), namespaces=frozenset({"team-a"}))
    listed = run_keys(collect(lambda q: store.list_runs(None, q), scoped))
    assert listed == expected_runs(
        [r for r in extra if r.namespace == "team-a"], scoped.order_by, one_job=False
    )


def _order_strategy(fields: list[str]) -> st.SearchStrategy[str]:
    keys = st.lists(st.sampled_from(fields), min_size=0, max_size=3, unique=True)
    return keys.flatmap(
        lambda names: st.lists(st.booleans(), min_size=len(names), max_size=len(names)).map(
            lambda directions: ", ".join(
                f"{n} desc" if d else n for n, d in zip(names, directions, strict=True)
            )
        )
    )


JOB_SORTABLE = sorted(name for name, spec in JOB_FIELDS.items() if spec.orderable)
RUN_SORTABLE = sorted(name for name, spec in RUN_FIELDS.items() if spec.orderable)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    order_by=_order_strategy(JOB_SORTABLE),
    page_size=st.integers(min_value=3, max_value=40),
    team=st.sampled_from(["", *TEAMS]),
)
def test_any_job_order_pages_like_one_big_page(
    store: SqlStore, catalog: Catalog, order_by: str, page_size: int, team: str
) -> None:
    jobs, _ = catalog
    query = job_query(f"labels.team = {team}" if team else "", order_by, page_size=page_size)
    listed = [j.job_id for j in collect(lambda q: store.list_jobs(q, show_deleted=True), query)]
    chosen = [j for j in jobs if not team or j.labels.get("team") == team]
    assert listed == expected_jobs(chosen, query.order_by)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    order_by=_order_strategy(RUN_SORTABLE),
    page_size=st.integers(min_value=3, max_value=40),
    job_id=st.sampled_from([None, "j000", "j005"]),
)
def test_any_run_order_pages_like_one_big_page(
    store: SqlStore, catalog: Catalog, order_by: str, page_size: int, job_id: str | None
) -> None:
    _, runs = catalog
    query = run_query("", order_by, page_size=page_size)
    listed = run_keys(collect(lambda q: store.list_runs(job_id, q), query))
    chosen = [r for r in runs if job_id is None or r.job_id == job_id]
    assert listed == expected_runs(chosen, query.order_by, one_job=job_id is not None)


def test_page_size_defaults_and_caps(store: SqlStore, catalog: Catalog) -> None:
    assert len(store.list_jobs(job_query(page_size=0), show_deleted=True).items) == 50
    everything = store.list_jobs(job_query(page_size=5000), show_deleted=True)
    assert (len(everything.items), everything.next_page_token) == (120, "")
    exact = store.list_jobs(job_query(page_size=120), show_deleted=True)
    assert (len(exact.items), exact.next_page_token) == (120, "")


# Page tokens ---------------------------------------------------------------------------------------------


def _encode(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


def _refused(call: Callable[[], object]) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as raised:
        call()
    assert [violation.field for violation in raised.value.violations] == ["page_token"]
    return raised.value


def test_bad_page_tokens_are_invalid_arguments(store: SqlStore, catalog: Catalog) -> None:
    token = store.list_jobs(
        job_query("state = ACTIVE", "display_name", page_size=5), show_deleted=False
    ).next_page_token
    assert token
    payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    forged = [
        "garbage!",
        "bm90IGpzb24",  # "not json"
        _encode(["a list"]),
        _encode({"f": payload["f"]}),
        _encode({"f": payload["f"], "k": [1, 2]}),
        _encode({"f": payload["f"], "k": payload["k"][:1]}),
        _encode({"f": payload["f"], "k": [payload["k"][0], 7]}),
    ]
    for bad in forged:
        query = job_query("state = ACTIVE", "display_name", 5, bad)
        _refused(partial(store.list_jobs, query, show_deleted=False))
    message = _refused(
        lambda: store.list_jobs(job_query("state = PAUSED", "display_name", 5, token), show_deleted=False)
    )
    assert "another filter or order_by" in message.violations[0].description
    _refused(
        lambda: store.list_jobs(job_query("state = ACTIVE", "create_time", 5, token), show_deleted=False)
    )
    _refused(
        lambda: store.list_jobs(job_query("state = ACTIVE", "display_name", 5, token), show_deleted=True)
    )
    _refused(lambda: store.list_runs(None, run_query("", "", 5, token)))


def test_run_tokens_are_bound_to_their_job(store: SqlStore, catalog: Catalog) -> None:
    token = store.list_runs("j001", run_query(page_size=3)).next_page_token
    assert store.list_runs("j001", run_query(page_size=3, token=token)).items
    _refused(lambda: store.list_runs("j002", run_query(page_size=3, token=token)))
    _refused(lambda: store.list_runs(None, run_query(page_size=3, token=token)))


def test_a_token_survives_a_change_of_page_size(store: SqlStore, catalog: Catalog) -> None:
    jobs, _ = catalog
    first = store.list_jobs(job_query(page_size=10), show_deleted=True)
    rest = collect(
        lambda q: store.list_jobs(q, show_deleted=True), job_query(page_size=25, token=first.next_page_token)
    )
    listed = [j.job_id for j in first.items + rest]
    assert listed == expected_jobs(jobs, job_query().order_by)
