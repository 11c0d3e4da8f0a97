"""The whole pipeline under a fixed offered load: real PostgreSQL, Kafka and Redis, a server, a watcher and N
executors as separate processes, jobs offered at a fixed rate for a fixed time.

    .venv/bin/python -m benchmarks.pipeline --rate 1000 [--duration 30] [--executors 2] [--json FILE]

Services: throwaway ones (`tools/services/services.sh up`, and `down` at the end) unless JOBMESH_DATABASE_URL,
JOBMESH_KAFKA_BOOTSTRAP and JOBMESH_REDIS_URL name existing ones (then their CPU is not measured). The
processes run the `jobmesh` command of this venv, on a Kafka queue of their own for this run. Jobs are
`handler` targets (`benchmarks.handlers:HANDLERS`, which records each real start in a file per executor), so
the numbers are the scheduler's, not fork/exec's.

The load (`benchmarks/load.py`): sender processes pace `BatchCreateJobs` calls by the wall clock, so a slow
mesh cannot slow the offered load. `--scheduled-share` of the jobs are `run_at` the offered instant plus
`--ahead` seconds, the rest immediate. After the offered window, up to `--drain` seconds for stragglers.

What it prints, from the handler's start records joined with what was submitted and the database (which says
what was created: a create whose answer timed out may still have made its run):
- completed/s: runs SUCCEEDED per second from the first offer to the last completion, less `ahead` (the wait
  of the last scheduled runs, by design): the offered rate when the mesh keeps up, what it managed when not;
  and, in brackets in the markdown row, the rate of those that ended inside the offered window (from `ahead`
  seconds in, once both kinds of job are due at the offered rate);
- lateness: submit→start for immediate jobs (the first start minus the instant the create call was sent),
  scheduled→start for `run_at` jobs (the first start minus the run's schedule time): p50, p99, max; and, to
  show where an immediate run's time goes, submit→handed to Kafka and Kafka→start;
- late: % of started runs whose lateness is over 2 s; early: % of started runs that began before their
  schedule time (invariant 2); lost: runs created but not started by the deadline; failed: runs that ended
  FAILED (or another failure state); duplicates: starts of an attempt beyond its first (invariant 5);
  retried: starts of attempts after the first;
- CPU seconds per 1,000 completed runs for each process (its whole tree: PostgreSQL's postmaster with every
  backend, the Kafka JVM, redis-server, server, watcher, each executor; and the load generator: this process
  and its senders), between the start of the offered window and the end (everything done, or the deadline),
  with how busy the whole machine was meanwhile (other processes skew the numbers).

A table on stdout ending in a markdown row for docs/performance.md; every number goes to a results file
(`benchmarks/results_file.py`: under `benchmarks/results/`, or `--json FILE`).

`--otel` measures what traces cost: the same load twice on the same services, first with traces off (the
default), then with every process exporting its spans over OTLP (the standard `OTEL_*` variables) to a
receiver in this process that counts them (`benchmarks/otlp_sink.py`), and prints both reports and the
difference in CPU per 1,000 runs, process by process. Metrics are recorded in both runs (they are always on),
so their cost is in both; a scrape's is not measured.

`--profile server,watcher,executor` runs those (the first executor only) under `benchmarks/profiled.py` and
prints where their CPU went. The profiler slows them down: profile in a run of its own, not in the one whose
numbers you publish.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import pstats
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from benchmarks import cpu, otlp_sink, results_file, secure, statements
from benchmarks.figures import (
    Measured,
    Starts,
    attempt_errors,
    database_runs,
    figures,
    progress,
    read_jobs,
    report,
)
from benchmarks.handlers import STARTS_VARIABLE
from benchmarks.load import MAX_BATCH, Plan, job_request, run_sender
from benchmarks.secure import Security
from jobmesh.transport import tls
from jobmesh.transport.tls import ChannelTls
from jobmesh.v1 import job_service_pb2, job_service_pb2_grpc

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SERVICES = ("postgres", "kafka", "redis")
IMMEDIATE_THRESHOLD = 60.0  # seconds: the server publishes runs due within this at once


# ---------------------------------------------------------------- services and processes


@dataclass
class Services:
    env: dict[str, str]
    pids: dict[str, int]  # what the benchmark started (and so measures)
    state: Path | None = None


@contextlib.contextmanager
def services(work: Path) -> Iterator[Services]:
    names = ("JOBMESH_DATABASE_URL", "JOBMESH_KAFKA_BOOTSTRAP", "JOBMESH_REDIS_URL")
    if all(os.environ.get(name) for name in names):
        yield Services({name: os.environ[name] for name in names}, {})
        return
    state = work / "services"
    script = REPO / "tools" / "services" / "services.sh"
    try:
        subprocess.run(["bash", str(script), "up", str(state)], check=True, cwd=REPO)
        env = {}
        for line in (state / "env").read_text().splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = value.strip("'\"")
        yield Services(env, _service_pids(state), state)
    finally:
        subprocess.run(["bash", str(script), "down", str(state)], check=False, cwd=REPO)


def _service_pids(state: Path) -> dict[str, int]:
    pids: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in (state / "pids").read_text().splitlines():
            name, _, pid = line.partition(" ")
            if name in SERVICES and pid.strip().isdigit():
                pids[name] = int(pid)
    redis_pid = state / "redis" / "redis.pid"
    if "redis" not in pids and redis_pid.exists():
        pids["redis"] = int(redis_pid.read_text().strip())
    return pids


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def stop(self, timeout: float = 60.0) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()


@dataclass
class Mesh:
    work: Path
    env: dict[str, str]
    profile: frozenset[str]
    address: str
    queue: str
    processes: list[Process] = field(default_factory=list)
    security: Security | None = None  # TLS and tokens (`--secure`)

    def client_tls(self) -> ChannelTls | None:
        return self.security.client_tls() if self.security else None

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return self.security.metadata() if self.security else ()

    def spawn(self, name: str, args: list[str], extra: dict[str, str], profile_as: str = "") -> Process:
        if profile_as and profile_as in self.profile:
            command = [
                sys.executable,
                "-m",
                "benchmarks.profiled",
                str(self.work / f"{profile_as}.prof"),
                *args,
            ]
        else:
            command = [str(BIN / "jobmesh"), *args]
        log = self.work / f"{name}.log"
        with log.open("ab") as output:
            popen = subprocess.Popen(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env, **extra},
                cwd=REPO,
                start_new_session=True,
            )
        process = Process(name, popen, log)
        self.processes.append(process)
        return process

    def check_alive(self) -> None:
        for process in self.processes:
            if process.popen.poll() is not None:
                tail = process.log.read_text(errors="replace")[-3000:]
                raise SystemExit(f"{process.name} exited ({process.popen.returncode}):\n{tail}")

    def stop(self) -> None:
        for process in reversed(self.processes):  # executors first, the server last
            process.stop()


@contextlib.contextmanager
def throwaway_mesh(prefix: str, queue: str) -> Iterator[tuple[Mesh, Services]]:
    """A work folder, the services (see `services`) and a mesh with no process yet, its server's address
    free: for a small benchmark. Its processes are stopped and the folder is removed after."""
    work = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    work.chmod(0o755)  # the postgres user writes the services' folder when this runs as root
    try:
        with services(work) as found:
            address = f"127.0.0.1:{free_port()}"
            mesh = Mesh(work, {**found.env, "PYTHONPATH": str(REPO)}, frozenset(), address, queue)
            try:
                yield mesh, found
            finally:
                mesh.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_serving(address: str, mesh: Mesh, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    with tls.channel(address, mesh.client_tls()) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            mesh.check_alive()
            try:
                response = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if response.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)


def print_profiles(work: Path, names: Sequence[str], top: int) -> None:
    for name in names:
        path = work / f"{name}.prof"
        if not path.exists():
            print(f"\nno profile for {name} ({path} missing)")
            continue
        print(f"\n==== {name}: CPU by function (own time), all threads: {path}")
        stats = pstats.Stats(str(path))
        stats.sort_stats("tottime").print_stats(top)
        print(f"==== {name}: CPU by function (cumulative)")
        stats.sort_stats("cumulative").print_stats(top)


# ---------------------------------------------------------------- the run


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.pipeline", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="jobs offered per second (1000)")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of offered load (30)")
    parser.add_argument("--executors", type=int, default=2, help="executor processes (2)")
    parser.add_argument(
        "--server-workers", type=int, default=1, help="server processes on the one address (1; profiled: 1)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=0,
        help="attempts each executor holds (default: enough for the jobs waiting for their start time)",
    )
    parser.add_argument("--senders", type=int, default=2, help="load generator processes (2)")
    parser.add_argument(
        "--jobs-per-call",
        type=int,
        default=MAX_BATCH,
        help=f"1: a CreateJob call a job, from --callers callers a sender; more: BatchCreateJobs calls of"
        f" at most this many ({MAX_BATCH})",
    )
    parser.add_argument(
        "--callers", type=int, default=8, help="with one job a call: calls in flight at most, a sender (8)"
    )
    parser.add_argument("--scheduled-share", type=float, default=0.5, help="share of run_at jobs (0.5)")
    parser.add_argument("--ahead", type=float, default=3.0, help="run_at: seconds after the offer (3)")
    parser.add_argument("--tick", type=float, default=0.05, help="seconds between a sender's batches (0.05)")
    parser.add_argument("--drain", type=float, default=30.0, help="seconds allowed for stragglers (30)")
    parser.add_argument(
        "--secure",
        action="store_true",
        help="TLS and tokens on, as README 'Running it securely': the API over TLS with an operator's"
        " token, executors over mutual TLS known by their certificates",
    )
    results_file.add_option(parser)
    parser.add_argument("--work", type=Path, help="folder for logs and records (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--otel",
        action="store_true",
        help="run twice, traces off then on (OTLP to a counting receiver), and print the CPU traces cost",
    )
    parser.add_argument("--profile", default="", help="comma-separated: server, watcher, executor")
    parser.add_argument("--profile-top", type=int, default=30, help="functions shown per profile (30)")
    args = parser.parse_args(argv)
    if not 0.0 <= args.scheduled_share <= 1.0:
        parser.error("--scheduled-share is a fraction from 0 to 1")
    if args.rate <= 0 or args.duration <= 0 or args.executors < 1 or args.senders < 1 or args.tick <= 0:
        parser.error("--rate, --duration, --tick must be positive; --executors and --senders at least 1")
    if not 1 <= args.jobs_per_call <= MAX_BATCH or args.callers < 1:
        parser.error(f"--jobs-per-call takes 1 to {MAX_BATCH}; --callers at least 1")
    profile = {name.strip() for name in args.profile.split(",") if name.strip()}
    if unknown := profile - {"server", "watcher", "executor"}:
        parser.error(f"--profile takes server, watcher, executor; not {', '.join(sorted(unknown))}")
    args.profile = frozenset(profile)
    if args.concurrency <= 0:
        # scheduled runs are held from their claim (right after the create) to their start: rate * share *
        # ahead of them at once, plus the ones in flight; spread over the executors, with room to spare
        # (beyond the server's 1-minute immediate threshold the watcher releases them half a second early)
        held = args.ahead if args.ahead < IMMEDIATE_THRESHOLD else 0.5
        waiting = args.rate * (args.scheduled_share * (held + 1.0) + 1.0) / args.executors
        args.concurrency = max(256, math.ceil(waiting * 1.5))
    return args


def warm_up(address: str, queue: str, starts: Starts, mesh: Mesh) -> set[str]:
    """Runs jobs until every executor has started one: the consumer group has settled before the clock
    starts. Returns the warm-up runs' names (left out of the figures)."""
    names: set[str] = set()
    deadline = time.monotonic() + 120
    with tls.channel(address, mesh.client_tls()) as channel:
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        while time.monotonic() < deadline:
            mesh.check_alive()
            request = job_service_pb2.BatchCreateJobsRequest(
                requests=[job_request(queue, None) for _ in range(20)]
            )
            try:
                response = stub.BatchCreateJobs(request, timeout=30, metadata=mesh.metadata())
                names.update(result.run.name for result in response.results if result.run.name)
            except grpc.RpcError as error:  # a busy machine: the server asks for a pause, a second is one
                if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
            time.sleep(1.0)
            starts.read()
            if all(starts.per_executor):
                return names
    raise SystemExit(f"warm-up: starts per executor {starts.per_executor} after 120 s (see the logs)")


