"""With 5,000 runs on a real mesh (server, watcher and executor processes on PostgreSQL, Kafka and Redis),
the counts the board shows, pushed on `WatchRuns` (`include_run_counts`), and those of `CountRuns` equal
what `ListRuns` lists with each state's filter: runs that succeeded, failed or were dead-lettered through the
executor, cancelled ones, and upcoming ones apart."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import grpc
import pytest

from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2, search_service_pb2_grpc
from tests.acceptance.mesh import Mesh, at, command_job, warm_up
from tests.support import eventually

pytestmark = pytest.mark.processes

ALL = "jobs/-"
SUCCEEDING = 700
FAILING = 150  # no retry: FAILED
DEAD = 150  # two attempts, both failing: DEAD_LETTERED
CANCELLED = 500  # made for an hour from now, then cancelled
UPCOMING = 5000 - SUCCEEDING - FAILING - DEAD - CANCELLED - 1  # the warm-up run is the 5,000th
STATES: list[run_pb2.RunState.ValueType] = [
    state for state in run_pb2.RunState.values() if state != run_pb2.RUN_STATE_UNSPECIFIED
]


def listed(
    search: search_service_pb2_grpc.SearchServiceStub, state: run_pb2.RunState.ValueType, *, upcoming: bool
) -> int:
    """How many runs `ListRuns` lists in `state`, page by page (with or without the upcoming ones)."""
    name = run_pb2.RunState.Name(state).removeprefix("RUN_STATE_")
    total, token = 0, ""
    while True:
        request = search_service_pb2.ListRunsRequest(
            parent=ALL, filter=f"state = {name}", page_size=1000, page_token=token, show_upcoming=upcoming
        )
        page = search.ListRuns(request)
        total += len(page.runs)
        token = page.next_page_token
        if not token:
            return total


def by_state(counts: search_service_pb2.RunCounts) -> Counter[int]:
    totals: Counter[int] = Counter()
    for count in counts.counts:
        totals[count.state] += count.run_count
    return totals


class BoardCounts:
    """What the board holds: the latest counts a `WatchRuns` stream with `include_run_counts` brought."""

    def __init__(self, search: search_service_pb2_grpc.SearchServiceStub) -> None:
        request = search_service_pb2.WatchRunsRequest(parent=ALL, include_run_counts=True)
        self._stream = search.WatchRuns(request)
        self.latest: search_service_pb2.RunCounts | None = None
        self.messages = 0
        self.ended: grpc.RpcError | None = None
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        try:
            for message in self._stream:
                if message.HasField("run_counts"):
                    self.latest = message.run_counts
                    self.messages += 1
        except grpc.RpcError as error:
            self.ended = error

    def close(self) -> None:
        """Ends the stream; it must not have ended otherwise."""
        self._stream.cancel()
        self._thread.join(timeout=10)
        assert self.ended is None or self.ended.code() == grpc.StatusCode.CANCELLED, self.ended


def batches(jobs: list[job_pb2.Job]) -> list[job_service_pb2.BatchCreateJobsRequest]:
    requests = [job_service_pb2.CreateJobRequest(job=job) for job in jobs]
    return [
        job_service_pb2.BatchCreateJobsRequest(requests=requests[start : start + 1000])
        for start in range(0, len(requests), 1000)
    ]


def test_with_5000_runs_the_boards_counts_equal_list_runs_totals(mesh: Mesh) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server, concurrency=32)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    board = BoardCounts(search)
    try:
        later = job_pb2.Schedule()
        later.run_at.FromDatetime(at(3600))
        retried = job_pb2.RetryPolicy(max_attempts=2)
        retried.initial_backoff.FromTimedelta(timedelta(milliseconds=100))
        made = [
            *(command_job(mesh.queue, "true") for _ in range(SUCCEEDING)),
            *(command_job(mesh.queue, "exit 3") for _ in range(FAILING)),
            *(command_job(mesh.queue, "exit 3", retry_policy=retried) for _ in range(DEAD)),
            *(command_job(mesh.queue, "true", schedule=later) for _ in range(CANCELLED + UPCOMING)),
        ]
        created = []
        for request in batches(made):
            answer = jobs.BatchCreateJobs(request)
            assert all(result.status.code == 0 for result in answer.results)
            created += [result.run.name for result in answer.results]
        assert len(created) == 5000 - 1
        for name in created[-CANCELLED:]:
            jobs.CancelRun(job_service_pb2.CancelRunRequest(name=name))

        def settled() -> bool:
            counts = search.CountRuns(search_service_pb2.CountRunsRequest(parent=ALL)).run_counts
            totals = by_state(counts)
            ended = SUCCEEDING + 1 + FAILING + DEAD
            done = totals[run_pb2.RUN_STATE_SUCCEEDED] + totals[run_pb2.RUN_STATE_FAILED]
            return done + totals[run_pb2.RUN_STATE_DEAD_LETTERED] == ended

        eventually(settled, 300, "the executed runs to end")
        counts = search.CountRuns(search_service_pb2.CountRunsRequest(parent=ALL)).run_counts
        totals = by_state(counts)
        for state in STATES:
            assert totals[state] == listed(search, state, upcoming=False), run_pb2.RunState.Name(state)
        upcoming = sum(count.upcoming_run_count for count in counts.counts)
        scheduled = listed(search, run_pb2.RUN_STATE_SCHEDULED, upcoming=True)
        assert upcoming == scheduled - totals[run_pb2.RUN_STATE_SCHEDULED] == UPCOMING
        assert totals[run_pb2.RUN_STATE_SUCCEEDED] == SUCCEEDING + 1
        assert totals[run_pb2.RUN_STATE_CANCELLED] == CANCELLED
        assert totals[run_pb2.RUN_STATE_FAILED] + totals[run_pb2.RUN_STATE_DEAD_LETTERED] == FAILING + DEAD
        assert sum(totals.values()) + upcoming == 5000
        # The board's counts, pushed as they changed, come to the same, with far fewer messages than runs.
        eventually(
            lambda: board.latest is not None and board.latest.counts == counts.counts,
            30,
            "the board's counts to equal CountRuns",
        )
        assert board.messages < 1000
    finally:
        board.close()
    # The counts live in the store: the server killed, another one reads the same.
    server.kill()
    again = mesh.server("server-2")
    _, search_again = mesh.stubs(again)
    assert (
        search_again.CountRuns(search_service_pb2.CountRunsRequest(parent=ALL)).run_counts.counts
        == counts.counts
    )
