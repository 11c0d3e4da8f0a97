"""A chaos run: a steady load on a real mesh while its processes are killed and its services stopped, in turn;
then what was lost, started twice, overlapped, early or late, and what health said meanwhile.

    .venv/bin/python -m benchmarks.chaos [--rate 400] [--duration 300] [--faults executor,watcher,...]
    .venv/bin/python -m benchmarks.chaos --rate 50 --duration 90 --faults postgres,executor   (a quick check)

Services of its own (`tools/services/services.sh up` with `JOBMESH_SERVICES_DURABLE=1`: PostgreSQL's fsync on,
on `--ports`, not the suite's), down at the end whatever happens. The mesh: one `jobmesh server --workers 2`,
two watchers (the first leads), two executors, each with `--health-listen` on a port of its own, polled every
second with the server's gRPC health (`benchmarks/chaos_mesh.py`). The load (`benchmarks/chaos_load.py`):
immediate and `run_at` jobs at `--rate`, cron jobs every 1, 2 or 5 s, and long commands now and then. The
faults (`benchmarks/chaos_faults.py`), `--gap` seconds apart, from `--lead-in` seconds into the load, which
lasts `--duration` seconds or until the last fault's gap is over. Then up to `--settle` seconds for every
run to end, and the counts (`benchmarks/chaos_counts.py`), from the executors' own start records and the
database:

- acknowledged creates lost: an acknowledged run (or cron job) the database does not have; cron
  occurrences missing (expected from each schedule) or made twice;
- runs never started: in the database, due, and no start record;
- attempts started twice; runs whose attempts overlapped (one began while an earlier one was alive); early
  starts (before the schedule time); succeeded attempts run again (a later attempt, or the same one again);
- lateness (first start - schedule time, a run never started counting as infinitely late): p50/p99/max and
  the share within 2 s, for the runs due inside each fault window, in the `--after` seconds after it, and
  outside every window;
- what health said in each window: each process's `/readyz` and the server's gRPC health, second by second.

A table on stdout; the raw results (every window, count, sample) in a results file
(`benchmarks/results_file.py`: `benchmarks/results/chaos-*.json`, or `--json FILE`). Every wait is bounded
and the whole run stops by itself (`--time-limit`); on Ctrl-C or SIGTERM everything it started is stopped.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from benchmarks import chaos_report, results_file
from benchmarks.chaos_faults import FAULTS, FaultContext, run_fault
from benchmarks.chaos_handlers import STARTS_VARIABLE
from benchmarks.chaos_load import MAX_AHEAD, Creator, handler_job
from benchmarks.chaos_mesh import (
    DEFAULT_PORTS,
    REPO,
    ChaosMesh,
    HealthPoller,
    Services,
    private_services,
    readyz,
    wait_for,
)
from benchmarks.pipeline import free_port
from jobmesh.v1 import job_service_pb2, job_service_pb2_grpc


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=400.0, help="immediate and run_at jobs a second (400)")
    parser.add_argument(
        "--duration",
        type=float,
        default=300.0,
        help="seconds of load at least (300; longer if the faults need)",
    )
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"in this order, of {', '.join(FAULTS)}")
    parser.add_argument("--gap", type=float, default=15.0, help="seconds between two faults (15)")
    parser.add_argument(
        "--lead-in", type=float, default=15.0, help="seconds of load before the first fault (15)"
    )
    parser.add_argument("--kafka-down", type=float, default=30.0, help="seconds Kafka is stopped (30)")
    parser.add_argument("--redis-down", type=float, default=30.0, help="seconds Redis is stopped (30)")
    parser.add_argument(
        "--postgres-down", type=float, default=60.0, help="seconds PostgreSQL is stopped (60)"
    )
    parser.add_argument(
        "--server-stop", type=float, default=10.0, help="seconds the server is SIGSTOPped (10)"
    )
    parser.add_argument("--cron-jobs", type=int, default=12, help="cron jobs, every 1, 2 or 5 s (12)")
    parser.add_argument("--long-every", type=float, default=30.0, help="seconds between long commands (30)")
    parser.add_argument("--long-seconds", type=int, default=20, help="how long a long command runs (20)")
    parser.add_argument("--after", type=float, default=15.0, help="seconds after a window counted apart (15)")
    parser.add_argument("--settle", type=float, default=120.0, help="seconds allowed for runs to end (120)")
    parser.add_argument("--server-workers", type=int, default=2, help="the server's workers (2)")
    parser.add_argument("--ports", default=DEFAULT_PORTS, help=f"JOBMESH_SERVICES_PORTS ({DEFAULT_PORTS})")
    parser.add_argument("--time-limit", type=float, default=0.0, help="seconds before it stops itself (auto)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, records)")
    results_file.add_option(parser)
    args = parser.parse_args(argv)
    faults = [name.strip() for name in args.faults.split(",") if name.strip()]
    if unknown := sorted(set(faults) - set(FAULTS)):
        parser.error(f"--faults takes {', '.join(FAULTS)}; not {', '.join(unknown)}")
    args.faults = faults
    if args.rate <= 0 or args.duration <= 0 or args.server_workers < 1:
        parser.error("--rate and --duration must be positive, --server-workers at least 1")
    args.lengths = {
        "kafka": args.kafka_down,
        "redis": args.redis_down,
        "postgres": args.postgres_down,
        "sigstop": args.server_stop,
    }
    # run_at jobs wait in an executor from their claim to their start: room for them, spread over two
    args.concurrency = max(256, math.ceil(args.rate * (MAX_AHEAD + 2) / 2 * 1.5))
    if args.time_limit <= 0:
        faults_time = sum(args.lengths.get(name, 0.0) + 150 for name in faults) + args.gap * len(faults)
        args.time_limit = 600 + args.lead_in + max(args.duration, faults_time) + args.settle + 120
    return args


# ---------------------------------------------------------------- the mesh


def wait_serving(address: str, mesh: ChaosMesh, timeout: float = 120.0) -> None:
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)

        def serving() -> bool:
            if mesh.dead():
                raise SystemExit(f"{mesh.dead()} exited:\n{mesh.tail(mesh.dead()[0])}")
            try:
                answer = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
            except grpc.RpcError:
                return False
            return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)

        if not wait_for(serving, timeout, 0.2):
            raise SystemExit(f"the server did not serve within {timeout:.0f} s:\n{mesh.tail('server')}")


def is_ready(port: int) -> bool:
    return readyz(port)[0] == 200


def start_mesh(args: argparse.Namespace, mesh: ChaosMesh, starts: list[Path]) -> None:
    mesh.add(
        "server", ["server", "--listen", mesh.address, "--workers", str(args.server_workers)], {}, free_port()
    )
    wait_serving(mesh.address, mesh)
    for index in (1, 2):
        name = f"watcher-{index}"
        mesh.add(name, ["watcher"], {"JOBMESH_WATCHER_ID": f"{mesh.queue}-{name}"}, free_port())
        ready = functools.partial(is_ready, mesh.members[name].health_port)
        if index == 1 and not wait_for(ready, 90, 0.2):  # the first one leads
            raise SystemExit(f"{name} not ready within 90 s:\n{mesh.tail(name)}")
    for index in (1, 2):
        name = f"executor-{index}"
        flags = ["--server", mesh.address, "--queues", mesh.queue, "--concurrency", str(args.concurrency)]
        flags += ["--handlers", "benchmarks.chaos_handlers:HANDLERS", "--allowed-commands", "/**"]
        extra = {STARTS_VARIABLE: str(starts[index - 1]), "JOBMESH_EXECUTOR_ID": f"{mesh.queue}-{name}"}
        mesh.add(name, ["executor", *flags], extra, free_port())
    if not wait_for(lambda: all(is_ready(m.health_port) for m in mesh.members.values()), 120, 0.5):
        said = {name: readyz(member.health_port)[0] for name, member in mesh.members.items()}
        raise SystemExit(f"the mesh was not ready within 120 s: {said}")


def warm_up(stub: job_service_pb2_grpc.JobServiceStub, queue: str, starts: list[Path]) -> set[str]:
    """Jobs until each executor has started one (the consumer group settled); their runs are left out."""
    names: set[str] = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        jobs = [handler_job(queue) for _ in range(10)]
        for job in jobs:
            job.schedule.immediate.SetInParent()
        request = job_service_pb2.BatchCreateJobsRequest(
            requests=[job_service_pb2.CreateJobRequest(job=job) for job in jobs]
        )
        response = stub.BatchCreateJobs(request, timeout=30)
        names.update(result.run.name for result in response.results if result.run.name)
        time.sleep(1.0)
        if all(path.exists() and path.stat().st_size > 0 for path in starts):
            return names
    raise SystemExit("warm-up: not every executor started a run within 120 s")


# ---------------------------------------------------------------- the run


def planned_load(args: argparse.Namespace) -> float:
    """Seconds the load is expected to last: `--duration`, or the faults' time if longer (a kill and its
    restart take about 15 s)."""
    faults = sum(args.lengths.get(name, 0.0) + 15.0 for name in args.faults) + args.gap * len(args.faults)
    return float(max(args.duration, args.lead_in + faults))


def run(args: argparse.Namespace, work: Path, services: Services) -> dict[str, Any]:
    queue = f"chaos-{uuid.uuid4().hex[:8]}"
    print(f"work folder {work}, queue {queue}", flush=True)
    mesh = ChaosMesh(work, {**services.env, "PYTHONPATH": str(REPO)}, queue, f"127.0.0.1:{free_port()}")
    starts = [work / f"starts-{index}.txt" for index in (1, 2)]
    records = work / "commands"
    records.mkdir()
    records.chmod(0o777)  # commands run as the job user (nobody, when this runs as root)
    poller = HealthPoller(mesh)
    channel = grpc.insecure_channel(mesh.address)
    creator: Creator | None = None
    faults: list[dict[str, Any]] = []
    try:
        start_mesh(args, mesh, starts)
        poller.start()
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        warm = warm_up(stub, queue, starts)
        print(f"mesh up and warm ({len(warm)} warm-up runs)", flush=True)
        creator = Creator(
            stub, queue, args.rate, records, long_every=args.long_every, long_seconds=args.long_seconds
        )
        t0 = math.ceil(time.time()) + 2.0
        cron_end = t0 + planned_load(args)
        creator.create_cron(args.cron_jobs, round((t0 + 0.5) * 1e9), round((cron_end + 0.5) * 1e9))
        creator.start(t0)
        print(
            f"offering {args.rate:g} jobs/s from t0; faults: {', '.join(args.faults) or 'none'}", flush=True
        )
        time.sleep(max(t0 + args.lead_in - time.time(), 0.0))
        context = FaultContext(mesh, services, poller, creator.submit_long, args.lengths)
        for name in args.faults:
            print(f"  t+{time.time() - t0:6.1f} s: {name}", flush=True)
            fault = run_fault(name, context)
            faults.append(fault.record())
            print(f"  t+{time.time() - t0:6.1f} s: {name} over: {'; '.join(fault.notes)}", flush=True)
            time.sleep(args.gap)
        time.sleep(max(t0 + args.duration - time.time(), 0.0))
        load_end = time.time()
        creator.stop()
        print(f"  t+{load_end - t0:6.1f} s: load over; settling (up to {args.settle:g} s)", flush=True)
        settled = chaos_report.settle(services.env["JOBMESH_DATABASE_URL"], queue, args.settle)
        time.sleep(2.0)  # the last start records are written
        measured = chaos_report.measure(
            args,
            database=services.env["JOBMESH_DATABASE_URL"],
            queue=queue,
            creator=creator,
            warm=warm,
            start_files=starts,
            records=records,
            faults=faults,
            samples=poller.snapshot(),
            span=(t0, load_end),
        )
        measured["settled"] = settled
        measured["restarts"] = {name: member.starts - 1 for name, member in mesh.members.items()}
        measured["exited"] = (
            mesh.dead()
        )  # of their own accord: every process a fault killed was started again
        return measured
    finally:
        if creator is not None:
            creator.stop(answers_within=1)
        poller.close()
        channel.close()
        mesh.stop()


def _limit(seconds: float) -> None:
    """SIGINT to this process after `seconds` (it wakes any wait of the main thread): the run stops itself,
    cleaning up as on Ctrl-C."""

    def expire() -> None:
        print(f"\nchaos: the time limit ({seconds:.0f} s) is reached: stopping", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    recording = results_file.start("benchmarks.chaos", argv)
    args = parse(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    _limit(args.time_limit)
    work = Path(tempfile.mkdtemp(prefix="jobmesh-chaos-", dir="/tmp"))
    work.chmod(0o755)  # the postgres user writes the services' folder when this runs as root
    try:
        with private_services(work, args.ports) as services:
            result = run(args, work, services)
    except KeyboardInterrupt:
        print("chaos: interrupted; everything it started is stopped", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(chaos_report.report(result))
    recording.save(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