def start_mesh(
    args: argparse.Namespace, mesh: Mesh, address: str, queue: str, starts: Sequence[Path]
) -> None:
    workers = {"JOBMESH_SERVER_WORKERS": str(args.server_workers)}
    profiled = "server" if args.server_workers == 1 else ""  # the profiler sees one process
    security = mesh.security
    server_flags = ["--listen", address, *(security.server_flags if security else ())]
    mesh.spawn("server", ["server", *server_flags], workers, profiled)
    wait_serving(address, mesh)
    mesh.spawn("watcher", ["watcher"], {"JOBMESH_WATCHER_ID": f"{queue}-watcher"}, "watcher")
    for index, executor_id in enumerate(executor_ids(queue, args.executors)):
        dialled = security.executor_address if security else address
        flags = ["--server", dialled, "--queues", queue, "--concurrency", str(args.concurrency)]
        flags += security.executor_flags[executor_id] if security else ()
        extra = {STARTS_VARIABLE: str(starts[index]), "JOBMESH_EXECUTOR_ID": executor_id}
        mesh.spawn(
            f"executor-{index + 1}",
            ["executor", *flags, "--handlers", "benchmarks.handlers:HANDLERS"],
            extra,
            "executor" if index == 0 else "",
        )


def executor_ids(queue: str, count: int) -> list[str]:
    return [f"{queue}-{index + 1}" for index in range(count)]


