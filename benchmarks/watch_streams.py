"""What idle `WatchRuns` streams cost a server: `GetJob` latency with none open and with `--streams` open, the
server's CPU and the database's commits while they idle, and how long one change takes to reach them all.

Starts a real `jobmesh server` on PostgreSQL (throwaway services from `tools/services/services.sh` unless
JOBMESH_DATABASE_URL, JOBMESH_KAFKA_BOOTSTRAP and JOBMESH_REDIS_URL name running ones), and prints figures;
they and the raw numbers go to a results file (`benchmarks/results_file.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc

from benchmarks import results_file
from benchmarks.cpu import Group, snapshot
from benchmarks.figures import percentile, print_figures
from benchmarks.pipeline import throwaway_mesh, wait_serving
from benchmarks.statements import commits
from jobmesh.v1 import (
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    search_service_pb2,
    search_service_pb2_grpc,
)

STATS_DELAY = 11.0


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.watch_streams", description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=500, help="idle WatchRuns streams (500)")
    parser.add_argument("--channels", type=int, default=10, help="client connections they share (10)")
    parser.add_argument("--calls", type=int, default=500, help="GetJob calls per measurement (500)")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds the streams idle, measured (10)")
    parser.add_argument("--changes", type=int, default=10, help="changes timed to reach every stream (10)")
    results_file.add_option(parser)
    return parser.parse_args(argv)


async def get_job_latencies(
    stub: job_service_pb2_grpc.JobServiceAsyncStub, name: str, calls: int
) -> list[float]:
    latencies = []
    for _ in range(calls):
        start = time.perf_counter()
        await stub.GetJob(job_service_pb2.GetJobRequest(name=name))
        latencies.append(time.perf_counter() - start)
    return sorted(latencies)


def later_job(team: str) -> job_service_pb2.CreateJobRequest:
    job = job_pb2.Job(
        labels={"team": team}, target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"]))
    )
    job.schedule.run_at.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    return job_service_pb2.CreateJobRequest(job=job)


class Streams:
    """`count` streams watching one team's runs; `arrived` is set once every stream has had `expected`."""

    def __init__(self, channels: Sequence[grpc.aio.Channel], count: int, team: str) -> None:
        request = search_service_pb2.WatchRunsRequest(parent="jobs/-", filter=f'labels.team = "{team}"')
        stubs = [search_service_pb2_grpc.SearchServiceStub(channel) for channel in channels]
        self.calls = [stubs[index % len(stubs)].WatchRuns(request) for index in range(count)]
        self.seen: list[set[str]] = [set() for _ in range(count)]
        self.opened = 0
        self.expected = ""
        self.arrived = asyncio.Event()
        self.tasks = [asyncio.create_task(self._read(index)) for index in range(count)]

    async def _read(self, index: int) -> None:
        async for message in self.calls[index]:
            if not self.seen[index] and not message.runs:
                self.seen[index].add("")
                self.opened += 1
                continue
            self.seen[index] |= {run.name for run in message.runs}
            if self.expected and all(self.expected in seen for seen in self.seen):
                self.arrived.set()

    async def until_open(self, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while self.opened < len(self.calls):
                await asyncio.sleep(0.05)

    def close(self) -> None:
        for call in self.calls:
            call.cancel()


async def idle_costs(server_pid: int, url: str, seconds: float) -> tuple[float, float]:
    """The server's share of a core and the database's commits per second over `seconds`, after a quiet
    spell: PostgreSQL backends report their commits up to PGSTAT_IDLE_INTERVAL (10 s) late."""
    await asyncio.sleep(STATS_DELAY)
    group = Group("server", (server_pid,))
    cpu_before, commits_before, start = snapshot([group])["server"], commits(url), time.monotonic()
    await asyncio.sleep(seconds)
    elapsed = time.monotonic() - start
    cpu = snapshot([group])["server"] - cpu_before
    return cpu / elapsed, (commits(url) - commits_before - 1) / elapsed  # less this reader's own


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


async def measure(
    args: argparse.Namespace, address: str, server_pid: int, url: str, raw: dict[str, Any]
) -> dict[str, str]:
    """The figures as printed; the numbers they come from are added to `raw` as they are measured."""
    figures: dict[str, str] = {}
    channels = [grpc.aio.insecure_channel(address) for _ in range(args.channels)]
    jobs = job_service_pb2_grpc.JobServiceStub(channels[0])
    team = f"bench-{uuid.uuid4().hex[:8]}"
    created = await jobs.CreateJob(later_job(f"{team}-other"))
    await get_job_latencies(jobs, created.job.name, 50)  # warm-up
    idle = await get_job_latencies(jobs, created.job.name, args.calls)
    raw["get_job_s_no_stream"] = idle
    figures["GetJob p50 / p99, no stream open"] = (
        f"{ms(statistics.median(idle))} / {ms(percentile(idle, 0.99))}"
    )
    cpu, rate = await idle_costs(server_pid, url, args.idle)
    raw["no_stream"] = {"server_cpu_share": cpu, "commits_per_s": rate}
    figures["server CPU / database commits per s, no stream open"] = (
        f"{cpu * 100:.1f}% of a core / {rate:.1f}"
    )

    streams = Streams(channels, args.streams, team)
    try:
        await streams.until_open(120)
        cpu, rate = await idle_costs(server_pid, url, args.idle)
        raw["streams_idle"] = {"server_cpu_share": cpu, "commits_per_s": rate}
        figures[f"server CPU / database commits per s, {args.streams} streams idle"] = (
            f"{cpu * 100:.1f}% of a core / {rate:.1f}"
        )
        busy = await get_job_latencies(jobs, created.job.name, args.calls)
        raw["get_job_s_streams_open"] = busy
        figures[f"GetJob p50 / p99, {args.streams} streams open"] = (
            f"{ms(statistics.median(busy))} / {ms(percentile(busy, 0.99))}"
        )
        figures["GetJob p50 ratio (goal: within 2x)"] = (
            f"{statistics.median(busy) / statistics.median(idle):.2f}x"
        )
        fan_out = []
        for _ in range(args.changes):
            streams.arrived.clear()
            start = time.perf_counter()
            response = await jobs.CreateJob(later_job(team))
            streams.expected = response.run.name
            async with asyncio.timeout(30):
                await streams.arrived.wait()
            fan_out.append(time.perf_counter() - start)
        raw["fan_out_s"] = fan_out
        figures[f"a new run reaching all {args.streams} streams, p50 / max"] = (
            f"{ms(statistics.median(fan_out))} / {ms(max(fan_out))}"
        )
    finally:
        streams.close()
        await asyncio.gather(*streams.tasks, return_exceptions=True)
        for channel in channels:
            await channel.close()
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    recording = results_file.start("benchmarks.watch_streams", argv)
    args = parse(argv)
    raw: dict[str, Any] = {}
    with throwaway_mesh("jobmesh-watch-", "bench") as (mesh, found):
        limits = {"JOBMESH_MAX_LIVE_STREAMS_PER_CLIENT": str(args.streams + 10)}
        server = mesh.spawn("server", ["server", "--listen", mesh.address], limits)
        wait_serving(mesh.address, mesh)
        database = found.env["JOBMESH_DATABASE_URL"]
        figures = asyncio.run(measure(args, mesh.address, server.popen.pid, database, raw))
    print_figures("jobmesh WatchRuns streams benchmark", figures)
    recording.save({"figures": figures, "raw": raw}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
