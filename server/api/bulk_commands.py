"""Changes by filter: cancel or replay the runs, pause or resume the jobs that a list filter (AIP-160)
matches.

Each item is changed by the single command of `JobCommands`, which keeps the per-item rules; this module finds
the items, caps them, counts them for a dry run (AIP-163) and gathers what failed. A call touches only the
namespaces where its caller holds the call's role, whatever the filter says. At most `MAX_BULK_ITEMS` items
change per call: a filter that matches more is refused, so that a call never stops half-way on a cap.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from jobmesh.core.errors import InvalidArgument, JobmeshError, PermissionDenied
from jobmesh.core.filters import (
    DEFAULT_JOB_ORDER,
    DEFAULT_RUN_ORDER,
    JOB_FIELDS,
    Comparison,
    ListQuery,
    parse_filter,
)
from jobmesh.core.names import job_name, run_name
from jobmesh.core.ports.store import Page, Store
from jobmesh.core.records import (
    CANCELLABLE_RUN_STATES,
    REPLAYABLE_RUN_STATES,
    JobRecord,
    JobState,
    RunRecord,
    RunState,
)
from jobmesh.server.api.job_commands import JobCommands, StoredJob
from jobmesh.server.api.job_queries import JobQueries
from jobmesh.server.api.validation import Violations, check_request_id
from jobmesh.server.auth.authorization import Access
from jobmesh.v1 import job_service_pb2 as pb

MAX_BULK_ITEMS = 1000
_PAGE_ITEMS = 1000
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class BulkOutcome:
    """`matched`: the items the call changed or, in a dry run, would change; `failures`: those it could not,
    by name."""

    matched: int
    changed: int
    failures: tuple[tuple[str, JobmeshError], ...] = ()


class BulkCommands:
    def __init__(
        self,
        store: Store,
        commands: JobCommands,
        queries: JobQueries,
        admit_runs: Callable[[Mapping[str, int]], None],
    ) -> None:
        """`admit_runs` takes the runs a call is about to make, by namespace, from their quotas, or refuses
        them all (`NamespaceQuotas.admit_runs`)."""
        self._store = store
        self._admit_runs = admit_runs
        self._commands = commands
        self._queries = queries

    def cancel_runs(self, request: pb.BulkCancelRunsRequest, access: Access) -> BulkOutcome:
        found = Violations()
        found.text("reason", request.reason, limit=1024)
        check_request_id(found, request.request_id)
        runs = self._runs(request, CANCELLABLE_RUN_STATES, access, found)
        if request.validate_only:
            return BulkOutcome(len(runs), 0)
        _check_cap(len(runs), "runs that can be cancelled")
        # A retry finds the runs the first call cancelled no longer pending or running: it changes nothing.
        outcomes = self._commands.cancel_runs(runs, request.reason, access)
        return _outcome(runs, outcomes, _run_name)

    def replay_runs(self, request: pb.BulkReplayRunsRequest, access: Access) -> BulkOutcome:
        found = Violations()
        check_request_id(found, request.request_id)
        runs = self._runs(request, REPLAYABLE_RUN_STATES, access, found)
        if request.validate_only:
            return BulkOutcome(len(runs), 0)
        _check_cap(len(runs), "runs that can be replayed")
        self._admit_runs(Counter(run.namespace for run in runs))
        jobs: dict[str, StoredJob] = {}  # each read and decoded once
        outcomes: list[RunRecord | JobmeshError] = []
        for run in runs:
            try:
                job = jobs.get(run.job_id) or self._commands.read_job(run.job_id)
                jobs[run.job_id] = job
                single = pb.ReplayRunRequest(
                    name=_run_name(run), request_id=_item_request_id(request.request_id, _run_name(run))
                )
                outcomes.append(self._commands.replay_run(single, access, source=run, job=job))
            except JobmeshError as error:
                outcomes.append(error)
        return _outcome(runs, outcomes, _run_name)

    def pause_jobs(self, request: pb.BulkPauseJobsRequest, access: Access) -> BulkOutcome:
        return self._jobs(
            request, JobState.ACTIVE, self._commands.pause_job, "jobs that can be paused", access
        )

    def resume_jobs(self, request: pb.BulkResumeJobsRequest, access: Access) -> BulkOutcome:
        return self._jobs(
            request,
            JobState.PAUSED,
            lambda name, access: self._commands.resume_job(name, access).record,
            "jobs that can be resumed",
            access,
        )

    def _jobs(
        self,
        request: pb.BulkPauseJobsRequest | pb.BulkResumeJobsRequest,
        state: JobState,
        change: Callable[[str, Access], JobRecord],
        what: str,
        access: Access,
    ) -> BulkOutcome:
        found = Violations()
        check_request_id(found, request.request_id)
        comparisons: tuple[Comparison, ...] = ()
        try:
            comparisons = parse_filter(request.filter, JOB_FIELDS)
        except InvalidArgument as error:
            found.items.extend(error.violations)
        found.raise_if_any()
        namespaces = _changeable(access)
        in_state = (*comparisons, Comparison("state", "=", state.value))
        jobs = _collect(
            lambda token: self._store.list_jobs(
                ListQuery(in_state, DEFAULT_JOB_ORDER, _PAGE_ITEMS, token, namespaces), show_deleted=False
            ),
            everything=request.validate_only,
        )
        if request.validate_only:
            return BulkOutcome(len(jobs), 0)
        _check_cap(len(jobs), what)
        # Pause and resume leave a job already in their state as it is: a retry changes nothing.
        outcomes: list[JobRecord | JobmeshError] = []
        for job in jobs:
            try:
                outcomes.append(change(job_name(job.job_id), access))
            except JobmeshError as error:
                outcomes.append(error)
        return _outcome(jobs, outcomes, lambda job: job_name(job.job_id))

    def _runs(
        self,
        request: pb.BulkCancelRunsRequest | pb.BulkReplayRunsRequest,
        states: Collection[RunState],
        access: Access,
        found: Violations,
    ) -> list[RunRecord]:
        """The runs of the request's parent that match its filter and are in one of `states`, in namespaces
        the caller may change: all of them for a dry run, else up to one past the cap (enough to refuse)."""
        job_id, comparisons = self._queries.runs_matching(request.parent, request.filter, access, found)
        namespaces = _changeable(access)
        runs: dict[tuple[str, str], RunRecord] = {}
        # In lifecycle order, so that a run that moves on between two reads (SCHEDULED to QUEUED) is read
        # again in its new state rather than missed; the dictionary keeps it once.
        for state in (state for state in RunState if state in states):
            in_state = (*comparisons, Comparison("state", "=", state.value))

            def page(token: str, in_state: tuple[Comparison, ...] = in_state) -> Page[RunRecord]:
                return self._store.list_runs(
                    job_id, ListQuery(in_state, DEFAULT_RUN_ORDER, _PAGE_ITEMS, token, namespaces)
                )

            for run in _collect(page, everything=request.validate_only):
                runs[run.job_id, run.run_id] = run
            if not request.validate_only and len(runs) > MAX_BULK_ITEMS:
                break
        return list(runs.values())


def _collect(page: Callable[[str], Page[T]], *, everything: bool) -> list[T]:
    """The items of every page, or of enough pages to pass the cap."""
    items: list[T] = []
    token = ""
    while True:
        listed = page(token)
        items += listed.items
        token = listed.next_page_token
        if not token or (not everything and len(items) > MAX_BULK_ITEMS):
            return items


def _changeable(access: Access) -> frozenset[str] | None:
    namespaces = access.changeable()
    if namespaces == frozenset():
        rpc, role = access.method.rsplit("/", 1)[-1], access.role.name.lower()
        raise PermissionDenied(
            f"{rpc} needs the {role} role in a namespace; the caller holds it in none",
            metadata={"method": access.method, "role": access.role.name},
        )
    return namespaces


def _check_cap(count: int, what: str) -> None:
    if count > MAX_BULK_ITEMS:
        raise InvalidArgument.single(
            "filter",
            f"matches {count} {what}, more than the {MAX_BULK_ITEMS} one call may change: narrow the filter"
            " (a dry run, validate_only, counts them)",
        )


def _item_request_id(request_id: str, name: str) -> str:
    """The request id of one item of a bulk call with `request_id`: the same on a retry, so that the store
    returns what the first call made instead of making it again."""
    if not request_id:
        return ""
    return "bulk-" + hashlib.sha256(f"{request_id}\n{name}".encode()).hexdigest()[:40]


def _run_name(run: RunRecord) -> str:
    return run_name(run.job_id, run.run_id)


def _outcome(
    items: Sequence[T], outcomes: Sequence[R | JobmeshError], name: Callable[[T], str]
) -> BulkOutcome:
    failures = tuple(
        (name(item), outcome)
        for item, outcome in zip(items, outcomes, strict=True)
        if isinstance(outcome, JobmeshError)
    )
    return BulkOutcome(len(items), len(items) - len(failures), failures)