Sender = tuple[multiprocessing.process.BaseProcess, Connection]


def start_senders(args: argparse.Namespace, mesh: Mesh, outputs: Sequence[Path]) -> list[Sender]:
    context = multiprocessing.get_context("spawn")
    senders: list[Sender] = []
    for index, output in enumerate(outputs):
        plan = Plan(
            address=mesh.address,
            queue=mesh.queue,
            duration=args.duration,
            rate=args.rate,
            scheduled_share=args.scheduled_share,
            ahead=args.ahead,
            answer_within=args.duration + args.ahead + args.drain,
            tick=args.tick,
            senders=len(outputs),
            index=index,
            output=str(output),
            ca_bundle=str(mesh.security.ca_bundle) if mesh.security else "",
            token=mesh.security.token if mesh.security else "",
            jobs_per_call=args.jobs_per_call,
            callers=args.callers,
        )
        ours, theirs = context.Pipe()
        process = context.Process(target=run_sender, args=(plan, theirs), name=f"sender-{index + 1}")
        process.start()
        senders.append((process, ours))
    return senders


def expect(senders: Sequence[Sender], timeout: float, what: str) -> None:
    for process, control in senders:
        if not control.poll(timeout):
            raise SystemExit(f"{process.name} did not {what}")
        control.recv()


