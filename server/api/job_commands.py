"""The write side: create and steer jobs and runs. Knows the store port and the contract, not gRPC."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from google.protobuf import field_mask_pb2

from jobmesh.core.attempts import AttemptRef, Dispatchable
from jobmesh.core.audit import AuditAction, AuditEvent
from jobmesh.core.backfill import MAX_BACKFILL_RUNS, backfill_runs
from jobmesh.core.cancels import CancelRouter
from jobmesh.core.definitions import (
    IMMUTABLE_JOB_FIELDS,
    OUTPUT_ONLY_JOB_FIELDS,
    SchedulingPolicy,
    build_job,
    decode_spec,
    heartbeat_timeout_of,
    new_run,
    plan_schedule,
    priority_of,
    request_hash,
    schedule_kind_of,
    spec_of,
    writable_part,
)
from jobmesh.core.dispatch import Handoff, due_within
from jobmesh.core.errors import (
    AlreadyExists,
    EtagMismatch,
    FailedPrecondition,
    InvalidArgument,
    JobmeshError,
    NotFound,
    RequestIdReused,
)
from jobmesh.core.filters import Comparison, ListQuery
from jobmesh.core.flow_control import concurrency_of
from jobmesh.core.group_commit import GroupCommit
from jobmesh.core.hooks import NO_HOOKS, RunHooks
from jobmesh.core.ids import new_job_id
from jobmesh.core.metrics import JOBS_CREATED
from jobmesh.core.names import DEFAULT_NAMESPACE, job_name, parse_job_name, parse_run_name, run_name
from jobmesh.core.occurrences import cron_occurrences_between
from jobmesh.core.ports.store import CreateJobOutcome, CreateStatus, NewJob, Store
from jobmesh.core.records import (
    JOB_DELETED,
    JOB_PAUSED,
    PENDING_RUN_STATES,
    REPLAYABLE_RUN_STATES,
    SCHEDULE_CHANGED,
    JobRecord,
    JobState,
    RunRecord,
    RunState,
    RunTrigger,
    Withdrawal,
    etag_of,
    version_of_etag,
)
from jobmesh.core.secret_refs import SecretQueues
from jobmesh.core.states import job_may_move
from jobmesh.server.api.backfill_requests import Backfill, check_backfill, check_backfillable
from jobmesh.server.api.validation import (
    NO_SECRET_QUEUES,
    Violations,
    check_job,
    check_job_id,
    check_request_id,
    validate_job,
)
from jobmesh.server.auth.authorization import Access
from jobmesh.v1 import job_pb2, job_service_pb2

log = logging.getLogger(__name__)
MAX_BATCH = 1000
UPDATABLE_FIELDS = frozenset(
    field.name
    for field in job_pb2.Job.DESCRIPTOR.fields
    if field.name not in (*OUTPUT_ONLY_JOB_FIELDS, *IMMUTABLE_JOB_FIELDS)
)


@dataclass(frozen=True, slots=True)
class Created:
    """The outcome of one create: the job and its first run, or the error that refused it."""

    job: JobRecord | None = None
    first_run: RunRecord | None = None
    error: JobmeshError | None = None
    # The job's definition as created: the message its record's spec was serialized from (not on a replay).
    spec: job_pb2.Job | None = None


@dataclass(frozen=True, slots=True)
class StoredJob:
    """A job as a change stored it, with its definition when the change held it decoded: the message its
    record's spec holds, which the answer renders rather than decoding the spec again."""

    record: JobRecord
    spec: job_pb2.Job | None = None


