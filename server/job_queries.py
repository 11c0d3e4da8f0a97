"""The read side: lists and lookups of jobs, runs and logs."""

from __future__ import annotations

from jobmesh.core.errors import InvalidArgument
from jobmesh.core.filters import (
    DEFAULT_JOB_ORDER,
    DEFAULT_RUN_ORDER,
    JOB_FIELDS,
    RUN_FIELDS,
    Comparison,
    ListQuery,
    parse_filter,
    parse_order_by,
)
from jobmesh.core.names import parse_run_name, parse_run_parent
from jobmesh.core.ports.store import Page, Store
from jobmesh.core.records import JobRecord, LogRecord, RunRecord
from jobmesh.server.validation import (
    Violations,
    check_page_size,
    clamp_page_size,
)
from jobmesh.v1 import search_service_pb2

MAX_PAGE_TOKEN = 4096


def _list_query(
    found: Violations, filter_text: str, order_text: str, page_size: int, page_token: str, *, runs: bool
) -> ListQuery | None:
    fields = RUN_FIELDS if runs else JOB_FIELDS
    default = DEFAULT_RUN_ORDER if runs else DEFAULT_JOB_ORDER
    check_page_size(found, page_size)
    found.text("page_token", page_token, limit=MAX_PAGE_TOKEN)
    try:
        comparisons = parse_filter(filter_text, fields)
        order_by = parse_order_by(order_text, fields, default)
    except InvalidArgument as error:
        found.items.extend(error.violations)
        return None
    return ListQuery(comparisons, order_by, clamp_page_size(page_size), page_token)


def _run_parent(found: Violations, parent: str) -> str | None:
    try:
        return parse_run_parent(parent)
    except InvalidArgument as error:
        found.items.extend(error.violations)
        return None


class JobQueries:
    def __init__(self, store: Store) -> None:
        self._store = store

    def list_jobs(self, request: search_service_pb2.ListJobsRequest) -> Page[JobRecord]:
        found = Violations()
        query = _list_query(
            found, request.filter, request.order_by, request.page_size, request.page_token, runs=False
        )
        found.raise_if_any()
        assert query is not None
        return self._store.list_jobs(query, show_deleted=request.show_deleted)

    def list_runs(self, request: search_service_pb2.ListRunsRequest) -> Page[RunRecord]:
        found = Violations()
        job_id = _run_parent(found, request.parent)
        query = _list_query(
            found, request.filter, request.order_by, request.page_size, request.page_token, runs=True
        )
        found.raise_if_any()
        assert query is not None
        if job_id is not None:
            self._store.get_job(job_id, include_deleted=True)  # NOT_FOUND for a job that never existed
        return self._store.list_runs(job_id, query)

    def runs_to_watch(
        self, request: search_service_pb2.WatchRunsRequest
    ) -> tuple[str | None, tuple[Comparison, ...]]:
        """The job (None for every job) and the filter a `WatchRuns` stream asks for, checked as `ListRuns`
        checks them."""
        found = Violations()
        job_id = _run_parent(found, request.parent)
        check_page_size(found, request.initial_page_size, "initial_page_size")
        comparisons: tuple[Comparison, ...] = ()
        try:
            comparisons = parse_filter(request.filter, RUN_FIELDS)
        except InvalidArgument as error:
            found.items.extend(error.violations)
        found.raise_if_any()
        if job_id is not None:
            self._store.get_job(job_id, include_deleted=True)
        return job_id, comparisons

    def get_run(self, name: str) -> RunRecord:
        job_id, run_id = parse_run_name(name)
        return self._store.get_run(job_id, run_id)

    def list_logs(self, name: str, after_sequence: int, limit: int = 1000) -> list[LogRecord]:
        job_id, run_id = parse_run_name(name)
        return self._store.list_logs(job_id, run_id, after_sequence=max(after_sequence, 0), limit=limit)
