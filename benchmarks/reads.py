"""Reads under load: `--clients` concurrent clients, each on a connection of its own, calling GetJob and
ListRuns (a page of 50 runs of all jobs) in turn, as fast as they are answered, for `--duration` s; with
`--create-rate` jobs/s created alongside (and run by a watcher and an executor) when it is above zero.

    .venv/bin/python -m benchmarks.reads [--clients 200] [--duration 30] [--create-rate 0]

Starts a real `jobmesh server` (and, with creates, a watcher and an executor) on PostgreSQL, Kafka and Redis
(throwaway services from `tools/services/services.sh` unless JOBMESH_DATABASE_URL, JOBMESH_KAFKA_BOOTSTRAP and
JOBMESH_REDIS_URL name running ones), seeds `--jobs` jobs due tomorrow, and prints calls/s, the latency of
each method (p50 / p99 / max, the first 2 s of each client left out as warm-up), the errors by status code,
and CPU seconds per 1,000 calls of the server, PostgreSQL and the clients. The figures and the numbers they
come from go to a results file (`benchmarks/results_file.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from typing import Any

import grpc

from benchmarks import cpu, results_file
from benchmarks.figures import percentile, print_figures, spread
from benchmarks.handlers import STARTS_VARIABLE
from benchmarks.pipeline import (
    Mesh,
    Sender,
    Services,
    expect,
    print_profiles,
    start_senders,
    stop_senders,
    throwaway_mesh,
    wait_serving,
)
from jobmesh.v1 import (
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    search_service_pb2,
    search_service_pb2_grpc,
)

WARM_UP = 2.0  # seconds of each client's calls left out
PAGE = 50
SEED_BATCH = 100

Samples = dict[str, list[float]]  # method → latencies (seconds); "errors" → status codes counted apart


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.reads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200, help="concurrent clients (200)")
    # Two processes held the clients' own calls back: at 200 clients they answered 515-532 calls/s at the
    # server's full speed of 750 (docs/performance.md, "Reads: the run listing of every job").
    parser.add_argument("--client-processes", type=int, default=4, help="processes the clients share (4)")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of calls (30)")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs seeded before the calls (2000)")
    parser.add_argument("--create-rate", type=float, default=0.0, help="jobs/s created alongside (0)")
    parser.add_argument("--server-workers", type=int, default=2, help="server processes (2)")
    parser.add_argument(
        "--profile", action="store_true", help="one server process, under the profiler: where its CPU goes"
    )
    results_file.add_option(parser)
    args = parser.parse_args(argv)
    if args.profile:
        args.server_workers = 1
    if args.clients < 1 or args.client_processes < 1 or args.duration <= WARM_UP or args.jobs < 1:
        parser.error(f"--clients, --client-processes, --jobs at least 1; --duration above {WARM_UP:g} s")
    return args


def seed(address: str, count: int, queue: str) -> list[str]:
    """`count` jobs due tomorrow (each with its run waiting): the names GetJob reads."""
    names: list[str] = []
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    with grpc.insecure_channel(address) as channel:
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        while len(names) < count:
            requests = []
            for _ in range(min(SEED_BATCH, count - len(names))):
                job = job_pb2.Job(
                    queue=queue,
                    labels={"bench": "reads"},
                    target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])),
                )
                job.schedule.run_at.FromDatetime(tomorrow)
                requests.append(job_service_pb2.CreateJobRequest(job=job))
            response = stub.BatchCreateJobs(
                job_service_pb2.BatchCreateJobsRequest(requests=requests), timeout=60
            )
            names += [result.job.name for result in response.results]
    return names


async def one_client(address: str, names: Sequence[str], start: float, end: float, samples: Samples) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        jobs = job_service_pb2_grpc.JobServiceStub(channel)
        search = search_service_pb2_grpc.SearchServiceStub(channel)
        await channel.channel_ready()
        turn = random.randrange(2)
        while (now := time.time()) < end:
            method = ("GetJob", "ListRuns")[turn % 2]
            turn += 1
            began = time.perf_counter()
            try:
                if method == "GetJob":
                    await jobs.GetJob(job_service_pb2.GetJobRequest(name=random.choice(names)), timeout=30)
                else:
                    await search.ListRuns(
                        search_service_pb2.ListRunsRequest(parent="jobs/-", page_size=PAGE), timeout=30
                    )
            except grpc.aio.AioRpcError as error:
                samples.setdefault(f"error {error.code().name}", []).append(0.0)
                continue
            if now >= start + WARM_UP:
                samples.setdefault(method, []).append(time.perf_counter() - began)


def client_process(address: str, names: list[str], clients: int, control: Connection) -> None:
    """`clients` clients in one process; waits for the start instant, sends back the samples."""
    control.send("ready")
    start, end = control.recv()

    async def all_clients() -> Samples:
        samples: Samples = {}
        await asyncio.sleep(max(start - time.time(), 0))
        await asyncio.gather(*(one_client(address, names, start, end, samples) for _ in range(clients)))
        return samples

    control.send(asyncio.run(all_clients()))


def latency_cell(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return " / ".join(f"{percentile(ordered, q) * 1000:,.1f}" for q in (0.5, 0.99, 1.0)) + " ms"


def creates_alongside(args: argparse.Namespace, mesh: Mesh, queue: str) -> list[Sender]:
    """A watcher, an executor and one sender offering `--create-rate` immediate jobs/s for the duration."""
    mesh.spawn("watcher", ["watcher"], {"JOBMESH_WATCHER_ID": f"{queue}-watcher"})
    flags = ["--server", mesh.address, "--queues", queue, "--handlers", "benchmarks.handlers:HANDLERS"]
    starts = {STARTS_VARIABLE: str(mesh.work / "starts.txt"), "JOBMESH_EXECUTOR_ID": f"{queue}-1"}
    mesh.spawn("executor", ["executor", *flags], starts)
    load = argparse.Namespace(
        duration=args.duration,
        rate=args.create_rate,
        scheduled_share=0.0,
        ahead=0.0,
        drain=30.0,
        tick=0.05,
    )
    senders = start_senders(load, mesh, [mesh.work / "load.txt"])
    expect(senders, 120, "get ready")
    return senders


def measure(
    args: argparse.Namespace, mesh: Mesh, found: Services, server_pid: int, names: list[str]
) -> tuple[Samples, dict[str, float]]:
    """Every call's latency by method (errors apart), and the CPU seconds each process used meanwhile."""
    context = multiprocessing.get_context("spawn")
    per_process = [len(part) for part in _split(args.clients, args.client_processes)]
    clients: list[tuple[multiprocessing.process.BaseProcess, Connection]] = []
    senders: list[Sender] = []
    try:
        for count in per_process:
            ours, theirs = context.Pipe()
            process: multiprocessing.process.BaseProcess = context.Process(
                target=client_process, args=(mesh.address, names, count, theirs)
            )
            process.start()
            clients.append((process, ours))
        for _, control in clients:
            if not control.poll(120):
                raise SystemExit("a client process did not get ready")
            control.recv()
        if args.create_rate > 0:
            senders = creates_alongside(args, mesh, mesh.queue)
        groups = [cpu.Group("server", (server_pid,))]
        groups += [cpu.Group(name, (pid,)) for name, pid in found.pids.items() if name == "postgres"]
        groups.append(cpu.Group("clients", tuple(process.pid for process, _ in clients if process.pid)))
        start = time.time() + 1.0
        end = start + args.duration
        for _, control in clients:
            control.send((start, end))
        for _, control in senders:
            control.send(start)
        time.sleep(max(start + WARM_UP - time.time(), 0))
        before = cpu.snapshot(groups)
        samples: Samples = {}
        for _, control in clients:
            if not control.poll(args.duration + 120):
                raise SystemExit("a client process did not finish")
            for method, values in control.recv().items():
                samples.setdefault(method, []).extend(values)
        after = cpu.snapshot(groups)
    finally:
        stop_senders(senders)
        for process, _ in clients:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    return samples, {name: after[name] - before.get(name, 0.0) for name in after}