def stop_senders(senders: Sequence[Sender]) -> None:
    for _, control in senders:
        with contextlib.suppress(OSError, ValueError):
            control.send("exit")
    for process, _ in senders:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()


def cpu_groups(mesh: Mesh, found: Services, senders: Sequence[Sender]) -> list[cpu.Group]:
    groups = [cpu.Group(process.name, (process.popen.pid,)) for process in mesh.processes]
    groups += [cpu.Group(name, (found.pids[name],)) for name in SERVICES if name in found.pids]
    # this process alone: its children are the mesh, measured above
    load = (os.getpid(), *(process.pid for process, _ in senders if process.pid))
    return [*groups, cpu.Group("load", load, own_only=True)]


def measure(
    args: argparse.Namespace,
    mesh: Mesh,
    found: Services,
    starts: Starts,
    *,
    senders: list[Sender],
    warm: set[str],
) -> Measured:
    """The offered window, then the wait for stragglers; CPU from the window's start to the end."""
    queue = mesh.queue
    loads = [mesh.work / f"load-{index + 1}.txt" for index in range(args.senders)]
    database = found.env["JOBMESH_DATABASE_URL"]
    senders += start_senders(args, mesh, loads)
    expect(senders, 120, "get ready")
    groups = cpu_groups(mesh, found, senders)
    t0 = math.ceil(time.time()) + 1.0
    for _, control in senders:
        control.send(t0)
    time.sleep(max(t0 - time.time() - 0.02, 0))
    before, machine_before = cpu.snapshot(groups), cpu.machine_jiffies()
    commits_before = statements.start(database)
    print(f"offering {args.rate:,.0f} jobs/s for {args.duration:g} s", flush=True)
    window_end = t0 + args.duration
    while (now := time.time()) < window_end:
        time.sleep(min(5.0, window_end - now))
        starts.read()
        mesh.check_alive()
        offered = min(time.time() - t0, args.duration) * args.rate
        started = len(starts.by_attempt) - len(warm)
        print(f"  t+{time.time() - t0:5.1f} s: offered {offered:>9,.0f}  started {started:>9,}", flush=True)
    expect(senders, args.drain + 300, "finish")
    jobs = read_jobs(loads)
    created = {job.run for job in jobs if job.status == 0 and job.run != "-"}
    deadline = window_end + max(args.ahead, 0.0) + args.drain
    print(
        f"offered window over; waiting up to {max(deadline - time.time(), 0):.0f} s for stragglers",
        flush=True,
    )
    while time.time() < deadline:
        starts.read()
        first = starts.first_starts()
        if all(name in first for name in created):
            break
        time.sleep(0.5)
    # every start recorded: wait (a little) for the results to be recorded too
    while time.time() < deadline + 10:
        succeeded, total = progress(database, queue)
        if succeeded >= total:
            break
        time.sleep(0.5)
    end = time.time()
    after, machine_after = cpu.snapshot(groups), cpu.machine_jiffies()
    counted = commits_before if isinstance(commits_before, str) else statements.stop(database, commits_before)
    starts.read()
    cpu_seconds = {name: max(after[name] - before.get(name, 0.0), 0.0) for name in after}
    busy, total = (now - then for now, then in zip(machine_after, machine_before, strict=True))
    busy_pct = 100.0 * busy / total if total else math.nan
    runs, errors = database_runs(database, queue), attempt_errors(database, queue)
    return Measured(jobs, runs, warm, t0, end, cpu_seconds, busy_pct, errors, counted)


