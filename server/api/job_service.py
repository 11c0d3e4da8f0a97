"""`jobmesh.v1.JobService` over gRPC: parses nothing itself, hands requests to `JobCommands`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from jobmesh.core.errors import InvalidArgument, PermissionDenied
from jobmesh.core.names import NAMESPACE
from jobmesh.core.records import JobRecord, RunRecord, ScheduleKind
from jobmesh.core.timestamps import set_timestamp
from jobmesh.server.admission.quotas import NamespaceQuotas, namespace_of
from jobmesh.server.api.bulk_commands import BulkCommands, BulkOutcome
from jobmesh.server.api.job_commands import MAX_BATCH, Created, JobCommands
from jobmesh.server.api.resources import job_basic_proto, job_to_proto, run_basic_proto, run_to_proto
from jobmesh.server.auth.authorization import Access, access_to
from jobmesh.server.status import ok_status, status_of, unary
from jobmesh.server.workers import Workers
from jobmesh.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc, run_pb2
from jobmesh.v1 import job_service_pb2 as pb

Context = grpc.aio.ServicerContext[Any, Any]
_RPC = f"/{job_service_pb2.DESCRIPTOR.services_by_name['JobService'].full_name}/"


Results = Callable[[list[Created]], list[pb.BatchCreateJobsResult]]


def _results(
    job_view: Callable[[JobRecord, job_pb2.Job | None], job_pb2.Job],
    run_view: Callable[[RunRecord], run_pb2.Run],
) -> Results:
    def results(created: list[Created]) -> list[pb.BatchCreateJobsResult]:
        answers = []
        for item in created:
            if item.error is not None:
                answers.append(pb.BatchCreateJobsResult(status=status_of(item.error)))
                continue
            answer = pb.BatchCreateJobsResult(status=ok_status())
            if item.job is not None:
                answer.job.CopyFrom(job_view(item.job, item.spec))
            if item.first_run is not None:
                answer.run.CopyFrom(run_view(item.first_run))
            answers.append(answer)
        return answers

    return results


_BASIC = _results(job_basic_proto, run_basic_proto)
_VIEWS: dict[int, Results] = {
    pb.BATCH_CREATE_JOBS_VIEW_UNSPECIFIED: _BASIC,
    pb.BATCH_CREATE_JOBS_VIEW_BASIC: _BASIC,
    pb.BATCH_CREATE_JOBS_VIEW_FULL: _results(job_to_proto, run_to_proto),
}


class JobService(job_service_pb2_grpc.JobServiceServicer):
    def __init__(
        self, commands: JobCommands, workers: Workers, quotas: NamespaceQuotas, bulk: BulkCommands
    ) -> None:
        self._commands = commands
        self._bulk = bulk
        self._workers = workers
        self._quotas = quotas

    @unary
    async def CreateJob(self, request: pb.CreateJobRequest, context: Context) -> pb.CreateJobResponse:
        access = access_to(_RPC + "CreateJob")
        with self._workers.creating(1):
            await self._admit_jobs([request.job], access)
            [created] = await self._workers.write(self._commands.create_jobs, [request], access)
        if created.error is not None:
            raise created.error
        response = pb.CreateJobResponse()
        if created.job is not None:
            response.job.CopyFrom(job_to_proto(created.job, created.spec))
        if created.first_run is not None:
            response.run.CopyFrom(run_to_proto(created.first_run))
        return response

    @unary
    async def BatchCreateJobs(
        self, request: pb.BatchCreateJobsRequest, context: Context
    ) -> pb.BatchCreateJobsResponse:
        access = access_to(_RPC + "BatchCreateJobs")
        if not 1 <= len(request.requests) <= MAX_BATCH:
            raise InvalidArgument.single("requests", f"1 to {MAX_BATCH} jobs, got {len(request.requests)}")
        results = _VIEWS.get(request.view)
        if results is None:
            raise InvalidArgument.single("view", f"unknown view {request.view}: BASIC or FULL")
        with self._workers.creating(len(request.requests)):
            await self._admit_jobs([item.job for item in request.requests], access)
            created = await self._workers.write(
                self._commands.create_jobs, list(request.requests), access, _RPC[1:] + "BatchCreateJobs"
            )
        return pb.BatchCreateJobsResponse(results=results(created))

    @unary
    async def GetJob(self, request: pb.GetJobRequest, context: Context) -> pb.GetJobResponse:
        job = await self._workers.read(self._commands.get_job, request.name, access_to(_RPC + "GetJob"))
        return pb.GetJobResponse(job=job_to_proto(job))

    @unary
    async def UpdateJob(self, request: pb.UpdateJobRequest, context: Context) -> pb.UpdateJobResponse:
        if request.job.HasField("schedule") and (
            not request.update_mask.paths or any(p.startswith("schedule") for p in request.update_mask.paths)
        ):
            access = access_to(_RPC + "UpdateJob")
            current = await self._workers.read(self._commands.get_job, request.job.name, access)
            changed = job_pb2.Job(schedule=request.job.schedule, namespace=current.namespace)
            was_cron = current.schedule_kind is ScheduleKind.CRON
            await self._workers.read(self._quotas.admit_schedule, changed, was_cron)
        job = await self._workers.write(
            self._commands.update_job, request.job, request.update_mask, access_to(_RPC + "UpdateJob")
        )
        return pb.UpdateJobResponse(job=job_to_proto(job.record, job.spec))

    @unary
    async def DeleteJob(self, request: pb.DeleteJobRequest, context: Context) -> pb.DeleteJobResponse:
        job, cancelled = await self._workers.write(
            self._commands.delete_job, request.name, request.etag, access_to(_RPC + "DeleteJob")
        )
        return pb.DeleteJobResponse(job=job_to_proto(job), cancelled_run_count=cancelled)

    @unary
    async def PauseJob(self, request: pb.PauseJobRequest, context: Context) -> pb.PauseJobResponse:
        job = await self._workers.write(self._commands.pause_job, request.name, access_to(_RPC + "PauseJob"))
        return pb.PauseJobResponse(job=job_to_proto(job))

    @unary
    async def ResumeJob(self, request: pb.ResumeJobRequest, context: Context) -> pb.ResumeJobResponse:
        job = await self._workers.write(
            self._commands.resume_job, request.name, access_to(_RPC + "ResumeJob")
        )
        return pb.ResumeJobResponse(job=job_to_proto(job.record, job.spec))

    @unary
    async def RunJobNow(self, request: pb.RunJobNowRequest, context: Context) -> pb.RunJobNowResponse:
        await self._admit_run(request.name, _RPC + "RunJobNow")
        run = await self._workers.write(self._commands.run_job_now, request, access_to(_RPC + "RunJobNow"))
        return pb.RunJobNowResponse(run=run_to_proto(run))

    @unary
    async def CancelRun(self, request: pb.CancelRunRequest, context: Context) -> pb.CancelRunResponse:
        run = await self._workers.write(
            self._commands.cancel_run, request.name, request.reason, access_to(_RPC + "CancelRun")
        )
        return pb.CancelRunResponse(run=run_to_proto(run))

    @unary
    async def ReplayRun(self, request: pb.ReplayRunRequest, context: Context) -> pb.ReplayRunResponse:
        await self._admit_run(request.name.split("/runs/", 1)[0], _RPC + "ReplayRun")
        run = await self._workers.write(self._commands.replay_run, request, access_to(_RPC + "ReplayRun"))
        return pb.ReplayRunResponse(run=run_to_proto(run))

    @unary
    async def BackfillJob(self, request: pb.BackfillJobRequest, context: Context) -> pb.BackfillJobResponse:
        made = await self._workers.write(
            self._commands.backfill_job, request, access_to(_RPC + "BackfillJob")
        )
        response = pb.BackfillJobResponse(run_count=made.run_count)
        for field in ("first_schedule_time", "last_schedule_time", "last_due_time"):
            if (moment := getattr(made, field)) is not None:
                set_timestamp(getattr(response, field), moment)
        return response

    @unary
    async def BulkCancelRuns(
        self, request: pb.BulkCancelRunsRequest, context: Context
    ) -> pb.BulkCancelRunsResponse:
        access = access_to(_RPC + "BulkCancelRuns")
        outcome = await self._workers.write(self._bulk.cancel_runs, request, access)
        return pb.BulkCancelRunsResponse(**_bulk_fields(outcome))

    @unary
    async def BulkReplayRuns(
        self, request: pb.BulkReplayRunsRequest, context: Context
    ) -> pb.BulkReplayRunsResponse:
        access = access_to(_RPC + "BulkReplayRuns")
        outcome = await self._workers.write(self._bulk.replay_runs, request, access)
        return pb.BulkReplayRunsResponse(**_bulk_fields(outcome))

    @unary
    async def BulkPauseJobs(
        self, request: pb.BulkPauseJobsRequest, context: Context
    ) -> pb.BulkPauseJobsResponse:
        access = access_to(_RPC + "BulkPauseJobs")
        outcome = await self._workers.write(self._bulk.pause_jobs, request, access)
        return pb.BulkPauseJobsResponse(**_bulk_fields(outcome))

    @unary
    async def BulkResumeJobs(
        self, request: pb.BulkResumeJobsRequest, context: Context
    ) -> pb.BulkResumeJobsResponse:
        access = access_to(_RPC + "BulkResumeJobs")
        outcome = await self._workers.write(self._bulk.resume_jobs, request, access)
        return pb.BulkResumeJobsResponse(**_bulk_fields(outcome))

    async def _admit_jobs(self, jobs: list[job_pb2.Job], access: Access) -> None:
        """New jobs against their namespaces' quotas: only those the caller may create there are counted (a
        refusal must not tell a stranger how full a namespace is; the create refuses the others)."""
        permitted = []
        for job in jobs:
            if job.namespace and not NAMESPACE.match(job.namespace):
                continue  # not a namespace: validation refuses the job
            try:
                access.check_create(namespace_of(job), "jobs")
            except PermissionDenied:
                continue
            permitted.append(job)
        if permitted and self._quotas.admits_at_once(permitted):
            self._quotas.admit_jobs(permitted)  # arithmetic alone: no thread hop on the create path
        elif permitted:
            await self._workers.read(self._quotas.admit_jobs, permitted)

    async def _admit_run(self, job_name: str, method: str) -> None:
        """A run the API is to make now, against its namespace's runs per minute (when it has that quota)."""
        if self._quotas.limits_runs:
            job = await self._workers.read(self._commands.get_job, job_name, access_to(method))
            await self._workers.read(self._quotas.admit_run, job.namespace)


def _bulk_fields(outcome: BulkOutcome) -> dict[str, Any]:
    """The fields every bulk response shares."""
    return {
        "matched_count": outcome.matched,
        "changed_count": outcome.changed,
        "failures": [
            pb.BulkItemFailure(name=name, status=status_of(error)) for name, error in outcome.failures
        ],
    }