def _split(total: int, parts: int) -> list[range]:
    return [range(index, total, parts) for index in range(min(parts, total))]


def figures(args: argparse.Namespace, samples: Samples, cpu_seconds: dict[str, float]) -> dict[str, str]:
    measured = args.duration - WARM_UP
    calls = sum(len(values) for method, values in samples.items() if not method.startswith("error"))
    errors = Counter(
        {method: len(values) for method, values in samples.items() if method.startswith("error")}
    )
    result = {
        "clients (processes), server workers": (
            f"{args.clients} ({args.client_processes}), {args.server_workers}"
        ),
        "jobs created alongside per s": f"{args.create_rate:,.0f}",
        "calls answered per s": f"{calls / measured:,.0f}",
        "all calls p50 / p99 / max": latency_cell(
            [v for m, vs in samples.items() if not m.startswith("error") for v in vs]
        ),
    }
    for method in ("GetJob", "ListRuns"):
        result[f"{method} p50 / p99 / max"] = latency_cell(samples.get(method, []))
    result["errors"] = ", ".join(f"{name} {count:,}" for name, count in errors.items()) or "none"
    for name, seconds in cpu_seconds.items():
        result[f"CPU s per 1,000 calls: {name}"] = f"{seconds / calls * 1000:.2f}" if calls else "-"
    return result


def raw_numbers(args: argparse.Namespace, samples: Samples, cpu_seconds: dict[str, float]) -> dict[str, Any]:
    calls = {method: values for method, values in samples.items() if not method.startswith("error")}
    return {
        "measured_s": args.duration - WARM_UP,
        "calls": sum(len(values) for values in calls.values()),
        "latency_s": {method: spread(values) for method, values in calls.items()},
        "errors": {method: len(values) for method, values in samples.items() if method.startswith("error")},
        "cpu_s": cpu_seconds,
    }


def main(argv: Sequence[str] | None = None) -> int:
    recording = results_file.start("benchmarks.reads", argv)
    args = parse(argv)
    queue = f"reads-{uuid.uuid4().hex[:8]}"
    with throwaway_mesh("jobmesh-reads-", queue) as (mesh, found):
        workers = {"JOBMESH_SERVER_WORKERS": str(args.server_workers)}
        mesh.profile = frozenset({"server"} if args.profile else ())
        server = mesh.spawn("server", ["server", "--listen", mesh.address], workers, "server")
        wait_serving(mesh.address, mesh)
        names = seed(mesh.address, args.jobs, queue)
        print(
            f"seeded {len(names):,} jobs; {args.clients} clients calling for {args.duration:g} s", flush=True
        )
        samples, cpu_seconds = measure(args, mesh, found, server.popen.pid, names)
        mesh.stop()  # the profile is written as the server exits
        if args.profile:
            print_profiles(mesh.work, ["server"], 40)
    printed = figures(args, samples, cpu_seconds)
    print_figures("jobmesh reads benchmark", printed)
    recording.save({"figures": printed, "raw": raw_numbers(args, samples, cpu_seconds)}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
