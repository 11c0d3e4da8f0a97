"""`jobmesh.v1.JobService` over gRPC: parses nothing itself, hands requests to `JobCommands`."""

from __future__ import annotations

from typing import Any

import grpc

from jobmesh.core.errors import InvalidArgument
from jobmesh.server.api.resources import job_to_proto, run_to_proto
from jobmesh.server.api.status import ok_status, status_of, unary
from jobmesh.server.authorization import access_to
from jobmesh.server.job_commands import MAX_BATCH, Created, JobCommands
from jobmesh.server.workers import Workers
from jobmesh.v1 import job_service_pb2, job_service_pb2_grpc
from jobmesh.v1 import job_service_pb2 as pb

Context = grpc.aio.ServicerContext[Any, Any]
_RPC = f"/{job_service_pb2.DESCRIPTOR.services_by_name['JobService'].full_name}/"


def _result(created: Created) -> pb.BatchCreateJobsResult:
    if created.error is not None:
        return pb.BatchCreateJobsResult(status=status_of(created.error))
    result = pb.BatchCreateJobsResult(status=ok_status())
    if created.job is not None:
        result.job.CopyFrom(job_to_proto(created.job))
    if created.first_run is not None:
        result.run.CopyFrom(run_to_proto(created.first_run))
    return result


class JobService(job_service_pb2_grpc.JobServiceServicer):
    def __init__(self, commands: JobCommands, workers: Workers) -> None:
        self._commands = commands
        self._workers = workers

    @unary
    async def CreateJob(self, request: pb.CreateJobRequest, context: Context) -> pb.CreateJobResponse:
        with self._workers.creating(1):
            [created] = await self._workers.write(
                self._commands.create_jobs, [request], access_to(_RPC + "CreateJob")
            )
        if created.error is not None:
            raise created.error
        response = pb.CreateJobResponse()
        if created.job is not None:
            response.job.CopyFrom(job_to_proto(created.job))
        if created.first_run is not None:
            response.run.CopyFrom(run_to_proto(created.first_run))
        return response

    @unary
    async def BatchCreateJobs(
        self, request: pb.BatchCreateJobsRequest, context: Context
    ) -> pb.BatchCreateJobsResponse:
        if not 1 <= len(request.requests) <= MAX_BATCH:
            raise InvalidArgument.single("requests", f"1 to {MAX_BATCH} jobs, got {len(request.requests)}")
        with self._workers.creating(len(request.requests)):
            created = await self._workers.write(
                self._commands.create_jobs, list(request.requests), access_to(_RPC + "BatchCreateJobs")
            )
        return pb.BatchCreateJobsResponse(results=[_result(item) for item in created])

    @unary
    async def GetJob(self, request: pb.GetJobRequest, context: Context) -> pb.GetJobResponse:
        job = await self._workers.read(self._commands.get_job, request.name, access_to(_RPC + "GetJob"))
        return pb.GetJobResponse(job=job_to_proto(job))

    @unary
    async def UpdateJob(self, request: pb.UpdateJobRequest, context: Context) -> pb.UpdateJobResponse:
        job = await self._workers.write(
            self._commands.update_job, request.job, request.update_mask, access_to(_RPC + "UpdateJob")
        )
        return pb.UpdateJobResponse(job=job_to_proto(job))

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
        return pb.ResumeJobResponse(job=job_to_proto(job))

    @unary
    async def RunJobNow(self, request: pb.RunJobNowRequest, context: Context) -> pb.RunJobNowResponse:
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
        run = await self._workers.write(self._commands.replay_run, request, access_to(_RPC + "ReplayRun"))
        return pb.ReplayRunResponse(run=run_to_proto(run))