class JobCommands:
    """`dispatcher` hands runs due within the threshold to the queue at once (the immediate bypass); without
    one they wait for the watcher. `cancels` pushes a persisted cancel towards the run's executor.
    `secret_queues`: the secrets a job may reference on some queues only. `fenced`: which of some attempts
    were granted on their fences while the database was away (`OutageMode.fenced`); a pause, delete or
    schedule change spares their runs, which started although the database may not know it yet. `hooks`
    observe the runs each create call made (`RunHooks.create`)."""

    def __init__(
        self,
        store: Store,
        policy: SchedulingPolicy,
        clock: Callable[[], datetime],
        *,
        dispatcher: Handoff | None = None,
        cancels: CancelRouter | None = None,
        secret_queues: SecretQueues = NO_SECRET_QUEUES,
        fenced: Callable[[Sequence[AttemptRef]], set[AttemptRef]] | None = None,
        hooks: RunHooks = NO_HOOKS,
    ) -> None:
        self._store = store
        self._hooks = hooks
        self._fenced = fenced
        self._secret_queues = secret_queues  # the secrets granted to some queues only
        # Concurrent creates share a transaction: one job per call scales with the callers.
        self._creates: GroupCommit[NewJob, CreateJobOutcome] = GroupCommit(
            store.create_jobs, max_items=MAX_BATCH
        )
        self._policy = policy
        self._clock = clock
        self._dispatcher = dispatcher
        self._cancels = cancels

    def _hand_off(self, runs: Sequence[tuple[RunRecord, job_pb2.Job]]) -> None:
        """Publishes the runs due within the threshold, each with its job's decoded definition. The database
        has them already: a queue that is down only leaves them to the watcher."""
        if self._dispatcher is None:
            return
        items = [Dispatchable(run, spec) for run, spec in runs]
        due = due_within(items, self._clock(), self._policy.immediate_threshold)
        if due:
            try:
                self._dispatcher.dispatch(due)
            except JobmeshError as error:
                log.warning("immediate dispatch of %d runs left to the watcher: %s", len(due), error)

    def _withdrawal(self, job_id: str, withdrawal: Withdrawal) -> Withdrawal:
        """`withdrawal`, sparing the job's pending runs claimed on their fences while the database was away:
        their claims wait in a server's journal, to be recorded when it is applied."""
        if self._fenced is None:
            return withdrawal
        pending = [AttemptRef.of(run) for run in self._pending_runs(job_id)]
        spared = frozenset(ref.run_id for ref in self._fenced(pending)) if pending else frozenset()
        return dataclasses.replace(withdrawal, spared=spared)

    def _pending_runs(self, job_id: str) -> list[RunRecord]:
        runs: list[RunRecord] = []
        for state in sorted(PENDING_RUN_STATES):
            token = ""
            while True:
                query = ListQuery((Comparison("state", "=", state.value),), (), 1000, token)
                page = self._store.list_runs(job_id, query)
                runs += page.items
                if not (token := page.next_page_token):
                    break
        return runs

    def _cancelled(self, run: RunRecord, reason: str) -> RunRecord:
        if self._cancels is not None:
            self._cancels.route_run(run, reason)
        return run

    # Creating -----------------------------------------------------------------------------------------

    def create_jobs(
        self,
        requests: Sequence[job_service_pb2.CreateJobRequest],
        access: Access,
        call: str = "jobmesh.v1.JobService/CreateJob",
    ) -> list[Created]:
        """Validates and authorizes each request on its own, stores the valid ones in one transaction.
        `call`: the RPC that asked, as the hooks name it."""
        start_ns = time.time_ns()
        if len(requests) > MAX_BATCH:
            raise InvalidArgument.single(
                "requests", f"at most {MAX_BATCH} jobs per call, got {len(requests)}"
            )
        now = self._clock()
        results: list[Created | None] = []
        pending: list[tuple[int, NewJob, job_pb2.Job]] = []
        for index, request in enumerate(requests):
            try:
                pending.append((index, *self._new_job(request, now, access)))
                results.append(None)
            except JobmeshError as error:
                results.append(Created(error=error))
        outcomes = self._creates.submit([item for _, item, _ in pending])
        created = 0
        for (index, item, spec), outcome in zip(pending, outcomes, strict=True):
            results[index] = _created(item, spec, outcome)
            created += outcome.status is CreateStatus.CREATED
        if created:
            JOBS_CREATED.inc(created)
        made = [
            (outcome, spec)
            for (_, _, spec), outcome in zip(pending, outcomes, strict=True)
            if outcome.status is CreateStatus.CREATED
        ]
        first_runs = [(outcome.first_run, spec) for outcome, spec in made if outcome.first_run is not None]
        if made:
            jobs = [outcome.job for outcome, _ in made if outcome.job is not None]
            self._hooks.create(call, start_ns, [run for run, _ in first_runs], jobs)
        self._hand_off(first_runs)
        return [result or Created() for result in results]

    def _new_job(
        self, request: job_service_pb2.CreateJobRequest, now: datetime, access: Access
    ) -> tuple[NewJob, job_pb2.Job]:
        """The job to insert, and its definition as its record's spec holds it (carried on, never decoded)."""
        found = Violations()
        check_job_id(found, request.job_id)
        check_request_id(found, request.request_id)
        if not request.HasField("job"):
            found.add("job", "required")
        else:
            check_job(found, request.job, now, "job", self._secret_queues)
        found.raise_if_any()
        job_id = request.job_id or new_job_id()
        spec = writable_part(request.job)
        spec.namespace = spec.namespace or DEFAULT_NAMESPACE
        access.check_create(spec.namespace, job_name(job_id))
        digest = request_hash(request) if request.request_id else ""
        job, first_run = build_job(
            job_id, spec, now, self._policy, request_id=request.request_id, request_digest=digest
        )
        event = access.audited(AuditAction.CREATE, job_name(job_id), job.namespace, now, request.request_id)
        return NewJob(job, first_run, event), spec

    # Reading and changing jobs --------------------------------------------------------------------------

    def read_job(self, job_id: str) -> StoredJob:
        """The job as stored, with its spec decoded: for a caller that makes several runs of it."""
        record = self._store.get_job(job_id)
        return StoredJob(record, decode_spec(record.spec))

    def get_job(self, name: str, access: Access) -> JobRecord:
        job = self._store.get_job(parse_job_name(name))
        access.check(job.namespace, name)
        return job

    def update_job(self, job: job_pb2.Job, mask: field_mask_pb2.FieldMask, access: Access) -> StoredJob:
        parse_job_name(job.name, "job.name")
        paths = _mask_paths(job, mask)
        current = self.get_job(job.name, access)
        if job.namespace and job.namespace != current.namespace:
            raise InvalidArgument.single(
                "job.namespace", "immutable: a job stays in the namespace it was made in"
            )
        _check_etag(current, job.etag)
        merged = decode_spec(current.spec)
        for path in paths:
            merged.ClearField(path)  # type: ignore[arg-type]
            _copy_field(job, merged, path)
        now = self._clock()
        validate_job(merged, now, secret_queues=self._secret_queues)
        updated = dataclasses.replace(
            current,
            spec=spec_of(merged),
            display_name=merged.display_name,
            labels=dict(merged.labels),
            schedule_kind=schedule_kind_of(merged),
            priority=priority_of(merged),
            queue=merged.queue or "default",
            update_time=now,
            concurrency=concurrency_of(merged),
        )
        first_run = None
        if "schedule" in paths:
            updated, first_run = self._reschedule(updated, merged, now)
        event = access.audited(AuditAction.UPDATE, job.name, current.namespace, now)
        # A new schedule withdraws the runs the old one made that no executor claimed yet, atomically.
        withdraw = self._withdrawal(current.job_id, SCHEDULE_CHANGED) if "schedule" in paths else None
        stored = self._store.update_job(
            updated, expected_version=current.version, audit=event, withdraw=withdraw
        )
        if first_run is not None:
            self._create_first_run(first_run, merged, "UpdateJob")
        return StoredJob(stored, merged)

    def _reschedule(
        self, job: JobRecord, spec: job_pb2.Job, now: datetime
    ) -> tuple[JobRecord, RunRecord | None]:
        plan = plan_schedule(spec, now, self._policy)
        state = job.state if job.state is JobState.PAUSED else plan.state
        first_run = None
        if plan.first_run_time is not None and state is not JobState.PAUSED:
            timeout = heartbeat_timeout_of(spec)
            first_run = new_run(job, plan.first_run_time, now, RunTrigger.SCHEDULE, heartbeat_timeout=timeout)
        return dataclasses.replace(job, next_run_time=plan.next_run_time, state=state), first_run

    def _create_first_run(self, first_run: RunRecord, spec: job_pb2.Job, rpc: str) -> None:
        """The new schedule's first run, handed out at once when it is due soon. `spec`: its job's."""
        start_ns = time.time_ns()
        outcome = self._store.create_run(first_run)
        if outcome.run is not None:
            self._hooks.create(f"jobmesh.v1.JobService/{rpc}", start_ns, [outcome.run])
            self._hand_off([(outcome.run, spec)])

    def delete_job(self, name: str, etag: str, access: Access) -> tuple[JobRecord, int]:
        job_id = parse_job_name(name)
        expected = _expected_version(etag, "etag")
        current = self.get_job(name, access)
        now = self._clock()
        event = access.audited(AuditAction.DELETE, name, current.namespace, now)
        spared = self._withdrawal(job_id, JOB_DELETED).spared
        job, cancelled = self._store.delete_job(
            job_id, expected_version=expected, now=now, audit=event, spared=spared
        )
        query = ListQuery((Comparison("state", "=", RunState.CANCELLING.value),), (), 1000, "")
        for run in self._store.list_runs(job_id, query).items:
            self._cancelled(run, JOB_DELETED.reason)
        return job, cancelled

    def pause_job(self, name: str, access: Access) -> JobRecord:
        current = self.get_job(name, access)
        if current.state is JobState.PAUSED:
            return current
        if not job_may_move(current.state, JobState.PAUSED):  # completed: nothing left to pause
            raise FailedPrecondition(
                f"{name} has no more runs to pause", reason="JOB_COMPLETED", metadata={"job": name}
            )
        now = self._clock()
        paused = dataclasses.replace(current, state=JobState.PAUSED, update_time=now)
        event = access.audited(AuditAction.PAUSE, name, current.namespace, now)
        # The runs made ahead of time that no executor claimed yet end with the pause, in its transaction;
        # running ones go on. A claim that raced it is refused by the store.
        return self._store.update_job(
            paused,
            expected_version=current.version,
            audit=event,
            withdraw=self._withdrawal(current.job_id, JOB_PAUSED),
        )

    def resume_job(self, name: str, access: Access) -> StoredJob:
        """Plans from now: the next run is the schedule's next fire time, made (and handed out) at once when
        it is due within the threshold, as on create; occurrences missed while paused are not made up."""
        current = self.get_job(name, access)
        if current.state is not JobState.PAUSED:
            return StoredJob(current)
        now = self._clock()
        active = dataclasses.replace(current, state=JobState.ACTIVE, update_time=now)
        spec = decode_spec(current.spec)
        resumed, first_run = self._reschedule(active, spec, now)
        event = access.audited(AuditAction.RESUME, name, current.namespace, now)
        stored = self._store.update_job(resumed, expected_version=current.version, audit=event)
        if first_run is not None:
            self._create_first_run(first_run, spec, "ResumeJob")
        return StoredJob(stored, spec)

    # Runs -------------------------------------------------------------------------------------------------

    def run_job_now(self, request: job_service_pb2.RunJobNowRequest, access: Access) -> RunRecord:
        parse_job_name(request.name)
        found = Violations()
        check_request_id(found, request.request_id)
        found.raise_if_any()
        job = self.get_job(request.name, access)
        spec = decode_spec(job.spec)
        now = self._clock()
        digest = request_hash(request) if request.request_id else ""
        run = new_run(
            job,
            now,
            now,
            RunTrigger.RUN_NOW,
            request_id=request.request_id,
            request_digest=digest,
            heartbeat_timeout=heartbeat_timeout_of(spec),
        )
        return self._insert_run(run, request.request_id, spec, access, AuditAction.RUN_NOW, "RunJobNow")

    def cancel_run(self, name: str, reason: str, access: Access) -> RunRecord:
        job_id, run_id = parse_run_name(name)
        reason = _cancel_reason(reason)
        now = self._clock()

        def audited(current: RunRecord) -> AuditEvent:
            access.check(current.namespace, name)
            return access.audited(AuditAction.CANCEL, name, current.namespace, now)

        return self._cancelled(
            self._store.cancel_run(job_id, run_id, reason=reason, now=now, audit=audited), reason
        )

    def cancel_runs(
        self, runs: Sequence[RunRecord], reason: str, access: Access
    ) -> list[RunRecord | JobmeshError]:
        """Cancels each run the caller may cancel, in one transaction; one outcome per run, in order: the
        run as it is now, or why it was not cancelled."""
        reason = _cancel_reason(reason)
        now = self._clock()
        outcomes: list[RunRecord | JobmeshError] = []
        allowed: list[tuple[int, tuple[str, str, AuditEvent]]] = []
        for run in runs:
            name = run_name(run.job_id, run.run_id)
            try:
                access.check(run.namespace, name)
            except JobmeshError as error:
                outcomes.append(error)
                continue
            event = access.audited(AuditAction.CANCEL, name, run.namespace, now)
            allowed.append((len(outcomes), (run.job_id, run.run_id, event)))
            outcomes.append(NotFound(name))
        cancelled = self._store.cancel_runs([item for _, item in allowed], reason=reason, now=now)
        for (index, _), stored in zip(allowed, cancelled, strict=True):
            if stored is not None:
                outcomes[index] = self._cancelled(stored, reason)
        return outcomes

    def replay_run(
        self,
        request: job_service_pb2.ReplayRunRequest,
        access: Access,
        *,
        source: RunRecord | None = None,
        job: StoredJob | None = None,
    ) -> RunRecord:
        """`source` and `job`: the run `request` names and its job (`read_job`), when the caller read them
        already."""
        job_id, run_id = parse_run_name(request.name)
        found = Violations()
        check_request_id(found, request.request_id)
        found.raise_if_any()
        if source is None:
            source = self._store.get_run(job_id, run_id)
        access.check(source.namespace, request.name)
        if source.state not in REPLAYABLE_RUN_STATES:
            raise FailedPrecondition(
                f"{request.name} is {source.state.value}: only failed, timed-out or dead-lettered runs"
                " can be replayed",
                reason="RUN_NOT_REPLAYABLE",
                metadata={"run": request.name, "state": source.state.value},
            )
        stored = job or self.read_job(job_id)
        spec = stored.spec if stored.spec is not None else decode_spec(stored.record.spec)
        now = self._clock()
        digest = request_hash(request) if request.request_id else ""
        run = new_run(
            stored.record,
            now,
            now,
            RunTrigger.REPLAY,
            replay_of=run_name(job_id, run_id),
            request_id=request.request_id,
            request_digest=digest,
            heartbeat_timeout=heartbeat_timeout_of(spec),
        )
        return self._insert_run(run, request.request_id, spec, access, AuditAction.REPLAY, "ReplayRun")

    def backfill_job(self, request: job_service_pb2.BackfillJobRequest, access: Access) -> Backfill:
        """The job's cron occurrences in [start_time, end_time) as paced BACKFILL runs (core/backfill.py),
        stored in one transaction with one audit event; a retried request id answers the same count."""
        start_ns = time.time_ns()
        now = self._clock()
        bounds = check_backfill(request, now)
        job = self.get_job(request.name, access)
        spec = decode_spec(job.spec)
        check_backfillable(request.name, job.state, spec)
        times = cron_occurrences_between(spec.schedule.cron, bounds.start, bounds.end, MAX_BACKFILL_RUNS)
        if len(times) > MAX_BACKFILL_RUNS:
            raise InvalidArgument.single(
                "end_time", f"the range holds more than {MAX_BACKFILL_RUNS} occurrences: backfill it in parts"
            )
        if not times:
            return Backfill(0)
        digest = request_hash(request) if request.request_id else ""
        runs = backfill_runs(
            job, spec, times, now, bounds.pace, request_id=request.request_id, request_digest=digest
        )
        event = access.audited(AuditAction.BACKFILL, request.name, job.namespace, now, request.request_id)
        outcome = self._store.create_runs(runs, audit=event)
        if outcome.status is CreateStatus.REQUEST_ID_REUSED:
            raise RequestIdReused(request.request_id)
        if outcome.status is CreateStatus.CREATED:
            self._hooks.create("jobmesh.v1.JobService/BackfillJob", start_ns, runs)
            self._hand_off([(runs[0], spec)])  # the watcher releases the others at their pace
            return Backfill(len(runs), times[0], times[-1], runs[-1].due_time)
        # A retry: the first call's runs, whose due times counted from its own time.
        first = outcome.run
        assert first is not None
        return Backfill(len(runs), times[0], times[-1], first.create_time + bounds.pace * (len(runs) - 1))

    def _insert_run(  # noqa: PLR0917 - the one path of RunJobNow and ReplayRun
        self,
        run: RunRecord,
        request_id: str,
        spec: job_pb2.Job,
        access: Access,
        action: AuditAction,
        rpc: str,
    ) -> RunRecord:
        start_ns = time.time_ns()
        name = run_name(run.job_id, run.run_id)
        event = access.audited(action, name, run.namespace, run.create_time, request_id)
        outcome = self._store.create_run(run, audit=event)
        if outcome.status is CreateStatus.REQUEST_ID_REUSED:
            raise RequestIdReused(request_id)
        if outcome.run is None:
            raise AlreadyExists(f"{run_name(run.job_id, run.run_id)} already exists")
        if outcome.status is CreateStatus.CREATED:
            self._hooks.create(f"jobmesh.v1.JobService/{rpc}", start_ns, [outcome.run])
            self._hand_off([(outcome.run, spec)])
        return outcome.run


