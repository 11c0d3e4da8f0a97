"""The read side: lists and lookups of jobs, runs and logs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol

from jobmesh.core.audit import AuditEvent
from jobmesh.core.errors import InvalidArgument
from jobmesh.core.filters import (
    AUDIT_FIELDS,
    DEFAULT_AUDIT_ORDER,
    DEFAULT_JOB_ORDER,
    DEFAULT_RUN_ORDER,
    JOB_FIELDS,
    RUN_FIELDS,
    Comparison,
    FieldSpec,
    ListQuery,
    OrderKey,
    parse_filter,
    parse_order_by,
)
from jobmesh.core.names import ALL_JOBS, parse_run_name, parse_run_parent
from jobmesh.core.ports.store import Page, Store
from jobmesh.core.records import JobRecord, LogRecord, RunRecord
from jobmesh.core.run_counts import RunCounts
from jobmesh.core.timestamps import utcnow
from jobmesh.server.api.validation import (
    Violations,
    check_page_size,
    clamp_page_size,
)
from jobmesh.server.auth.authorization import Access
from jobmesh.v1 import search_service_pb2

MAX_PAGE_TOKEN = 4096


class ListRequest(Protocol):
    """The fields every List request of the API has (AIP-132)."""

    @property
    def filter(self) -> str: ...
    @property
    def order_by(self) -> str: ...
    @property
    def page_size(self) -> int: ...
    @property
    def page_token(self) -> str: ...


def _list_query(
    found: Violations,
    request: ListRequest,
    access: Access,
    *,
    fields: Mapping[str, FieldSpec],
    default: tuple[OrderKey, ...],
) -> ListQuery | None:
    check_page_size(found, request.page_size)
    found.text("page_token", request.page_token, limit=MAX_PAGE_TOKEN)
    try:
        comparisons = parse_filter(request.filter, fields)
        order_by = parse_order_by(request.order_by, fields, default)
    except InvalidArgument as error:
        found.items.extend(error.violations)
        return None
    size = clamp_page_size(request.page_size)
    return ListQuery(comparisons, order_by, size, request.page_token, access.readable())


def _run_parent(found: Violations, parent: str) -> str | None:
    try:
        return parse_run_parent(parent)
    except InvalidArgument as error:
        found.items.extend(error.violations)
        return None


def check_count_parent(found: Violations, parent: str) -> None:
    """Counts are the mesh's: of every job (`jobs/-`), never of one."""
    if parent != ALL_JOBS:
        found.add("parent", f"run counts cover every job: must be {ALL_JOBS!r}")


class JobQueries:
    """Every read is authorized by the call's `Access`: lists are scoped to the namespaces it may read, and
    a named resource outside them is NOT_FOUND."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def list_jobs(self, request: search_service_pb2.ListJobsRequest, access: Access) -> Page[JobRecord]:
        found = Violations()
        query = _list_query(found, request, access, fields=JOB_FIELDS, default=DEFAULT_JOB_ORDER)
        found.raise_if_any()
        assert query is not None
        return self._store.list_jobs(query, show_deleted=request.show_deleted)

    def list_runs(self, request: search_service_pb2.ListRunsRequest, access: Access) -> Page[RunRecord]:
        found = Violations()
        job_id = _run_parent(found, request.parent)
        query = _list_query(found, request, access, fields=RUN_FIELDS, default=DEFAULT_RUN_ORDER)
        found.raise_if_any()
        assert query is not None
        if job_id is not None:
            self._parent_job(job_id, request.parent, access)
        if not request.show_upcoming:
            query = dataclasses.replace(query, upcoming_after=utcnow())
        return self._store.list_runs(job_id, query)

    def list_audit_events(
        self, request: search_service_pb2.ListAuditEventsRequest, access: Access
    ) -> Page[AuditEvent]:
        found = Violations()
        query = _list_query(found, request, access, fields=AUDIT_FIELDS, default=DEFAULT_AUDIT_ORDER)
        found.raise_if_any()
        assert query is not None
        return self._store.list_audit_events(query)

    def _parent_job(self, job_id: str, parent: str, access: Access) -> None:
        """NOT_FOUND for a job that never existed, or that lies where the caller may not look."""
        job = self._store.get_job(job_id, include_deleted=True)
        access.check(job.namespace, parent)

    def runs_to_watch(
        self, request: search_service_pb2.WatchRunsRequest, access: Access
    ) -> tuple[str | None, tuple[Comparison, ...]]:
        """The job (None for every job) and the filter a `WatchRuns` stream asks for, checked as `ListRuns`
        checks them."""
        found = Violations()
        check_page_size(found, request.initial_page_size, "initial_page_size")
        if request.include_run_counts:
            check_count_parent(found, request.parent)
        return self.runs_matching(request.parent, request.filter, access, found)

    def count_runs(self, request: search_service_pb2.CountRunsRequest, access: Access) -> RunCounts:
        """The mesh's counts of runs in the namespaces the caller may read."""
        found = Violations()
        check_count_parent(found, request.parent)
        found.raise_if_any()
        return self._store.count_runs(utcnow()).visible_to(access.readable())

    def runs_matching(
        self, parent: str, filter_text: str, access: Access, found: Violations
    ) -> tuple[str | None, tuple[Comparison, ...]]:
        """The job (None for every job) and the comparisons of a run `parent` and `filter` as `ListRuns`
        reads them; raises what `found` holds with their violations."""
        job_id = _run_parent(found, parent)
        comparisons: tuple[Comparison, ...] = ()
        try:
            comparisons = parse_filter(filter_text, RUN_FIELDS)
        except InvalidArgument as error:
            found.items.extend(error.violations)
        found.raise_if_any()
        if job_id is not None:
            self._parent_job(job_id, parent, access)
        return job_id, comparisons

    def get_run(self, name: str, access: Access) -> RunRecord:
        job_id, run_id = parse_run_name(name)
        run = self._store.get_run(job_id, run_id)
        access.check(run.namespace, name)
        return run

    def list_logs(self, name: str, after_sequence: int, limit: int = 1000) -> list[LogRecord]:
        job_id, run_id = parse_run_name(name)
        return self._store.list_logs(job_id, run_id, after_sequence=max(after_sequence, 0), limit=limit)