def run(
    args: argparse.Namespace, work: Path, found: Services, traces: dict[str, str] | None = None
) -> dict[str, Any]:
    """One benchmark run on `found` services, with a mesh and a queue of its own; `traces`: the OTLP
    variables its processes export their spans by (none: traces off)."""
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    print(f"work folder {work}, queue {queue}, traces {'on' if traces else 'off'}", flush=True)
    address = f"127.0.0.1:{free_port()}"
    env = {**found.env, "PYTHONPATH": str(REPO), **(traces or {})}
    mesh = Mesh(work, env, args.profile, address, queue)
    if args.secure:
        executors = f"127.0.0.1:{free_port()}"
        mesh.security = secure.prepare(work, queue, executor_ids(queue, args.executors), executors)
        print(f"TLS and tokens on; executors over mutual TLS on {executors}", flush=True)
    start_paths = [work / f"starts-{index + 1}.txt" for index in range(args.executors)]
    senders: list[Sender] = []
    try:
        start_mesh(args, mesh, address, queue, start_paths)
        starts = Starts(start_paths)
        warm = warm_up(address, queue, starts, mesh)
        print(f"warmed up: {len(warm)} runs, starts per executor {starts.per_executor}", flush=True)
        measured = measure(args, mesh, found, starts, senders=senders, warm=warm)
    finally:
        stop_senders(senders)
        mesh.stop()
    result = figures(args, measured, starts)
    print_profiles(work, sorted(args.profile), args.profile_top)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    recording = results_file.start("benchmarks.pipeline", argv)
    args = parse(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="jobmesh-bench-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    # the postgres user writes the services' folder when this runs as root
    work.chmod(0o755)
    try:
        with services(work) as found:
            result = traced_and_not(args, work, found) if args.otel else run(args, work, found)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if not args.otel:
        print(report(result))
    recording.save(result, args.json)
    return 0


def traced_and_not(args: argparse.Namespace, work: Path, found: Services) -> dict[str, Any]:
    """`--otel`: the load with traces off, then on; both reports, and what traces cost per 1,000 runs."""
    (work / "off").mkdir(exist_ok=True)
    (work / "on").mkdir(exist_ok=True)
    off = run(args, work / "off", found)
    port = free_port()
    with otlp_sink.span_sink(port) as sink:
        on = run(args, work / "on", found, otlp_sink.otlp_environment(port))
        spans = sink.spans  # the processes export their last spans as they stop
    print(report(off))
    print(report(on))
    cost = {
        name: on["cpu_s_per_1000"].get(name, math.nan) - seconds
        for name, seconds in off["cpu_s_per_1000"].items()
    }
    print(f"\ntraces on: {spans:,} spans received ({spans / max(on['completed'], 1):.1f} per completed run)")
    print("  CPU s per 1,000 runs completed    off      on    cost")
    rows = [
        (name, seconds, on["cpu_s_per_1000"].get(name, math.nan))
        for name, seconds in off["cpu_s_per_1000"].items()
    ]
    rows.append(("total", off["cpu_s_per_1000_total"], on["cpu_s_per_1000_total"]))
    for name, without, with_traces in rows:
        print(f"    {name:<28}{without:>7.2f}{with_traces:>8.2f}{with_traces - without:>+8.2f}")
    return {"traces_off": off, "traces_on": on, "spans": spans, "cpu_s_per_1000_cost": cost}


if __name__ == "__main__":
    sys.exit(main())
