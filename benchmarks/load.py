"""The pipeline benchmark's load: sender processes that offer jobs at a fixed rate, paced by the wall clock.

Job `n` (0 <= n < rate * duration) is offered at `t0 + n / rate`; sender `i` of `k` offers the jobs with
`n % k == i`. Every `tick` seconds a sender sends, in `BatchCreateJobs` calls of at most 1,000, every job of
its share whose instant has come. Calls are asynchronous (gRPC futures, none awaited until the window is
over), so a slow server cannot slow the offered load: it only makes calls pile up. A share of the jobs is
scheduled (`run_at` = offered instant + `ahead`), the rest immediate; both run the `bench.stamp` handler.

Each sender writes one line per job to its output file:
`n kind offered_ns submit_ns answer_ns status run_name schedule_ns` (kind `i` or `s`; status 0 when created).

With `jobs_per_call` 1 a sender instead makes one `CreateJob` call a job, as a service inside a mesh does,
from `callers` callers of its own: a job whose instant has come waits for a caller free of its previous call,
so the calls in flight never pass `callers` a sender.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from jobmesh.transport import tls
from jobmesh.transport.tls import ChannelTls
from jobmesh.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc

MAX_BATCH = 1000
HANDLER = "bench.stamp"


@dataclass(frozen=True, slots=True)
class Plan:
    address: str
    queue: str
    duration: float
    rate: float
    scheduled_share: float
    ahead: float
    answer_within: float  # seconds from t0: calls not answered by then are given up (DEADLINE_EXCEEDED)
    tick: float
    senders: int
    index: int
    output: str
    ca_bundle: str = ""  # TLS to the server, verified with this CA bundle; plaintext when empty
    token: str = ""  # sent as a bearer token when given
    jobs_per_call: int = MAX_BATCH  # 1: CreateJob calls; more: BatchCreateJobs calls of at most this many
    callers: int = 8  # with one job a call: calls in flight at most, per sender

    def channel_tls(self) -> ChannelTls | None:
        return ChannelTls(ca_bundle=Path(self.ca_bundle)) if self.ca_bundle else None

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    @property
    def total(self) -> int:
        return round(self.rate * self.duration)


def is_scheduled(n: int, share: float) -> bool:
    """Spreads the scheduled share evenly over the sequence (exactly `share` of every long stretch)."""
    return math.floor((n + 1) * share) > math.floor(n * share)


def job_request(queue: str, run_at_ns: int | None) -> job_service_pb2.CreateJobRequest:
    job = job_pb2.Job(queue=queue, target=job_pb2.Target(handler=job_pb2.Target.Handler(name=HANDLER)))
    if run_at_ns is None:
        job.schedule.immediate.SetInParent()
    else:
        job.schedule.run_at.FromNanoseconds(run_at_ns)
    return job_service_pb2.CreateJobRequest(job=job)


Answer = job_service_pb2.BatchCreateJobsResponse | job_service_pb2.CreateJobResponse


@dataclass(slots=True)
class _Call:
    jobs: list[int]
    submit_ns: int
    # None: not sent, the server having asked for a pause (RESOURCE_EXHAUSTED with a RetryInfo) meanwhile
    future: grpc.Future[Any] | None  # of an `Answer`
    answer_ns: int = 0


@dataclass(slots=True)
class _Backoff:
    """Until when the server asked the senders to hold off (epoch ns), from the last refusal's RetryInfo."""

    until_ns: int = 0

    def refused(self, error: grpc.Call) -> None:
        status = rpc_status.from_call(error) if isinstance(error, grpc.Call) else None
        details: list[any_pb2.Any] = list(status.details) if status is not None else []
        for detail in details:
            if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                info = error_details_pb2.RetryInfo()
                detail.Unpack(info)
                self.until_ns = max(self.until_ns, time.time_ns() + info.retry_delay.ToNanoseconds())


