"""`AsyncClient`: the asyncio client (grpc.aio) of `JobService` and `SearchService`, the same calls as
`Client` with `await` and `async for`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar, Unpack

import grpc

from jobmesh.client._config import DEFAULT_TARGET, ClientConfig, RetryConfig
from jobmesh.client._enums import BatchCreateJobsView
from jobmesh.client._errors import JobmeshError, Unavailable, error_from_rpc
from jobmesh.client._requests import (
    CreatedJob,
    JobFields,
    UpdateFields,
    backfill_job_request,
    backfill_of,
    batch_create_jobs_request,
    batch_created,
    bulk_result,
    create_job_request,
    created_job,
    deadline,
    is_terminal,
    job_name,
    list_audit_events_request,
    new_request_id,
    parent_of_run,
    preview_schedule_request,
    remaining,
    schedule_preview,
    stream_timed_out,
    update_job_request,
)
from jobmesh.client._resources import (
    AuditEvent,
    Backfill,
    BatchCreated,
    BulkResult,
    Job,
    LogLine,
    Run,
    RunChanges,
    RunCount,
    SchedulePreview,
)
from jobmesh.client._retry import retry_wait
from jobmesh.transport.tls import ChannelTls, aio_channel
from jobmesh.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc, search_service_pb2_grpc
from jobmesh.v1 import search_service_pb2 as search

__all__ = ["AsyncClient"]

R = TypeVar("R")
T = TypeVar("T")


class AsyncClient:
    """A connection to a jobmesh server from asyncio code: `async with AsyncClient(...) as client`. Make it
    on the loop that uses it."""

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        tls: ChannelTls | None = None,
        token: str | None = None,
        deadline: timedelta = timedelta(seconds=30),
        retry: RetryConfig | None = None,
    ) -> None:
        config = ClientConfig(target, tls, token, deadline, retry or RetryConfig())
        self.config = config
        self._channel = aio_channel(config.target, config.tls)
        self._jobs = job_service_pb2_grpc.JobServiceStub(self._channel)
        self._search = search_service_pb2_grpc.SearchServiceStub(self._channel)

    @classmethod
    def from_config(cls, config: ClientConfig) -> AsyncClient:
        return cls(
            config.target, tls=config.tls, token=config.token, deadline=config.deadline, retry=config.retry
        )

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.close()

    async def _call(self, method: Callable[..., Awaitable[R]], request: Any, *, idempotent: bool = True) -> R:
        retry_number = 0
        while True:
            try:
                return await method(
                    request, timeout=self.config.deadline.total_seconds(), metadata=self.config.metadata()
                )
            except grpc.RpcError as failed:
                error = error_from_rpc(failed)
                wait = retry_wait(self.config.retry, error, retry_number) if idempotent else None
                if wait is None:
                    raise error from None
            await asyncio.sleep(wait)
            retry_number += 1

    # Jobs ----------------------------------------------------------------------------------------------

    async def create_job(
        self,
        schedule: job_pb2.Schedule,
        target: job_pb2.Target,
        *,
        job_id: str = "",
        namespace: str = "",
        request_id: str | None = None,
        **fields: Unpack[JobFields],
    ) -> CreatedJob:
        request = create_job_request(
            schedule, target, job_id=job_id, namespace=namespace, request_id=request_id, **fields
        )
        return created_job(await self._call(self._jobs.CreateJob, request))

    async def batch_create_jobs(
        self,
        requests: Iterable[job_service_pb2.CreateJobRequest],
        *,
        view: BatchCreateJobsView | int = BatchCreateJobsView.BASIC,
    ) -> list[BatchCreated]:
        """As `Client.batch_create_jobs`: each item's job and run, or its typed error, in order."""
        request = batch_create_jobs_request(requests, view)
        return batch_created(await self._call(self._jobs.BatchCreateJobs, request))

    async def get_job(self, name: str) -> Job:
        request = job_service_pb2.GetJobRequest(name=job_name(name))
        return Job.of((await self._call(self._jobs.GetJob, request)).job)

    async def list_jobs(
        self, *, filter: str = "", order_by: str = "", page_size: int = 0, show_deleted: bool = False
    ) -> AsyncIterator[Job]:
        token = ""
        while True:
            request = search.ListJobsRequest(
                filter=filter,
                order_by=order_by,
                page_size=page_size,
                page_token=token,
                show_deleted=show_deleted,
            )
            answer = await self._call(self._search.ListJobs, request)
            for job in answer.jobs:
                yield Job.of(job)
            token = answer.next_page_token
            if not token:
                return

    async def update_job(
        self, name: str, *, etag: str = "", clear: Collection[str] = (), **fields: Unpack[UpdateFields]
    ) -> Job:
        request = update_job_request(name, etag=etag, clear=clear, **fields)
        return Job.of((await self._call(self._jobs.UpdateJob, request)).job)

    async def pause_job(self, name: str) -> Job:
        request = job_service_pb2.PauseJobRequest(name=job_name(name))
        return Job.of((await self._call(self._jobs.PauseJob, request)).job)

    async def resume_job(self, name: str) -> Job:
        request = job_service_pb2.ResumeJobRequest(name=job_name(name))
        return Job.of((await self._call(self._jobs.ResumeJob, request)).job)

    async def delete_job(self, name: str, *, etag: str = "") -> Job:
        request = job_service_pb2.DeleteJobRequest(name=job_name(name), etag=etag)
        return Job.of((await self._call(self._jobs.DeleteJob, request, idempotent=False)).job)

    async def run_job_now(self, name: str, *, request_id: str | None = None) -> Run:
        request = job_service_pb2.RunJobNowRequest(
            name=job_name(name), request_id=request_id or new_request_id()
        )
        return Run.of((await self._call(self._jobs.RunJobNow, request)).run)

    async def backfill_job(
        self,
        name: str,
        start: datetime,
        end: datetime,
        *,
        pace: timedelta | None = None,
        request_id: str | None = None,
    ) -> Backfill:
        """As `Client.backfill_job`: the job's past occurrences in [`start`, `end`) as paced runs."""
        request = backfill_job_request(name, start, end, pace, request_id)
        return backfill_of(await self._call(self._jobs.BackfillJob, request))

    async def preview_schedule(
        self, schedule: job_pb2.Schedule, *, count: int = 0, after: datetime | None = None
    ) -> SchedulePreview:
        """As `Client.preview_schedule`: the next fire times, or `InvalidArgument` for a bad schedule."""
        request = preview_schedule_request(schedule, count, after)
        return schedule_preview(await self._call(self._search.PreviewSchedule, request))

    async def list_audit_events(
        self, *, filter: str = "", order_by: str = "", page_size: int = 0
    ) -> AsyncIterator[AuditEvent]:
        token = ""
        while True:
            request = list_audit_events_request(
                filter=filter, order_by=order_by, page_size=page_size, page_token=token
            )
            answer = await self._call(self._search.ListAuditEvents, request)
            for event in answer.audit_events:
                yield AuditEvent.of(event)
            token = answer.next_page_token
            if not token:
                return

    # Runs ----------------------------------------------------------------------------------------------

    async def get_run(self, name: str) -> Run:
        return Run.of((await self._call(self._search.GetRun, search.GetRunRequest(name=name))).run)

    async def list_runs(
        self,
        parent: str = "jobs/-",
        *,
        filter: str = "",
        order_by: str = "",
        page_size: int = 0,
        show_upcoming: bool = False,
    ) -> AsyncIterator[Run]:
        token = ""
        while True:
            request = search.ListRunsRequest(
                parent=job_name(parent),
                filter=filter,
                order_by=order_by,
                page_size=page_size,
                page_token=token,
                show_upcoming=show_upcoming,
            )
            answer = await self._call(self._search.ListRuns, request)
            for run in answer.runs:
                yield Run.of(run)
            token = answer.next_page_token
            if not token:
                return

    async def count_runs(self) -> list[RunCount]:
        """The mesh's counts of runs per namespace, queue and state, in the namespaces the caller may read:
        kept by the mesh as runs change, so reading them costs a few rows whatever the number of runs."""
        request = search.CountRunsRequest(parent="jobs/-")
        answer = await self._call(self._search.CountRuns, request)
        return [RunCount.of(count) for count in answer.run_counts.counts]

    async def cancel_run(self, name: str, *, reason: str = "") -> Run:
        request = job_service_pb2.CancelRunRequest(name=name, reason=reason)
        return Run.of((await self._call(self._jobs.CancelRun, request)).run)

    async def replay_run(self, name: str, *, request_id: str | None = None) -> Run:
        request = job_service_pb2.ReplayRunRequest(name=name, request_id=request_id or new_request_id())
        return Run.of((await self._call(self._jobs.ReplayRun, request)).run)

    # Changes by filter (at most 1,000 runs or jobs a call; `dry_run` changes nothing and counts them) -----

    async def cancel_runs(
        self,
        parent: str = "jobs/-",
        *,
        filter: str,
        reason: str = "",
        dry_run: bool = False,
        request_id: str | None = None,
    ) -> BulkResult:
        """Cancels the pending and running runs of `parent` that `filter` matches, as `cancel_run` does."""
        request = job_service_pb2.BulkCancelRunsRequest(
            parent=job_name(parent),
            filter=filter,
            reason=reason,
            validate_only=dry_run,
            request_id=request_id or new_request_id(),
        )
        return bulk_result((await self._call(self._jobs.BulkCancelRuns, request)), dry_run)

    async def replay_runs(
        self, parent: str = "jobs/-", *, filter: str, dry_run: bool = False, request_id: str | None = None
    ) -> BulkResult:
        """Replays the failed, timed-out and dead-lettered runs that `filter` matches, as `replay_run` does;
        a retry with the same `request_id` makes no second replay of a run."""
        request = job_service_pb2.BulkReplayRunsRequest(
            parent=job_name(parent),
            filter=filter,
            validate_only=dry_run,
            request_id=request_id or new_request_id(),
        )
        return bulk_result((await self._call(self._jobs.BulkReplayRuns, request)), dry_run)

    async def pause_jobs(
        self, *, filter: str, dry_run: bool = False, request_id: str | None = None
    ) -> BulkResult:
        """Pauses the active jobs that `filter` matches, as `pause_job` does."""
        request = job_service_pb2.BulkPauseJobsRequest(
            filter=filter, validate_only=dry_run, request_id=request_id or new_request_id()
        )
        return bulk_result((await self._call(self._jobs.BulkPauseJobs, request)), dry_run)

    async def resume_jobs(
        self, *, filter: str, dry_run: bool = False, request_id: str | None = None
    ) -> BulkResult:
        """Resumes the paused jobs that `filter` matches, as `resume_job` does."""
        request = job_service_pb2.BulkResumeJobsRequest(
            filter=filter, validate_only=dry_run, request_id=request_id or new_request_id()
        )
        return bulk_result((await self._call(self._jobs.BulkResumeJobs, request)), dry_run)

    async def wait_for_run(
        self,
        name: str,
        timeout: timedelta | None = None,
        *,
        on_update: Callable[[Run], None] | None = None,
    ) -> Run:
        """The run once it is terminal, followed over `WatchRuns`; `on_update` sees each state it passes
        through. TimeoutError when `timeout` passes."""
        try:
            async with asyncio.timeout(None if timeout is None else timeout.total_seconds()):
                return await self._follow(name, on_update)
        except TimeoutError:
            raise TimeoutError(f"{name} did not end within {timeout}") from None

    async def _follow(self, name: str, on_update: Callable[[Run], None] | None) -> Run:
        retry_number = 0
        while True:
            try:
                return await self._watch_until_terminal(name, on_update or _ignore)
            except grpc.RpcError as failed:
                error = error_from_rpc(failed)
            except Unavailable as ended:
                error = ended
            wait = retry_wait(self.config.retry, error, retry_number)
            if wait is None:
                raise error from None
            await asyncio.sleep(wait)
            retry_number += 1

    async def _watch_until_terminal(self, name: str, on_update: Callable[[Run], None]) -> Run:
        request = search.WatchRunsRequest(parent=parent_of_run(name), initial_page_size=1)
        stream = self._search.WatchRuns(request, metadata=self.config.metadata())
        try:
            await stream.read()  # subscribed: a change after the read below comes on the stream
            answer = await self._search.GetRun(
                search.GetRunRequest(name=name),
                timeout=self.config.deadline.total_seconds(),
                metadata=self.config.metadata(),
            )
            first = Run.of(answer.run)
            on_update(first)
            if is_terminal(first):
                return first
            # read(), not `async for`: the first message was read so, and the two may not be mixed
            while isinstance(changes := await stream.read(), search.WatchRunsResponse):
                for changed in changes.runs:
                    if changed.name != name:
                        continue
                    run = Run.of(changed)
                    on_update(run)
                    if is_terminal(run):
                        return run
            raise Unavailable(grpc.StatusCode.UNAVAILABLE, "the run stream ended")
        finally:
            stream.cancel()

    async def tail_run_logs(
        self,
        name: str,
        *,
        follow: bool = False,
        after_sequence: int = 0,
        timeout: timedelta | None = None,
    ) -> AsyncIterator[LogLine]:
        """As `Client.tail_run_logs`: resumed after the last line when the server cuts the stream, and ended
        (not raised) when `timeout` passes."""
        limit, after, retry_number = deadline(timeout), after_sequence, 0
        while True:
            request = search.TailRunLogsRequest(name=name, follow=follow, after_sequence=after)
            call = self._search.TailRunLogs(
                request, timeout=remaining(limit), metadata=self.config.metadata()
            )
            try:
                async for batch in call:
                    retry_number = 0
                    for line in batch.lines:
                        after = line.sequence
                        yield LogLine.of(line)
                return
            except grpc.RpcError as failed:
                error = error_from_rpc(failed)
            finally:
                call.cancel()
            if stream_timed_out(error, limit):
                return
            retry_number = await self._pause_or_raise(error, retry_number)

    async def watch_runs(
        self,
        parent: str = "jobs/-",
        *,
        filter: str = "",
        initial_page_size: int = 0,
        resume_token: str = "",
        timeout: timedelta | None = None,
        show_upcoming: bool = False,
    ) -> AsyncIterator[RunChanges]:
        """As `Client.watch_runs`: resumed from the last `resume_token` when the server cuts the stream,
        and ended (not raised) when `timeout` passes."""
        limit, token, retry_number = deadline(timeout), resume_token, 0
        while True:
            request = search.WatchRunsRequest(
                parent=job_name(parent),
                filter=filter,
                initial_page_size=initial_page_size,
                resume_token=token,
                show_upcoming=show_upcoming,
            )
            call = self._search.WatchRuns(request, timeout=remaining(limit), metadata=self.config.metadata())
            try:
                async for changes in call:
                    retry_number, token = 0, changes.resume_token
                    yield RunChanges(tuple(Run.of(run) for run in changes.runs), changes.resume_token)
                return
            except grpc.RpcError as failed:
                error = error_from_rpc(failed)
                token = error.metadata.get("resume_token", token)
            finally:
                call.cancel()
            if stream_timed_out(error, limit):
                return
            retry_number = await self._pause_or_raise(error, retry_number)

    async def _pause_or_raise(self, error: JobmeshError, retry_number: int) -> int:
        wait = retry_wait(self.config.retry, error, retry_number)
        if wait is None:
            raise error
        await asyncio.sleep(wait)
        return retry_number + 1


def _ignore(_: Run) -> None:
    return None
