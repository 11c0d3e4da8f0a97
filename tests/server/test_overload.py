"""Overload, on every store: with every write thread held by slow creates, reads are still answered, and
creates past the limit of jobs in creation are refused at once with RESOURCE_EXHAUSTED and a RetryInfo,
while the creates already accepted succeed; creates are refused too while an executor's message waits in the
server longer than its limit."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any, cast

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.ports.store import CreateJobOutcome, NewJob
from jobmesh.server.app import Services, build_services
from jobmesh.server.config import ServerConfig
from jobmesh.server.workers import WRITE_THREADS
from jobmesh.v1 import job_pb2, job_service_pb2
from tests.server.conftest import Api
from tests.server.errors import call_error, error_info
from tests.support import eventually

LIMIT = 1000
RETRY_AFTER = timedelta(seconds=2)
MAX_STREAM_LAG = timedelta(milliseconds=200)
MAX_LOOP_LAG = timedelta(seconds=1)  # past what a loaded test machine shows, lest other tests meet it


class HeldStore:
    """The store, but creates wait until `release` is set (a database that has slowed to a crawl); `waiting`
    counts the transactions held."""

    def __init__(self, store: SchedulerStore) -> None:
        self._store = store
        self.release = threading.Event()
        self.release.set()
        self.waiting = 0

    def create_jobs(self, items: Sequence[NewJob]) -> list[CreateJobOutcome]:
        self.waiting += 1
        try:
            assert self.release.wait(30), "the test never released the creates"
        finally:
            self.waiting -= 1
        return self._store.create_jobs(items)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture(scope="module")
def held(store: SchedulerStore) -> HeldStore:
    return HeldStore(store)


@pytest.fixture(scope="module")
def grpc_servicer(held: HeldStore) -> Iterator[Services]:
    names = f"memory://overload-{uuid.uuid4().hex[:8]}"
    queue, signals = open_queue(names), open_signals(names)
    config = ServerConfig(
        listen="127.0.0.1:0",
        max_pending_creates=LIMIT,
        retry_after=RETRY_AFTER,
        max_stream_lag=MAX_STREAM_LAG,
        max_loop_lag=MAX_LOOP_LAG,
        quota_cron_jobs=0,  # the flood of creates is refused by the server's load, not by a quota
    )
    services = build_services(config, cast(SchedulerStore, held), queue, signals)
    yield services
    services.close()
    signals.close()
    queue.close()


def one_job() -> job_service_pb2.CreateJobRequest:
    job = job_pb2.Job(target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])))
    job.schedule.cron.expression = "0 0 1 1 *"  # once a year: nothing runs meanwhile
    return job_service_pb2.CreateJobRequest(job=job)


def test_past_the_limit_creates_are_refused_at_once_and_reads_are_answered(
    api: Api, held: HeldStore, grpc_servicer: Services, caplog: pytest.LogCaptureFixture
) -> None:
    existing = api.jobs.CreateJob(one_job()).job.name
    held.release.clear()
    with ThreadPoolExecutor(WRITE_THREADS) as pool:
        try:
            accepted: list[Future[job_service_pb2.CreateJobResponse]] = [
                pool.submit(api.jobs.CreateJob, one_job(), timeout=30) for _ in range(WRITE_THREADS)
            ]
            # Every write thread is taken by a create: one in the store, held, the others queued behind it
            # for the next transaction (group commit).
            eventually(
                lambda: grpc_servicer.workers.pending_creates == WRITE_THREADS and held.waiting == 1,
                10,
                "every write thread taken by a create",
            )
            # A read does not wait for a write thread.
            got = api.jobs.GetJob(job_service_pb2.GetJobRequest(name=existing), timeout=5).job
            assert got.name == existing
            # These would pass the limit: refused, not queued.
            batch = job_service_pb2.BatchCreateJobsRequest(requests=[one_job() for _ in range(LIMIT)])
            refused = call_error(
                lambda: api.jobs.BatchCreateJobs(batch, timeout=5), grpc.StatusCode.RESOURCE_EXHAUSTED
            )
            assert error_info(refused).reason == "SERVER_OVERLOADED"
            assert retry_delay(refused) == RETRY_AFTER
            said = [r for r in caplog.records if r.name == "jobmesh.server.workers"]
            assert [vars(r)["reason"] for r in said] == ["pending_creates"]  # logged, at most once a while
        finally:
            held.release.set()
        assert all(future.result().job.name for future in accepted)
    response = api.jobs.BatchCreateJobs(batch, timeout=30)  # room again
    assert len(response.results) == LIMIT
    assert grpc_servicer.workers.pending_creates == 0


def test_while_an_executors_message_waits_past_the_limit_creates_are_refused(
    api: Api, grpc_servicer: Services
) -> None:
    lag = grpc_servicer.stream_lag
    token = lag.arrived()  # a claim the server has not got round to
    try:
        # A loaded machine may also run the loop late, a refusal of its own: the one looked for names the lag.
        refused = eventually(lambda: _refused_for(api, "executors' messages wait"), 10, "a create refused")
        assert error_info(refused).reason == "SERVER_OVERLOADED"
        assert retry_delay(refused) == RETRY_AFTER
    finally:
        lag.answered(token)
    eventually(lambda: _create_refused(api) is None, 10, "a create accepted again")  # the lag is behind it


def _create_refused(api: Api) -> grpc.RpcError | None:
    try:
        api.jobs.CreateJob(one_job(), timeout=5)
    except grpc.RpcError as error:
        refused = error
    else:
        return None
    assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused
    return refused


def _refused_for(api: Api, why: str) -> grpc.RpcError | None:
    refused = _create_refused(api)
    return refused if refused is not None and why in (refused.details() or "") else None


def retry_delay(error: grpc.RpcError) -> timedelta:
    status = rpc_status.from_call(error)
    assert status is not None
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            delay: timedelta = info.retry_delay.ToTimedelta()
            return delay
    raise AssertionError("no RetryInfo in the status")


def test_while_the_servers_event_loop_runs_late_creates_are_refused(
    api: Api, grpc_servicer: Services
) -> None:
    loop = grpc_servicer.loop_lag.loop()
    blocked = threading.Event()

    def block() -> None:  # what a process out of CPU looks like to its loop
        blocked.set()
        time.sleep(MAX_LOOP_LAG.total_seconds() * 3)

    loop.call_soon_threadsafe(block)
    blocked.wait(10)
    refused = call_error(
        lambda: api.jobs.CreateJob(one_job(), timeout=10), grpc.StatusCode.RESOURCE_EXHAUSTED
    )
    assert error_info(refused).reason == "SERVER_OVERLOADED"
    assert "behind" in (refused.details() or "")
    assert retry_delay(refused) == RETRY_AFTER
    eventually(lambda: _create_refused(api) is None, 10, "a create accepted again")  # the loop caught up


def test_after_a_pause_creates_are_accepted_once_the_loop_is_on_time(
    api: Api, grpc_servicer: Services
) -> None:
    """A pause of the whole process (SIGSTOP, a frozen VM) looks to the loop like a stall. Once the loop's
    probes run on time again, creates are not refused for it: before, the stall was counted for a whole
    second after the thaw, and every create in that second was refused."""
    loop = grpc_servicer.loop_lag.loop()
    thawed = threading.Event()

    def pause() -> None:
        time.sleep(MAX_LOOP_LAG.total_seconds() * 3)
        thawed.set()

    loop.call_soon_threadsafe(pause)
    assert thawed.wait(10)
    time.sleep(0.5)
    assert _create_refused(api) is None
