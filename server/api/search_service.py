"""`jobmesh.v1.SearchService` over gRPC."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import grpc

from jobmesh.core.errors import InvalidArgument
from jobmesh.core.records import RunRecord
from jobmesh.core.timestamps import to_timestamp, utcnow
from jobmesh.server.api.resources import job_to_proto, log_to_proto, run_to_proto
from jobmesh.server.api.status import server_streaming, unary
from jobmesh.server.job_queries import JobQueries
from jobmesh.server.schedule_preview import preview_schedule
from jobmesh.v1 import search_service_pb2 as pb
from jobmesh.v1 import search_service_pb2_grpc

Context = grpc.aio.ServicerContext[Any, Any]
POLL_INTERVAL = 0.5
WATCH_BATCH = 500


class SearchService(search_service_pb2_grpc.SearchServiceServicer):
    def __init__(self, queries: JobQueries, poll_interval: float = POLL_INTERVAL) -> None:
        self._queries = queries
        self._poll_interval = poll_interval

    @unary
    async def ListJobs(self, request: pb.ListJobsRequest, context: Context) -> pb.ListJobsResponse:
        page = await asyncio.to_thread(self._queries.list_jobs, request)
        return pb.ListJobsResponse(
            jobs=[job_to_proto(job) for job in page.items], next_page_token=page.next_page_token
        )

    @unary
    async def ListRuns(self, request: pb.ListRunsRequest, context: Context) -> pb.ListRunsResponse:
        page = await asyncio.to_thread(self._queries.list_runs, request)
        return pb.ListRunsResponse(
            runs=[run_to_proto(run) for run in page.items], next_page_token=page.next_page_token
        )

    @unary
    async def GetRun(self, request: pb.GetRunRequest, context: Context) -> pb.GetRunResponse:
        run = await asyncio.to_thread(self._queries.get_run, request.name)
        return pb.GetRunResponse(run=run_to_proto(run))

    @server_streaming
    async def WatchRuns(
        self, request: pb.WatchRunsRequest, context: Context
    ) -> AsyncIterator[pb.WatchRunsResponse]:
        if request.initial_page_size < 0:
            raise InvalidArgument.single("initial_page_size", "must not be negative")
        first = pb.ListRunsRequest(
            parent=request.parent,
            filter=request.filter,
            page_size=min(request.initial_page_size or 50, 1000),
            order_by="update_time desc",
        )
        page = await asyncio.to_thread(self._queries.list_runs, first)
        yield pb.WatchRunsResponse(runs=[run_to_proto(run) for run in reversed(page.items)])
        watermark = max((run.update_time for run in page.items), default=None)
        seen = {(run.run_id, run.update_time) for run in page.items}
        while True:
            await asyncio.sleep(self._poll_interval)
            changed = await asyncio.to_thread(self._changes_since, request, watermark)
            fresh = [run for run in changed if (run.run_id, run.update_time) not in seen]
            if changed:
                watermark = changed[-1].update_time
                seen = {(run.run_id, run.update_time) for run in changed if run.update_time == watermark}
            if fresh:
                yield pb.WatchRunsResponse(runs=[run_to_proto(run) for run in fresh])

    def _changes_since(self, request: pb.WatchRunsRequest, watermark: datetime | None) -> list[RunRecord]:
        condition = request.filter
        if watermark is not None:
            since = f'update_time >= "{to_timestamp(watermark).ToJsonString()}"'
            condition = f"{condition} AND {since}" if condition.strip() else since
        query = pb.ListRunsRequest(
            parent=request.parent, filter=condition, page_size=WATCH_BATCH, order_by="update_time"
        )
        return self._queries.list_runs(query).items

    @server_streaming
    async def TailRunLogs(
        self, request: pb.TailRunLogsRequest, context: Context
    ) -> AsyncIterator[pb.TailRunLogsResponse]:
        after = request.after_sequence
        while True:
            run = await asyncio.to_thread(self._queries.get_run, request.name)
            lines = await asyncio.to_thread(self._queries.list_logs, request.name, after)
            if lines:
                after = lines[-1].sequence
                yield pb.TailRunLogsResponse(lines=[log_to_proto(line) for line in lines])
                continue
            if not request.follow or run.state.is_terminal:
                return
            await asyncio.sleep(self._poll_interval)

    @unary
    async def PreviewSchedule(
        self, request: pb.PreviewScheduleRequest, context: Context
    ) -> pb.PreviewScheduleResponse:
        return await asyncio.to_thread(preview_schedule, request, utcnow())
