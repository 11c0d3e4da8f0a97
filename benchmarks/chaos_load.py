"""The chaos run's load: a creator paced by the wall clock, in a thread of its own.

Job `n` is offered at `t0 + n / rate`: even ones immediate, odd ones `run_at` 2 to 5 s after their offer;
every `tick` the due ones go out in one `BatchCreateJobs` call, not awaited (a stopped server makes calls
pile up, never the offered load slow down). Before t0, cron jobs every 1, 2 or 5 seconds (6-field
expressions) from t0 to the end of the load, their occurrences run side by side and caught up after an
outage. Now and then, and when the executor fault asks, a long command (`sleep`, stamping itself each
second). Every job but the long commands runs the `chaos.stamp` handler; every job may take 5 attempts.

Each acknowledged create is kept (`Created`): its kind, its job and run, and the schedule time the server
gave it; failed creates are counted by their status code. Creates are not retried.
"""

from __future__ import annotations

import math
import shlex
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from benchmarks.chaos_faults import LONG_MARKER
from jobmesh.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc

HANDLER = "chaos.stamp"
MAX_BATCH = 1000
CALL_TIMEOUT = 30.0  # seconds a create call may take (a stopped server included); then not acknowledged
CRON_PERIODS = (1, 2, 5)
MAX_AHEAD = 5  # seconds: the latest run_at, after its offer
ATTEMPTS = 5
CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


@dataclass(frozen=True, slots=True)
class Created:
    kind: str  # immediate, run_at, cron, long
    job: str
    run: str  # empty for a cron job (its runs are the watcher's)
    schedule_ns: int  # the run's schedule time (a cron job's: its start)
    submit_ns: int
    ack_ns: int
    tag: str = ""  # a long command's: its records' file
    period_s: int = 0  # a cron job's
    end_ns: int = 0  # a cron job's end


