"""A catalog of 120 jobs and 120 runs with ties and missing values, and the order the store must list it in.

`expected_*` compute in Python what a listing must return, so a test can compare the store's pages with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from jobmesh.adapters.store.schema import FAR_FUTURE
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.filters import (
    DEFAULT_JOB_ORDER,
    DEFAULT_RUN_ORDER,
    JOB_FIELDS,
    RUN_FIELDS,
    ListQuery,
    OrderKey,
    parse_filter,
    parse_order_by,
)
from jobmesh.core.ports.store import NewJob, Page
from jobmesh.core.records import (
    JobRecord,
    JobState,
    Priority,
    RunRecord,
    RunState,
    RunTrigger,
    ScheduleKind,
)
from tests.adapters.store.builders import at, job, run

SIZE = 120
TEAMS = ("billing", "ops", "core")
RUN_JOBS = 6


def catalog_jobs() -> list[JobRecord]:
    records = []
    for i in range(SIZE):
        labels = {} if i % 10 == 9 else {"team": TEAMS[i % 3]}
        if i % 4 == 0:
            labels["tier"] = "gold"
        state = JobState.PAUSED if i % 7 == 0 else JobState.COMPLETED if i % 11 == 0 else JobState.ACTIVE
        records.append(
            job(
                f"j{i:03d}",
                display_name=f"n{i % 13:02d}",  # alphanumeric: sorts alike in every collation
                labels=labels,
                schedule_kind=list(ScheduleKind)[i % 3],
                priority=list(Priority)[i % 3],
                queue=f"q{i % 2}",
                state=JobState.DELETED if i % 17 == 16 else state,
                create_time=at(60 * (i % 10)),  # ten rows share each create_time
                update_time=at((i * 7) % 120),
                next_run_time=None if i % 4 == 1 else at(3600 * (i % 9)),
            )
        )
    return records


def catalog_runs() -> list[RunRecord]:
    records = []
    for i in range(SIZE):
        state = list(RunState)[i % len(RunState)]
        started = state not in (RunState.SCHEDULED, RunState.QUEUED)
        records.append(
            run(
                f"j{i % RUN_JOBS:03d}",
                f"r{i:03d}",
                schedule_time=at(60 * (i % 20)),  # ties within and across jobs
                due_time=at(60 * (i % 20) + i % 3),
                state=state,
                trigger=list(RunTrigger)[i % 3],
                attempt=1 + i % 3,
                executor=f"ex{i % 3}" if started else None,
                start_time=at(60 * (i % 20) + 5) if started else None,
                end_time=at(60 * (i % 20) + 30 + i % 4) if state.is_terminal else None,
                create_time=at(i),
                update_time=at(i % 30),
            )
        )
    return records


def load(store: SqlStore) -> tuple[list[JobRecord], list[RunRecord]]:
    jobs, runs = catalog_jobs(), catalog_runs()
    store.create_jobs([NewJob(record) for record in jobs])
    for record in runs:
        store.create_run(record)
    return jobs, runs


def job_query(filter_text: str = "", order_by: str = "", page_size: int = 50, token: str = "") -> ListQuery:
    return ListQuery(
        parse_filter(filter_text, JOB_FIELDS),
        parse_order_by(order_by, JOB_FIELDS, DEFAULT_JOB_ORDER),
        page_size,
        token,
    )


def run_query(filter_text: str = "", order_by: str = "", page_size: int = 50, token: str = "") -> ListQuery:
    return ListQuery(
        parse_filter(filter_text, RUN_FIELDS),
        parse_order_by(order_by, RUN_FIELDS, DEFAULT_RUN_ORDER),
        page_size,
        token,
    )


def collect(fetch: Callable[[ListQuery], Page[Any]], query: ListQuery, *, limit: int = 1000) -> list[Any]:
    """Every item of every page, following next_page_token."""
    items: list[Any] = []
    page = fetch(query)
    items += page.items
    for _ in range(limit):
        if not page.next_page_token:
            return items
        assert len(page.items) == query.page_size
        page = fetch(replace(query, page_token=page.next_page_token))
        items += page.items
    raise AssertionError("pagination did not end")


def _job_sort_value(record: JobRecord, field: str) -> Any:
    if field == "name":
        return record.job_id
    if field == "next_run_time":
        return record.next_run_time or FAR_FUTURE
    return getattr(record, field)


def _run_sort_value(record: RunRecord, field: str) -> Any:
    value = getattr(record, field)
    return FAR_FUTURE if value is None and field in ("start_time", "end_time") else value


def _sort_key(value: Callable[[Any, str], Any], field: str) -> Callable[[Any], Any]:
    return lambda record: value(record, field)


def ordered(
    records: Sequence[Any], order: Sequence[OrderKey], value: Callable[[Any, str], Any], ids: Sequence[str]
) -> list[Any]:
    """Sorted by `order`, ties broken by `ids` in the last key's direction (stable multi-pass sort)."""
    last_descending = order[-1].descending if order else False
    keys = [
        *order,
        *(OrderKey(name, last_descending) for name in ids if name not in {k.field for k in order}),
    ]
    result = list(records)
    for key in reversed(keys):
        result.sort(key=_sort_key(value, key.field), reverse=key.descending)
    return result


def expected_jobs(records: Sequence[JobRecord], order: Sequence[OrderKey]) -> list[str]:
    with_ids = ordered(
        records, order, lambda r, f: r.job_id if f == "job_id" else _job_sort_value(r, f), ["job_id"]
    )
    return [record.job_id for record in with_ids]


def expected_runs(records: Sequence[RunRecord], order: Sequence[OrderKey], *, one_job: bool) -> list[str]:
    ids = ["run_id"] if one_job else ["job_id", "run_id"]
    return [f"{r.job_id}/{r.run_id}" for r in ordered(records, order, _run_sort_value, ids)]


def run_keys(records: Sequence[RunRecord]) -> list[str]:
    return [f"{record.job_id}/{record.run_id}" for record in records]


def iso(moment: datetime) -> str:
    return moment.isoformat()
