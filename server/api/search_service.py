"""`jobmesh.v1.SearchService` over gRPC."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import grpc

from jobmesh.core.errors import ResourceExhausted
from jobmesh.core.ports.store import FeedCursor, RunChange
from jobmesh.core.run_counts import RunCounts
from jobmesh.core.timestamps import utcnow
from jobmesh.server.admission.stream_slots import StreamSlots, caller_of
from jobmesh.server.api.count_feed import CountFeed, CountFollower
from jobmesh.server.api.feed import FeedSubscription, FellBehind, RunFeed
from jobmesh.server.api.job_queries import JobQueries
from jobmesh.server.api.resources import (
    audit_event_to_proto,
    job_to_proto,
    log_to_proto,
    run_counts_to_proto,
    run_to_proto,
)
from jobmesh.server.api.resume_tokens import decode_resume_token, encode_resume_token
from jobmesh.server.api.schedule_preview import preview_schedule
from jobmesh.server.api.validation import clamp_page_size
from jobmesh.server.auth.authorization import Access, access_to
from jobmesh.server.principals import current_principal
from jobmesh.server.status import server_streaming, unary
from jobmesh.server.workers import Workers
from jobmesh.v1 import run_pb2, search_service_pb2_grpc
from jobmesh.v1 import search_service_pb2 as pb

Context = grpc.aio.ServicerContext[Any, Any]
_RPC = f"/{pb.DESCRIPTOR.services_by_name['SearchService'].full_name}/"
# A WatchRuns message: small enough for any client's default limit (4 MiB).
MESSAGE_RUNS = 500
MESSAGE_BYTES = 1024 * 1024
STREAM_FELL_BEHIND = "STREAM_FELL_BEHIND"


class SearchService(search_service_pb2_grpc.SearchServiceServicer):
    def __init__(
        self, queries: JobQueries, workers: Workers, feed: RunFeed, slots: StreamSlots, counts: CountFeed
    ) -> None:
        self._queries = queries
        self._workers = workers
        self._feed = feed
        self._slots = slots
        self._counts = counts

    @unary
    async def ListJobs(self, request: pb.ListJobsRequest, context: Context) -> pb.ListJobsResponse:
        page = await self._workers.read(self._queries.list_jobs, request, access_to(_RPC + "ListJobs"))
        return pb.ListJobsResponse(
            jobs=[job_to_proto(job) for job in page.items], next_page_token=page.next_page_token
        )

    @unary
    async def ListRuns(self, request: pb.ListRunsRequest, context: Context) -> pb.ListRunsResponse:
        page = await self._workers.read(self._queries.list_runs, request, access_to(_RPC + "ListRuns"))
        return pb.ListRunsResponse(
            runs=[run_to_proto(run) for run in page.items], next_page_token=page.next_page_token
        )

    @unary
    async def GetRun(self, request: pb.GetRunRequest, context: Context) -> pb.GetRunResponse:
        run = await self._workers.read(self._queries.get_run, request.name, access_to(_RPC + "GetRun"))
        return pb.GetRunResponse(run=run_to_proto(run))

    @server_streaming
    async def WatchRuns(
        self, request: pb.WatchRunsRequest, context: Context
    ) -> AsyncIterator[pb.WatchRunsResponse]:
        access = access_to(_RPC + "WatchRuns")
        job_id, comparisons = await self._workers.read(self._queries.runs_to_watch, request, access)
        after = decode_resume_token(request.resume_token) if request.resume_token else None
        with self._slots.held(context.peer(), caller_of(current_principal())):
            watching = self._feed.watching(
                job_id, comparisons, after, access.readable(), show_upcoming=request.show_upcoming
            )
            async with watching as watcher, self._counts_for(request) as counts:
                first = (
                    await self._initial_page(request, watcher.cursor, access)
                    if after is None
                    else pb.WatchRunsResponse(resume_token=encode_resume_token(watcher.cursor))
                )
                visible = None
                if counts is not None:
                    visible = counts.counts.visible_to(access.readable())
                    first.run_counts.CopyFrom(run_counts_to_proto(visible))
                yield first
                try:
                    async with contextlib.aclosing(_changes_and_counts(watcher, counts)) as stream:
                        async for changes in stream:
                            if isinstance(changes, list):
                                for message in _messages(changes):
                                    yield message
                                continue
                            seen = changes.visible_to(access.readable())
                            if not seen.same_counts(visible):
                                visible = seen
                                yield pb.WatchRunsResponse(
                                    resume_token=encode_resume_token(watcher.cursor),
                                    run_counts=run_counts_to_proto(seen),
                                )
                except FellBehind as behind:
                    raise ResourceExhausted(
                        "the stream fell behind the changes it asked for: resume from resume_token",
                        reason=STREAM_FELL_BEHIND,
                        metadata={"resume_token": encode_resume_token(behind.cursor)},
                    ) from None

    def _counts_for(self, request: pb.WatchRunsRequest) -> AbstractAsyncContextManager[CountFollower | None]:
        return self._counts.following() if request.include_run_counts else contextlib.nullcontext(None)

    @unary
    async def CountRuns(self, request: pb.CountRunsRequest, context: Context) -> pb.CountRunsResponse:
        access = access_to(_RPC + "CountRuns")
        counts = await self._workers.read(self._queries.count_runs, request, access)
        return pb.CountRunsResponse(run_counts=run_counts_to_proto(counts))

    async def _initial_page(
        self, request: pb.WatchRunsRequest, cursor: FeedCursor, access: Access
    ) -> pb.WatchRunsResponse:
        """The runs that match now, newest first (read after the stream joined the feed: a change meanwhile
        comes again as a change)."""
        first = pb.ListRunsRequest(
            parent=request.parent,
            filter=request.filter,
            page_size=clamp_page_size(request.initial_page_size),
            order_by="update_time desc",
            show_upcoming=request.show_upcoming,
        )
        page = await self._workers.read(self._queries.list_runs, first, access)
        return pb.WatchRunsResponse(
            runs=[run_to_proto(run) for run in reversed(page.items)], resume_token=encode_resume_token(cursor)
        )

    @server_streaming
    async def TailRunLogs(
        self, request: pb.TailRunLogsRequest, context: Context
    ) -> AsyncIterator[pb.TailRunLogsResponse]:
        after = request.after_sequence
        access = access_to(_RPC + "TailRunLogs")
        with self._slots.held(context.peer(), caller_of(current_principal())):
            async with self._feed.log_waker() as woken:
                while True:
                    woken.clear()  # before reading: what is written meanwhile wakes the next wait
                    run = await self._workers.read(self._queries.get_run, request.name, access)
                    lines = await self._workers.read(self._queries.list_logs, request.name, after)
                    if lines:
                        after = lines[-1].sequence
                        yield pb.TailRunLogsResponse(lines=[log_to_proto(line) for line in lines])
                        continue
                    if not request.follow or run.state.is_terminal:
                        return
                    await woken.wait()

    @unary
    async def PreviewSchedule(
        self, request: pb.PreviewScheduleRequest, context: Context
    ) -> pb.PreviewScheduleResponse:
        access_to(_RPC + "PreviewSchedule")  # a role in some namespace
        return await self._workers.read(preview_schedule, request, utcnow())

    @unary
    async def ListAuditEvents(
        self, request: pb.ListAuditEventsRequest, context: Context
    ) -> pb.ListAuditEventsResponse:
        access = access_to(_RPC + "ListAuditEvents")
        page = await self._workers.read(self._queries.list_audit_events, request, access)
        return pb.ListAuditEventsResponse(
            audit_events=[audit_event_to_proto(event) for event in page.items],
            next_page_token=page.next_page_token,
        )


async def _changes_and_counts(
    watcher: FeedSubscription, counts: CountFollower | None
) -> AsyncGenerator[list[RunChange] | RunCounts]:
    """The watcher's batches of changes and, given a follower, the counts whenever they changed, as they
    come."""
    changes = watcher.changes()
    if counts is None:
        async for batch in changes:
            yield batch
        return
    next_batch = asyncio.ensure_future(anext(changes))
    next_counts = asyncio.ensure_future(counts.next_counts())
    try:
        while True:
            await asyncio.wait((next_batch, next_counts), return_when=asyncio.FIRST_COMPLETED)
            if next_batch.done():
                yield next_batch.result()  # FellBehind raises here
                next_batch = asyncio.ensure_future(anext(changes))
            if next_counts.done():
                yield next_counts.result()
                next_counts = asyncio.ensure_future(counts.next_counts())
    finally:
        for pending in (next_batch, next_counts):
            pending.cancel()
        await asyncio.gather(next_batch, next_counts, return_exceptions=True)
        await changes.aclose()


def _messages(changes: list[RunChange]) -> Iterator[pb.WatchRunsResponse]:
    """Changes as messages of at most MESSAGE_RUNS runs and about MESSAGE_BYTES, each with its token."""
    runs: list[run_pb2.Run] = []
    size = 0
    for index, change in enumerate(changes):
        run = run_to_proto(change.run)
        runs.append(run)
        size += run.ByteSize()
        if len(runs) == MESSAGE_RUNS or size >= MESSAGE_BYTES or index == len(changes) - 1:
            yield pb.WatchRunsResponse(runs=runs, resume_token=encode_resume_token(change.cursor))
            runs, size = [], 0