def ahead_s(n: int) -> int:
    return 2 + (n // 2) % (MAX_AHEAD - 1)


def _policies(job: job_pb2.Job) -> job_pb2.Job:
    job.retry_policy.max_attempts = ATTEMPTS
    job.retry_policy.initial_backoff.FromSeconds(1)
    return job


def handler_job(queue: str) -> job_pb2.Job:
    target = job_pb2.Target(handler=job_pb2.Target.Handler(name=HANDLER))
    return _policies(job_pb2.Job(queue=queue, target=target))


def long_job(queue: str, records: Path, tag: str, seconds: int) -> job_pb2.Job:
    """`sh -c`: stamps its start, then `alive` every second for `seconds`, then its end, in `records/tag`."""
    path = shlex.quote(str(records / tag))
    script = (
        f'f={path}; s=$(date +%s%N); echo "$s start" >> $f; i=0; '
        f'while [ $i -lt {seconds} ]; do sleep 1; echo "$s alive $(date +%s%N)" >> $f; i=$((i+1)); done; '
        f'echo "$s end $(date +%s%N)" >> $f'
    )
    target = job_pb2.Target(command=job_pb2.Target.Command(argv=["sh", "-c", script, tag]))
    job = _policies(job_pb2.Job(queue=queue, target=target))
    job.schedule.immediate.SetInParent()
    return job


def cron_job(queue: str, period: int, start_ns: int, end_ns: int) -> job_pb2.Job:
    job = handler_job(queue)
    cron = job.schedule.cron
    cron.expression = "* * * * * *" if period == 1 else f"*/{period} * * * * *"
    cron.start_time.FromNanoseconds(start_ns)
    cron.end_time.FromNanoseconds(end_ns)
    cron.overlap_policy = job_pb2.OVERLAP_POLICY_ALLOW_ALL
    cron.catchup_window.FromSeconds(600)
    return job


class Creator:
    """Offers the load from `t0` until `stop()`; `created` and `failed` are read once it has joined."""

    def __init__(
        self,
        stub: job_service_pb2_grpc.JobServiceStub,
        queue: str,
        rate: float,
        records: Path,
        *,
        long_every: float,
        long_seconds: int,
        tick: float = 0.1,
    ) -> None:
        self._stub = stub
        self._queue = queue
        self._rate = rate
        self._records = records
        self._long_every = long_every
        self._long_seconds = long_seconds
        self._tick = tick
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._long_wanted = 0
        self._longs = 0
        self._futures: list[grpc.Future[Any]] = []
        self._thread = threading.Thread(target=self._offer, name="creator", daemon=True)
        self.t0 = 0.0
        self.offered = 0
        self.created: list[Created] = []
        self.failed: Counter[str] = Counter()

    # ------------------------------------------------------------ cron jobs, before t0

    def create_cron(self, count: int, start_ns: int, end_ns: int) -> None:
        for index in range(count):
            period = CRON_PERIODS[index % len(CRON_PERIODS)]
            request = job_service_pb2.CreateJobRequest(job=cron_job(self._queue, period, start_ns, end_ns))
            submit = time.time_ns()
            response = self._stub.CreateJob(request, timeout=30)
            self.created.append(
                Created("cron", response.job.name, "", start_ns, submit, time.time_ns(), "", period, end_ns)
            )

    # ------------------------------------------------------------ the paced load

    def start(self, t0: float) -> None:
        self.t0 = t0
        self._thread.start()

    def submit_long(self, count: int) -> None:
        with self._lock:
            self._long_wanted += count

    def stop(self, answers_within: float = CALL_TIMEOUT + 5) -> None:
        """Ends the offer and waits (bounded) for the answers still owed."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        deadline = time.monotonic() + answers_within
        for future in list(self._futures):
            if not future.done():
                try:
                    future.result(timeout=max(deadline - time.monotonic(), 0.01))
                except (grpc.RpcError, grpc.FutureTimeoutError):
                    pass
                except Exception:  # a cancelled call: counted by its callback
                    future.cancel()

    def _offer(self) -> None:
        position = 0
        next_long = self.t0 + self._long_every / 2
        while not self._stopping.is_set():
            now = time.time()
            due = max(0, math.floor((now - self.t0) * self._rate) + 1)
            while position < due:
                batch = list(range(position, min(due, position + MAX_BATCH)))
                position += len(batch)
                self._send(batch)
            if self._long_every > 0 and now >= next_long:
                next_long += self._long_every
                self.submit_long(1)
            with self._lock:
                longs, self._long_wanted = self._long_wanted, 0
            for _ in range(longs):
                self._send_long()
            self._stopping.wait(
                max(self.t0 + (math.floor((now - self.t0) / self._tick) + 1) * self._tick - time.time(), 0.0)
            )
        self.offered = position

    def _send(self, batch: list[int]) -> None:
        requests, kinds = [], []
        for n in batch:
            job = handler_job(self._queue)
            if n % 2 == 0:
                job.schedule.immediate.SetInParent()
                kinds.append("immediate")
            else:
                offered_ns = round((self.t0 + n / self._rate) * 1e9)
                job.schedule.run_at.FromNanoseconds(offered_ns + ahead_s(n) * 10**9)
                kinds.append("run_at")
            requests.append(job_service_pb2.CreateJobRequest(job=job))
        submit = time.time_ns()
        future = self._stub.BatchCreateJobs.future(
            job_service_pb2.BatchCreateJobsRequest(requests=requests), timeout=CALL_TIMEOUT
        )
        self._futures.append(future)
        future.add_done_callback(lambda done: self._answered(done, kinds, submit, ""))

    def _send_long(self) -> None:
        with self._lock:
            self._longs += 1
            tag = f"{LONG_MARKER}-{self._longs}"
        request = job_service_pb2.CreateJobRequest(
            job=long_job(self._queue, self._records, tag, self._long_seconds)
        )
        submit = time.time_ns()
        future = self._stub.BatchCreateJobs.future(
            job_service_pb2.BatchCreateJobsRequest(requests=[request]), timeout=CALL_TIMEOUT
        )
        self._futures.append(future)
        future.add_done_callback(lambda done: self._answered(done, ["long"], submit, tag))

    def _answered(self, done: grpc.Future[Any], kinds: list[str], submit: int, tag: str) -> None:
        answered = time.time_ns()
        try:
            results = list(done.result().results)
        except grpc.RpcError as error:
            code = error.code().name if isinstance(error, grpc.Call) else "UNKNOWN"
            with self._lock:
                self.failed[code] += len(kinds)
            return
        except Exception as error:  # cancelled at the end: not acknowledged
            with self._lock:
                self.failed[type(error).__name__] += len(kinds)
            return
        created = []
        for kind, result in zip(kinds, results, strict=False):
            if result.status.code != 0 or not result.run.name:
                with self._lock:
                    self.failed[CODE_NAMES.get(result.status.code, str(result.status.code))] += 1
                continue
            schedule = result.run.schedule_time.ToNanoseconds()
            created.append(Created(kind, result.job.name, result.run.name, schedule, submit, answered, tag))
        with self._lock:
            self.created.extend(created)
            if len(results) < len(kinds):
                self.failed["NO_RESULT"] += len(kinds) - len(results)