def _created(item: NewJob, spec: job_pb2.Job, outcome: CreateJobOutcome) -> Created:
    """`spec`: the definition `item`'s record was made from, the stored one when this call created it (a
    replay answers the earlier call's job, as stored)."""
    if outcome.status is CreateStatus.REQUEST_ID_REUSED:
        return Created(error=RequestIdReused(item.job.request_id or ""))
    if outcome.status is CreateStatus.ID_TAKEN:
        name = job_name(item.job.job_id)
        return Created(error=AlreadyExists(f"{name} already exists", metadata={"resource": name}))
    made = spec if outcome.status is CreateStatus.CREATED else None
    return Created(job=outcome.job, first_run=outcome.first_run, spec=made)


def _cancel_reason(reason: str) -> str:
    """The reason recorded on a cancelled run: the caller's, checked, or a default."""
    found = Violations()
    found.text("reason", reason, limit=1024)
    found.raise_if_any()
    return reason or "cancelled"


def _expected_version(etag: str, field: str) -> int | None:
    """The version an etag names (None without one); one that no version has is the caller's error."""
    if not etag:
        return None
    version = version_of_etag(etag)
    if version is None:
        raise InvalidArgument.single(field, f"{etag[:32]!r} is not an etag of this API: read the job again")
    return version


