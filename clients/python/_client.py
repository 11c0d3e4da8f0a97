"""`Client`: the blocking client of `JobService` and `SearchService`."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar, Unpack

import grpc

from jobmesh.client._config import DEFAULT_TARGET, ClientConfig, RetryConfig
from jobmesh.client._enums import BatchCreateJobsView
from jobmesh.client._errors import DeadlineExceeded, JobmeshError, Unavailable, error_from_rpc
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
from jobmesh.transport.tls import ChannelTls, channel
from jobmesh.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc, search_service_pb2_grpc
from jobmesh.v1 import search_service_pb2 as search

__all__ = ["Client"]

R = TypeVar("R")
T = TypeVar("T")


class Client:
    """A connection to a jobmesh server. Close it (or use it as a context manager) when done.

    >>> with Client("127.0.0.1:50051") as client:
    ...     created = client.create_job(immediately(), command(["echo", "hi"]))
    ...     client.wait_for_run(created.run.name, timedelta(seconds=30)).state
    """

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
        self._channel = channel(config.target, config.tls)
        self._jobs = job_service_pb2_grpc.JobServiceStub(self._channel)
        self._search = search_service_pb2_grpc.SearchServiceStub(self._channel)

    @classmethod
    def from_config(cls, config: ClientConfig) -> Client:
        return cls(
            config.target, tls=config.tls, token=config.token, deadline=config.deadline, retry=config.retry
        )

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def _call(self, method: Callable[..., R], request: Any, *, idempotent: bool = True) -> R:
        """One unary call, retried while the server refuses it and the call is safe to repeat."""
        retry_number = 0
        while True:
            try:
                return method(
                    request, timeout=self.config.deadline.total_seconds(), metadata=self.config.metadata()
                )
            except grpc.RpcError as failed:
                error = error_from_rpc(failed)
                wait = retry_wait(self.config.retry, error, retry_number) if idempotent else None
                if wait is None:
                    raise error from None
            time.sleep(wait)
            retry_number += 1

    # Jobs ----------------------------------------------------------------------------------------------

    def create_job(
        self,
        schedule: job_pb2.Schedule,
        target: job_pb2.Target,
        *,
        job_id: str = "",
        namespace: str = "",
        request_id: str | None = None,
        **fields: Unpack[JobFields],
    ) -> CreatedJob:
        """Creates a job (`immediately()`, `at(datetime)` or `cron(...)`; `command`, `http` or `handler`).
        Its request id (one is made when none is given) makes retries safe."""
        request = create_job_request(
            schedule, target, job_id=job_id, namespace=namespace, request_id=request_id, **fields
        )
        return created_job(self._call(self._jobs.CreateJob, request))

    def batch_create_jobs(
        self,
        requests: Iterable[job_service_pb2.CreateJobRequest],
        *,
        view: BatchCreateJobsView | int = BatchCreateJobsView.BASIC,
    ) -> list[BatchCreated]:
        """Creates up to 1,000 jobs in one call, each made with `create_job_request(...)`. Each item
        succeeds or fails alone: the answer holds, in the same order, each one's job and run or its typed
        error. A request id per item (made where missing) makes a retried batch create each job once."""
        request = batch_create_jobs_request(requests, view)
        return batch_created(self._call(self._jobs.BatchCreateJobs, request))

    def get_job(self, name: str) -> Job:
        request = job_service_pb2.GetJobRequest(name=job_name(name))
        return Job.of(self._call(self._jobs.GetJob, request).job)

    def list_jobs(
        self, *, filter: str = "", order_by: str = "", page_size: int = 0, show_deleted: bool = False
    ) -> Iterator[Job]:
        """Every job that matches, fetched a page at a time as the iterator goes."""

        def page(token: str) -> tuple[list[Job], str]:
            request = search.ListJobsRequest(
                filter=filter,
                order_by=order_by,
                page_size=page_size,
                page_token=token,
                show_deleted=show_deleted,
            )
            answer = self._call(self._search.ListJobs, request)
            return [Job.of(job) for job in answer.jobs], answer.next_page_token

        return _pages(page)

    def update_job(
        self, name: str, *, etag: str = "", clear: Collection[str] = (), **fields: Unpack[UpdateFields]
    ) -> Job:
        """Changes the fields given (and only those) and unsets those named in `clear`; with `etag`, only if
        the job is still that version."""
        request = update_job_request(name, etag=etag, clear=clear, **fields)
        return Job.of(self._call(self._jobs.UpdateJob, request).job)

    def pause_job(self, name: str) -> Job:
        request = job_service_pb2.PauseJobRequest(name=job_name(name))
        return Job.of(self._call(self._jobs.PauseJob, request).job)

    def resume_job(self, name: str) -> Job:
        request = job_service_pb2.ResumeJobRequest(name=job_name(name))
        return Job.of(self._call(self._jobs.ResumeJob, request).job)

    def delete_job(self, name: str, *, etag: str = "") -> Job:
        request = job_service_pb2.DeleteJobRequest(name=job_name(name), etag=etag)
        return Job.of(self._call(self._jobs.DeleteJob, request, idempotent=False).job)

    def run_job_now(self, name: str, *, request_id: str | None = None) -> Run:
        request = job_service_pb2.RunJobNowRequest(
            name=job_name(name), request_id=request_id or new_request_id()
        )
        return Run.of(self._call(self._jobs.RunJobNow, request).run)

    def backfill_job(
        self,
        name: str,
        start: datetime,
        end: datetime,
        *,
        pace: timedelta | None = None,
        request_id: str | None = None,
    ) -> Backfill:
        """Runs the cron job's occurrences in [`start`, `end`) (aware datetimes, in the past) again, one run
        each marked `RunTrigger.BACKFILL`, due one `pace` after the other (1 s when None). Retried with the
        same `request_id`, it answers the first call's count and makes no run again."""
        request = backfill_job_request(name, start, end, pace, request_id)
        return backfill_of(self._call(self._jobs.BackfillJob, request))

    def preview_schedule(
        self, schedule: job_pb2.Schedule, *, count: int = 0, after: datetime | None = None
    ) -> SchedulePreview:
        """The next `count` fire times of `schedule` (5 when 0, at most 100) after `after` (an aware
        datetime; now when None), validated as a create validates it: a bad cron is `InvalidArgument`."""
        request = preview_schedule_request(schedule, count, after)
        return schedule_preview(self._call(self._search.PreviewSchedule, request))

    def list_audit_events(
        self, *, filter: str = "", order_by: str = "", page_size: int = 0
    ) -> Iterator[AuditEvent]:
        """Who changed what and when (`filter` such as `job = "jobs/nightly"`), a page at a time."""

        def page(token: str) -> tuple[list[AuditEvent], str]:
            request = list_audit_events_request(
                filter=filter, order_by=order_by, page_size=page_size, page_token=token
            )
            answer = self._call(self._search.ListAuditEvents, request)
            return [AuditEvent.of(event) for event in answer.audit_events], answer.next_page_token

        return _pages(page)

    # Runs ----------------------------------------------------------------------------------------------

    def get_run(self, name: str) -> Run:
        return Run.of(self._call(self._search.GetRun, search.GetRunRequest(name=name)).run)

    def list_runs(
        self,
        parent: str = "jobs/-",
        *,
        filter: str = "",
        order_by: str = "",
        page_size: int = 0,
        show_upcoming: bool = False,
    ) -> Iterator[Run]:
        """The runs of one job (`jobs/{job}`) or of all (`jobs/-`), a page at a time. Runs made ahead of
        their time, still SCHEDULED, come only with `show_upcoming`."""

        def page(token: str) -> tuple[list[Run], str]:
            request = search.ListRunsRequest(
                parent=job_name(parent),
                filter=filter,
                order_by=order_by,
                page_size=page_size,
                page_token=token,
                show_upcoming=show_upcoming,
            )
            answer = self._call(self._search.ListRuns, request)
            return [Run.of(run) for run in answer.runs], answer.next_page_token

        return _pages(page)

    def count_runs(self) -> list[RunCount]:
        """The mesh's counts of runs per namespace, queue and state, in the namespaces the caller may read:
        kept by the mesh as runs change, so reading them costs a few rows whatever the number of runs."""
        request = search.CountRunsRequest(parent="jobs/-")
        answer = self._call(self._search.CountRuns, request)
        return [RunCount.of(count) for count in answer.run_counts.counts]

    def cancel_run(self, name: str, *, reason: str = "") -> Run:
        request = job_service_pb2.CancelRunRequest(name=name, reason=reason)
        return Run.of(self._call(self._jobs.CancelRun, request).run)

    def replay_run(self, name: str, *, request_id: str | None = None) -> Run:
        request = job_service_pb2.ReplayRunRequest(name=name, request_id=request_id or new_request_id())
        return Run.of(self._call(self._jobs.ReplayRun, request).run)

    # Changes by filter (at most 1,000 runs or jobs a call; `dry_run` changes nothing and counts them) -----

    def cancel_runs(
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
        return bulk_result(self._call(self._jobs.BulkCancelRuns, request), dry_run)

    def replay_runs(
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
        return bulk_result(self._call(self._jobs.BulkReplayRuns, request), dry_run)

    def pause_jobs(self, *, filter: str, dry_run: bool = False, request_id: str | None = None) -> BulkResult:
        """Pauses the active jobs that `filter` matches, as `pause_job` does."""
        request = job_service_pb2.BulkPauseJobsRequest(
            filter=filter, validate_only=dry_run, request_id=request_id or new_request_id()
        )
        return bulk_result(self._call(self._jobs.BulkPauseJobs, request), dry_run)

    def resume_jobs(self, *, filter: str, dry_run: bool = False, request_id: str | None = None) -> BulkResult:
        """Resumes the paused jobs that `filter` matches, as `resume_job` does."""
        request = job_service_pb2.BulkResumeJobsRequest(
            filter=filter, validate_only=dry_run, request_id=request_id or new_request_id()
        )
        return bulk_result(self._call(self._jobs.BulkResumeJobs, request), dry_run)

    def wait_for_run(
        self,
        name: str,
        timeout: timedelta | None = None,
        *,
        on_update: Callable[[Run], None] | None = None,
    ) -> Run:
        """The run once it is terminal (succeeded, failed, cancelled, timed out or dead-lettered), followed
        over `WatchRuns` rather than polled; `on_update` sees each state it passes through. TimeoutError
        when `timeout` passes first."""
        limit, retry_number = deadline(timeout), 0
        while True:
            try:
                return self._watch_until_terminal(name, remaining(limit), on_update or _ignore)
            except grpc.RpcError as failed:
                error = error_from_rpc(failed)
            except Unavailable as ended:
                error = ended
            if isinstance(error, DeadlineExceeded) and limit is not None:
                raise TimeoutError(f"{name} did not end within {timeout}") from None
            wait = retry_wait(self.config.retry, error, retry_number)
            if wait is None:
                raise error from None
            left = remaining(limit)
            time.sleep(wait if left is None else min(wait, left))
            retry_number += 1

    def _watch_until_terminal(
        self, name: str, timeout: float | None, on_update: Callable[[Run], None]
    ) -> Run:
        request = search.WatchRunsRequest(parent=parent_of_run(name), initial_page_size=1)
        stream = self._search.WatchRuns(request, timeout=timeout, metadata=self.config.metadata())
        try:
            next(stream)  # subscribed: a change after the read below comes on the stream
            answer = self._search.GetRun(
                search.GetRunRequest(name=name),
                timeout=self.config.deadline.total_seconds() if timeout is None else timeout,
                metadata=self.config.metadata(),
            )
            first = Run.of(answer.run)
            on_update(first)
            if is_terminal(first):
                return first
            for changes in stream:
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

    def tail_run_logs(
        self,
        name: str,
        *,
        follow: bool = False,
        after_sequence: int = 0,
        timeout: timedelta | None = None,
    ) -> Iterator[LogLine]:
        """The run's log lines; with `follow`, new ones as they come until the run ends. A stream the
        server cuts (`UNAVAILABLE`, `RESOURCE_EXHAUSTED`) is opened again after the last line received, as
        the retry policy allows. `timeout` bounds the whole tail: when it passes, the iteration ends."""
        limit, after, retry_number = deadline(timeout), after_sequence, 0
        while True:
            request = search.TailRunLogsRequest(name=name, follow=follow, after_sequence=after)
            call = self._search.TailRunLogs(
                request, timeout=remaining(limit), metadata=self.config.metadata()
            )
            try:
                for batch in call:
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
            retry_number = self._pause_or_raise(error, retry_number)

    def watch_runs(
        self,
        parent: str = "jobs/-",
        *,
        filter: str = "",
        initial_page_size: int = 0,
        resume_token: str = "",
        timeout: timedelta | None = None,
        show_upcoming: bool = False,
    ) -> Iterator[RunChanges]:
        """The matching runs now (the first message), then each change as it is committed, for as long as
        the iterator is read. Each message's `resume_token` starts a later stream just after it; a stream
        the server cuts (`UNAVAILABLE`, or `RESOURCE_EXHAUSTED` when it fell behind) resumes so, as the
        retry policy allows. `timeout` bounds the whole watch: when it passes, the iteration ends (as
        `jobmesh runs watch --timeout` exits 0); other errors raise."""
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
                for changes in call:
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
            retry_number = self._pause_or_raise(error, retry_number)

    def _pause_or_raise(self, error: JobmeshError, retry_number: int) -> int:
        """Sleeps before a stream is opened again, or raises `error` when it is not retried."""
        wait = retry_wait(self.config.retry, error, retry_number)
        if wait is None:
            raise error
        time.sleep(wait)
        return retry_number + 1


def _pages(page: Callable[[str], tuple[list[T], str]]) -> Iterator[T]:
    token = ""
    while True:
        items, token = page(token)
        yield from items
        if not token:
            return


def _ignore(_: Run) -> None:
    return None