def run_sender(plan: Plan, control: Connection) -> None:
    """A sender process: says `ready`, gets t0 (epoch seconds), offers its share, writes its records, says
    `done`, and waits for `exit` (so that its CPU time can be read while it is alive)."""
    channel = tls.channel(
        plan.address,
        plan.channel_tls(),
        (("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)),
    )
    grpc.channel_ready_future(channel).result(timeout=60)
    stub = job_service_pb2_grpc.JobServiceStub(channel)
    control.send("ready")
    t0: float = control.recv()
    calls = offer(plan, stub, t0)
    errors = write_records(plan, calls, t0)
    control.send(("done", errors))
    control.recv()  # "exit"
    channel.close()


def offer(plan: Plan, stub: job_service_pb2_grpc.JobServiceStub, t0: float) -> list[_Call]:
    mine = range(plan.index, plan.total, plan.senders)
    t0_ns = int(t0 * 1e9)
    calls: list[_Call] = []
    backoff = _Backoff()
    position = 0
    free = threading.BoundedSemaphore(plan.callers)
    while position < len(mine):
        now = time.time()
        if now < t0:
            time.sleep(t0 - now)
            continue
        # jobs n <= (now - t0) * rate are due; of mine, those up to that n
        last_due = math.floor((now - t0) * plan.rate)
        due = min(len(mine), max(0, (last_due - plan.index) // plan.senders + 1))
        while position < due:
            batch = list(mine[position : min(due, position + plan.jobs_per_call)])
            position += len(batch)
            if plan.jobs_per_call == 1:
                free.acquire()
                calls.append(_send_one(plan, stub, batch, t0_ns, backoff, free=free))
            else:
                calls.append(_send(plan, stub, batch, t0_ns, backoff))
        # the next tick is keyed to the clock, not to how long this one took
        next_tick = t0 + (math.floor((now - t0) / plan.tick) + 1) * plan.tick
        time.sleep(max(next_tick - time.time(), 0.0))
    return calls


def _requests(plan: Plan, batch: list[int], t0_ns: int) -> list[job_service_pb2.CreateJobRequest]:
    requests = []
    for n in batch:
        offered_ns = t0_ns + round(n * 1e9 / plan.rate)
        run_at = offered_ns + round(plan.ahead * 1e9) if is_scheduled(n, plan.scheduled_share) else None
        requests.append(job_request(plan.queue, run_at))
    return requests


def _timeout(plan: Plan, t0_ns: int, submit_ns: int) -> float:
    return max(t0_ns / 1e9 + plan.answer_within - submit_ns / 1e9, 1.0)


def _send(
    plan: Plan, stub: job_service_pb2_grpc.JobServiceStub, batch: list[int], t0_ns: int, backoff: _Backoff
) -> _Call:
    if (now_ns := time.time_ns()) < backoff.until_ns:  # the server asked for a pause: refused unsent
        return _Call(batch, now_ns, None, answer_ns=now_ns)
    requests = _requests(plan, batch, t0_ns)
    submit_ns = time.time_ns()
    future = stub.BatchCreateJobs.future(
        job_service_pb2.BatchCreateJobsRequest(requests=requests),
        timeout=_timeout(plan, t0_ns, submit_ns),
        metadata=plan.metadata(),
    )
    call = _Call(batch, submit_ns, future)
    future.add_done_callback(lambda done: _answered(call, done, backoff))
    return call


def _send_one(
    plan: Plan,
    stub: job_service_pb2_grpc.JobServiceStub,
    batch: list[int],
    t0_ns: int,
    backoff: _Backoff,
    *,
    free: threading.BoundedSemaphore,
) -> _Call:
    """One job in one `CreateJob` call; the caller's slot in `free` is given back with the answer."""
    if (now_ns := time.time_ns()) < backoff.until_ns:
        free.release()
        return _Call(batch, now_ns, None, answer_ns=now_ns)
    [request] = _requests(plan, batch, t0_ns)
    submit_ns = time.time_ns()
    future = stub.CreateJob.future(
        request, timeout=_timeout(plan, t0_ns, submit_ns), metadata=plan.metadata()
    )
    call = _Call(batch, submit_ns, future)

    def answered(done: grpc.Future[Any]) -> None:
        _answered(call, done, backoff)
        free.release()

    future.add_done_callback(answered)
    return call


def _answered(call: _Call, done: grpc.Future[Any], backoff: _Backoff) -> None:
    call.answer_ns = time.time_ns()
    error = done.exception()
    if isinstance(error, grpc.Call) and error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
        backoff.refused(error)


HELD_BACK = "held-back"  # the run name recorded for a job its sender held back


class _Unsent(Exception):
    """A batch the sender held back (see `_Backoff`)."""


def write_records(plan: Plan, calls: list[_Call], t0: float) -> int:
    """Waits for every answer and writes one line per job; returns how many creates failed."""
    t0_ns = int(t0 * 1e9)
    errors = 0
    with open(plan.output, "w", encoding="utf-8") as out:
        for call in calls:
            try:
                if call.future is None:
                    raise _Unsent
                results = _results(call.future.result())
            except _Unsent:
                results = [None] * len(call.jobs)
                failed_status = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
            except grpc.RpcError as error:
                code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
                results = [None] * len(call.jobs)
                failed_status = int(code.value[0]) if code is not None else 2
            answer_ns = call.answer_ns or time.time_ns()
            lines = []
            for n, result in zip(call.jobs, results, strict=True):
                kind = "s" if is_scheduled(n, plan.scheduled_share) else "i"
                offered_ns = t0_ns + round(n * 1e9 / plan.rate)
                if result is None:
                    status, name, schedule_ns = failed_status, HELD_BACK if call.future is None else "-", 0
                else:
                    status, name = result.status.code, result.run.name or "-"
                    schedule_ns = result.run.schedule_time.ToNanoseconds() if result.run.name else 0
                errors += status != 0
                lines.append(
                    f"{n} {kind} {offered_ns} {call.submit_ns} {answer_ns} {status} {name} {schedule_ns}\n"
                )
            out.write("".join(lines))
    return errors


def _results(response: Answer) -> list[job_service_pb2.BatchCreateJobsResult | None]:
    if isinstance(response, job_service_pb2.CreateJobResponse):
        return [job_service_pb2.BatchCreateJobsResult(run=response.run)]
    return list(response.results)