def _check_etag(current: JobRecord, etag: str) -> None:
    expected = _expected_version(etag, "job.etag")
    if expected is not None and expected != current.version:
        raise EtagMismatch(job_name(current.job_id), etag_of(current.version))


def _mask_paths(job: job_pb2.Job, mask: field_mask_pb2.FieldMask) -> list[str]:
    """AIP-134: `*` means every writable field; an empty mask means the fields the request sets."""
    paths = list(mask.paths)
    if paths == ["*"]:
        return sorted(UPDATABLE_FIELDS)
    if not paths:
        return sorted(field.name for field, _ in job.ListFields() if field.name in UPDATABLE_FIELDS)
    found = Violations()
    for path in paths:
        if path not in UPDATABLE_FIELDS:
            allowed = ", ".join(sorted(UPDATABLE_FIELDS))
            found.add("update_mask", f"{path[:100]!r} cannot be updated; updatable fields: {allowed} or *")
    found.raise_if_any()
    return sorted(set(paths))


def _copy_field(source: job_pb2.Job, target: job_pb2.Job, path: str) -> None:
    field = job_pb2.Job.DESCRIPTOR.fields_by_name[path]
    value = getattr(source, path)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        getattr(target, path).update(value)
    elif field.message_type is not None:
        if source.HasField(path):  # type: ignore[arg-type]
            getattr(target, path).CopyFrom(value)
    else:
        setattr(target, path, value)
