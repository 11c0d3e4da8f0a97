"""Busy executors hold no runs hostage: one executor's 2 slots are busy with long sleeps, a second executor
is idle, and a burst of short jobs is created. Prints how long each took from its create to its start, and
where it ran.

Starts a real `jobmesh server` and two `jobmesh executor`s on PostgreSQL, Kafka and Redis (throwaway services
from `tools/services/services.sh` unless JOBMESH_DATABASE_URL, JOBMESH_KAFKA_BOOTSTRAP and JOBMESH_REDIS_URL
name running ones). The figures and each short job's wait go to a results file (`benchmarks/results_file.py`).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from benchmarks import results_file
from benchmarks.figures import percentile, print_figures
from benchmarks.pipeline import Mesh, throwaway_mesh, wait_serving
from jobmesh.v1 import (
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    run_pb2,
    search_service_pb2,
    search_service_pb2_grpc,
)

T = TypeVar("T")
ALLOWED = {"JOBMESH_ALLOWED_COMMANDS": "/usr/bin/sleep,/usr/bin/true"}  # the jobs' programs only


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.busy_executors", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="short jobs created at once (200)")
    parser.add_argument("--sleep", type=float, default=60.0, help="seconds the busy executor's jobs run (60)")
    parser.add_argument("--idle-slots", type=int, default=16, help="the idle executor's concurrency (16)")
    results_file.add_option(parser)
    return parser.parse_args(argv)


def command(queue: str, *argv: str) -> job_service_pb2.CreateJobRequest:
    job = job_pb2.Job(queue=queue, target=job_pb2.Target(command=job_pb2.Target.Command(argv=list(argv))))
    job.schedule.immediate.SetInParent()
    return job_service_pb2.CreateJobRequest(job=job)


def until(check: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while (value := check()) is None:
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.2)
    return value


class Api:
    def __init__(self, channel: grpc.Channel) -> None:
        self.jobs = job_service_pb2_grpc.JobServiceStub(channel)
        self.search = search_service_pb2_grpc.SearchServiceStub(channel)

    def run(self, name: str) -> run_pb2.Run:
        run: run_pb2.Run = self.search.GetRun(search_service_pb2.GetRunRequest(name=name)).run
        return run

    def in_state(self, names: Sequence[str], state: int) -> list[run_pb2.Run] | None:
        runs = [self.run(name) for name in names]
        return runs if all(run.state == state for run in runs) else None


def measure(
    args: argparse.Namespace, api: Api, queue: str, mesh: Mesh
) -> tuple[dict[str, str], dict[str, Any]]:
    """The figures as printed, and the raw numbers they come from."""
    sleeps = [api.jobs.CreateJob(command(queue, "sleep", f"{args.sleep:g}")).run.name for _ in range(2)]
    until(lambda: api.in_state(sleeps, run_pb2.RUN_STATE_RUNNING), 60, "both sleeps to run on the busy one")
    idle = ["executor", "--server", mesh.address, "--queues", queue, "--concurrency", str(args.idle_slots)]
    mesh.spawn("idle", idle, {"JOBMESH_EXECUTOR_ID": "idle", **ALLOWED})
    probe = api.jobs.CreateJob(command(queue, "true")).run.name
    until(lambda: api.in_state([probe], run_pb2.RUN_STATE_SUCCEEDED), 60, "the idle executor to take runs")
    batch = job_service_pb2.BatchCreateJobsRequest(requests=[command(queue, "true")] * args.jobs)
    names = [result.run.name for result in api.jobs.BatchCreateJobs(batch).results]
    done = until(
        lambda: api.in_state(names, run_pb2.RUN_STATE_SUCCEEDED),
        args.sleep / 2,
        "the short jobs, sleeps running",
    )
    waits = sorted(
        (run.start_time.ToDatetime() - run.create_time.ToDatetime()).total_seconds() for run in done
    )
    where = Counter(run.executor for run in done)
    still = sum(run.state == run_pb2.RUN_STATE_RUNNING for run in map(api.run, sleeps))
    raw = {"create_to_start_s": waits, "runs_per_executor": dict(where), "sleeps_still_running": still}
    return {
        "short jobs": f"{len(done)}, run on {dict(where)} (the idle one with {args.idle_slots} slots)",
        "create → start, ms p50 / p99 / max": " / ".join(
            f"{percentile(waits, q) * 1000:,.0f}" for q in (0.5, 0.99, 1.0)
        ),
        "started more than 2 s after their create": str(sum(wait > 2.0 for wait in waits)),
        "sleeps still running on the busy executor": f"{still} of 2",
    }, raw


def main(argv: Sequence[str] | None = None) -> int:
    recording = results_file.start("benchmarks.busy_executors", argv)
    args = parse(argv)
    queue = f"busy-{uuid.uuid4().hex[:8]}"
    with throwaway_mesh("jobmesh-busy-", queue) as (mesh, _):
        mesh.spawn("server", ["server", "--listen", mesh.address], {})
        busy = ["executor", "--server", mesh.address, "--queues", queue, "--concurrency", "2"]
        mesh.spawn("busy", busy, {"JOBMESH_EXECUTOR_ID": "busy", **ALLOWED})
        wait_serving(mesh.address, mesh)
        with grpc.insecure_channel(mesh.address) as channel:
            figures, raw = measure(args, Api(channel), queue, mesh)
    print_figures("jobmesh busy-executor benchmark", figures)
    recording.save({"figures": figures, "raw": raw}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
