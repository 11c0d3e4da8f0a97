"""Peers under jobmesh's open-loop load: Celery on Redis (its defaults, and configured for durability: late
acks, prefetch 1), Dramatiq on Redis and Procrastinate on PostgreSQL, each with 2 worker processes.

    .venv/bin/python -m benchmarks.peers [--peers celery,dramatiq] [--rates 250,1000,2500] [--duration 30]

The peers come from PyPI, into a venv of their own made from `benchmarks/peers/requirements.lock` on first
use (`benchmarks/peers/venv.py`); this script runs in the project's venv and starts their processes with
that venv's commands. They use the project's PostgreSQL and Redis (`make services-up`; see
`benchmarks/peers/stores.py`), in a Redis database number and a PostgreSQL database of their own, emptied or
dropped after each run. Nothing here listens on a port.

Each peer and rate is one run: its 2 worker processes start (`benchmarks/peers/specs.py`), `--senders`
processes offer jobs at the rate for `--duration` s paced by the wall clock as jobmesh's load is
(`benchmarks/peers/sender.py`), each job a no-op that records its start (`benchmarks/peers/stamps.py`).
Warm-up jobs go first, until both worker processes have started one. After the window, up to `--drain` s
for stragglers; the run ends as soon as every job has started.

What it prints, per peer and rate:
- completed/s: jobs started per second from the first offer to the last start (a no-op ends as it starts):
  the offered rate when the peer keeps up, what it managed when not;
- submit→start: a job's first start minus the instant its enqueue call began, p50 / p99 / max;
- not started: offered jobs that had not started by the end (a failed enqueue call counts here too);
  duplicates: starts of a job beyond its first;
- sender lag: offered instant → enqueue call, which shows whether the load kept to its rate;
- CPU seconds per 1,000 started jobs of the worker processes (whole trees: Celery's main process and its
  pool, Dramatiq's and its workers), of the broker's server (redis-server, or PostgreSQL's postmaster with
  every backend) and of the senders (`load`), from the window's start to the end, with how busy the whole
  machine was meanwhile (others' processes skew the figures).
Then a markdown table of every run; every number goes to a results file (`benchmarks/results_file.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from queue import Empty, Queue
from typing import IO, Any

from benchmarks import cpu, results_file
from benchmarks.peers import stores, venv
from benchmarks.peers.results import Measured, Starts, figures, markdown, read_submitted, report
from benchmarks.peers.sender import Plan
from benchmarks.peers.specs import PEERS, Peer
from benchmarks.peers.stamps import BROKER_VARIABLE, QUEUE_VARIABLE, STARTS_VARIABLE

REPO = Path(__file__).resolve().parents[2]
WARM_BATCH = 20
STARTUP_TIMEOUT = 90.0  # seconds for a peer's processes to come up and start their warm-up jobs
STOP_TIMEOUT = 20.0


# ---------------------------------------------------------------- processes


@dataclass
class Worker:
    """A peer's worker process group (its own session, so that a stop reaches all it forked)."""

    popen: subprocess.Popen[bytes]
    log: Path

    def check_alive(self) -> None:
        if self.popen.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"a worker exited ({self.popen.returncode}), log {self.log}:\n{tail}")

    def stop(self) -> None:
        _stop_group(self.popen)


def _stop_group(popen: subprocess.Popen[Any]) -> None:
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()


class Sender:
    """A sender process in the peers venv, driven by lines on its stdin and stdout (see `sender.py`)."""

    def __init__(self, popen: subprocess.Popen[str], plan: Plan, log: Path) -> None:
        self.popen, self.plan, self.log = popen, plan, log
        self._lines: Queue[str | None] = Queue()
        assert popen.stdout is not None
        threading.Thread(target=self._read, args=(popen.stdout,), daemon=True).start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def expect(self, word: str, timeout: float) -> list[str]:
        """The words after `word` in the sender's next line that starts with it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except Empty:
                raise SystemExit(
                    f"sender {self.plan.index + 1} did not say {word!r} in {timeout:g} s"
                ) from None
            if line is None:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise SystemExit(f"sender {self.plan.index + 1} exited, log {self.log}:\n{tail}")
            if (words := line.split()) and words[0] == word:
                return words[1:]

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.send("exit")
        try:
            self.popen.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            _stop_group(self.popen)
        for pipe in (self.popen.stdin, self.popen.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


@dataclass(frozen=True, slots=True)
class Run:
    """One peer at one rate: where its processes find their broker, queue and folder."""

    peer: Peer
    rate: float
    python: Path  # the peers venv's
    folder: Path
    queue: str
    env: dict[str, str]

    def command(self, words: Sequence[str], index: int = 0) -> list[str]:
        """A command of the peers venv's bin folder, with this run's names in it."""
        args = [word.format(queue=self.queue, index=index) for word in words]
        return [str(self.python.parent / args[0]), *args[1:]]


def peer_env(python: Path, store: stores.Store, queue: str, starts: Path, peer: Peer) -> dict[str, str]:
    """The environment of a peer's processes: the peers venv first on the PATH, this repository importable."""
    inherited = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH")}
    return {
        **inherited,
        "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        BROKER_VARIABLE: store.url,
        QUEUE_VARIABLE: queue,
        STARTS_VARIABLE: str(starts),
        **peer.env,
    }


def run_setup(run: Run) -> None:
    if not run.peer.setup:
        return
    log = run.folder / "setup.log"
    with log.open("wb") as output:
        command = run.command(run.peer.setup)
        done = subprocess.run(
            command, stdout=output, stderr=subprocess.STDOUT, env=run.env, cwd=REPO, timeout=120, check=False
        )
    if done.returncode != 0:
        raise SystemExit(
            f"{run.peer.name} setup failed, log {log}:\n{log.read_text(errors='replace')[-3000:]}"
        )


def start_worker(run: Run, index: int) -> Worker:
    log = run.folder / f"worker-{index}.log"
    with log.open("ab") as output:
        popen = subprocess.Popen(
            run.command(run.peer.workers[index - 1], index),
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=run.env,
            cwd=REPO,
            start_new_session=True,
        )
    return Worker(popen, log)


def start_sender(run: Run, args: argparse.Namespace, index: int) -> Sender:
    output = str(run.folder / f"load-{index + 1}.txt")
    plan = Plan(run.peer.module, run.rate, args.duration, args.tick, args.senders, index, output)
    log = run.folder / f"sender-{index + 1}.log"
    with log.open("ab") as errors:
        popen = subprocess.Popen(
            [str(run.python), "-m", "benchmarks.peers.sender", json.dumps(asdict(plan))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=run.env,
            cwd=REPO,
            text=True,
            start_new_session=True,
        )
    return Sender(popen, plan, log)


@contextlib.contextmanager
def processes(run: Run, args: argparse.Namespace) -> Iterator[tuple[list[Worker], list[Sender]]]:
    """The peer's workers and the senders, ready; all stopped afterwards, senders first."""
    workers: list[Worker] = []
    senders: list[Sender] = []
    try:
        workers.extend(start_worker(run, index) for index in range(1, len(run.peer.workers) + 1))
        senders.extend(start_sender(run, args, index) for index in range(args.senders))
        for sender in senders:
            sender.expect("ready", STARTUP_TIMEOUT)
        yield workers, senders
    finally:
        for sender in senders:
            sender.stop()
        for worker in workers:
            worker.stop()


# ---------------------------------------------------------------- one run


def check_alive(workers: Sequence[Worker]) -> None:
    for worker in workers:
        worker.check_alive()


def warm_up(senders: Sequence[Sender], starts: Starts, workers: Sequence[Worker], wanted: int) -> None:
    """Warm-up jobs from every sender (so that its client has connected) until `wanted` worker processes
    have started one, then until all of them have started: the window opens on an empty queue."""
    deadline, sent = time.monotonic() + STARTUP_TIMEOUT, 0
    while len(starts.warm_processes) < wanted and time.monotonic() < deadline:
        check_alive(workers)
        for sender in senders:
            sender.send(f"warm {WARM_BATCH}")
        for sender in senders:
            sender.expect("warmed", STARTUP_TIMEOUT)
        sent += WARM_BATCH * len(senders)
        time.sleep(0.5)
        starts.read()
    while starts.warm_started() < sent and time.monotonic() < deadline:
        time.sleep(0.1)
        starts.read()
    if not starts.warm_processes:
        raise SystemExit(f"no warm-up job started in {STARTUP_TIMEOUT:g} s: see {workers[0].log}")
    if len(starts.warm_processes) < wanted:
        print(f"  warning: only {len(starts.warm_processes)} of {wanted} worker processes took warm-up jobs")


def cpu_groups(workers: Sequence[Worker], store: stores.Store, senders: Sequence[Sender]) -> list[cpu.Group]:
    groups = [cpu.Group("workers", tuple(worker.popen.pid for worker in workers))]
    if store.pid is not None:
        groups.append(cpu.Group("broker", (store.pid,)))
    return [*groups, cpu.Group("load", tuple(sender.popen.pid for sender in senders))]


def wait_for_starts(starts: Starts, jobs: range, deadline: float, workers: Sequence[Worker]) -> None:
    while time.time() < deadline:
        starts.read()
        if starts.started(jobs) == len(jobs):
            return
        check_alive(workers)
        time.sleep(0.2)


@dataclass(frozen=True, slots=True)
class Window:
    """What one measured window covers."""

    rate: float
    duration: float
    drain: float

    @property
    def jobs(self) -> range:
        return range(round(self.rate * self.duration))


def progress(window: Window, t0: float, starts: Starts, workers: Sequence[Worker]) -> None:
    """Prints offered and started every 5 s until the window is over."""
    window_end = t0 + window.duration
    while (now := time.time()) < window_end:
        time.sleep(min(5.0, window_end - now))
        starts.read()
        check_alive(workers)
        offered = min(time.time() - t0, window.duration) * window.rate
        started = starts.started(window.jobs)
        print(f"  t+{time.time() - t0:5.1f} s: offered {offered:>8,.0f}  started {started:>8,}", flush=True)


def measure(
    window: Window,
    senders: Sequence[Sender],
    workers: Sequence[Worker],
    starts: Starts,
    groups: list[cpu.Group],
) -> tuple[float, float, dict[str, float], float]:
    """The offered window and the wait for stragglers: (t0, end, CPU seconds by group, machine busy %)."""
    t0 = math.ceil(time.time()) + 1.0
    for sender in senders:
        sender.send(f"go {t0!r}")
    time.sleep(max(t0 - time.time() - 0.02, 0.0))
    before, machine_before = cpu.snapshot(groups), cpu.machine_jiffies()
    progress(window, t0, starts, workers)
    for sender in senders:  # one that fell behind the rate finishes late: allowed duration + drain more
        sender.expect("done", window.duration + window.drain)
    wait_for_starts(starts, window.jobs, max(t0 + window.duration, time.time()) + window.drain, workers)
    end = time.time()
    after, machine_after = cpu.snapshot(groups), cpu.machine_jiffies()
    starts.read()
    busy, total = (now - then for now, then in zip(machine_after, machine_before, strict=True))
    cpu_seconds = {name: max(after[name] - before.get(name, 0.0), 0.0) for name in after}
    return t0, end, cpu_seconds, 100.0 * busy / total if total else math.nan


@contextlib.contextmanager
def store_for(peer: Peer, urls: dict[str, str], redis_db: int) -> Iterator[stores.Store]:
    if peer.store == "redis":
        with stores.redis_store(urls["JOBMESH_REDIS_URL"], redis_db) as store:
            yield store
    else:
        with stores.postgres_store(urls["JOBMESH_DATABASE_URL"]) as store:
            yield store


def run_one(args: argparse.Namespace, peer: Peer, rate: float, work: Path) -> Measured:
    folder = work / f"{peer.name}-{rate:g}"
    (folder / "starts").mkdir(parents=True)
    queue, python = f"peers-{uuid.uuid4().hex[:8]}", venv.venv_python()
    window = Window(rate, args.duration, args.drain)
    print(
        f"{peer.name}: {rate:,.0f} jobs/s for {args.duration:g} s (queue {queue}, logs {folder})", flush=True
    )
    starts = Starts(folder / "starts")
    with store_for(peer, args.urls, args.redis_db) as store:
        run = Run(peer, rate, python, folder, queue, peer_env(python, store, queue, starts.folder, peer))
        run_setup(run)
        with processes(run, args) as (workers, senders):
            warm_up(senders, starts, workers, peer.worker_processes)
            groups = cpu_groups(workers, store, senders)
            t0, end, cpu_seconds, busy = measure(window, senders, workers, starts, groups)
    jobs = read_submitted([Path(sender.plan.output) for sender in senders])
    config = {
        "senders": args.senders,
        "tick": args.tick,
        "drain": args.drain,
        "worker_processes": peer.worker_processes,
    }
    version = args.versions[peer.library]
    return Measured(peer.name, version, rate, args.duration, t0, end, jobs, starts, cpu_seconds, busy, config)


# ---------------------------------------------------------------- the command


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--peers", default=",".join(PEERS), help=f"comma-separated, of {', '.join(PEERS)} (all)"
    )
    parser.add_argument("--rates", default="250,1000,2500", help="jobs offered per second, comma-separated")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of offered load per run (30)")
    parser.add_argument("--senders", type=int, default=2, help="load generator processes (2)")
    parser.add_argument(
        "--tick", type=float, default=0.05, help="seconds between a sender's sends, 0: none (0.05)"
    )
    parser.add_argument("--drain", type=float, default=30.0, help="seconds allowed for stragglers (30)")
    parser.add_argument(
        "--redis-db", type=int, default=15, help="the Redis database number of the peers (15)"
    )
    results_file.add_option(parser)
    parser.add_argument("--work", type=Path, help="folder for logs and records (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.peers.split(",") if name.strip()]
    if unknown := sorted(set(names) - set(PEERS)):
        parser.error(f"--peers takes {', '.join(PEERS)}; not {', '.join(unknown)}")
    try:
        args.rates = [float(rate) for rate in args.rates.split(",") if rate.strip()]
    except ValueError:
        parser.error("--rates is a comma-separated list of numbers")
    if not args.rates or min(args.rates) <= 0 or args.duration <= 0 or args.senders < 1 or args.tick < 0:
        parser.error("--rates and --duration must be positive, --senders at least 1, --tick not negative")
    args.peers = [PEERS[name] for name in names]
    return args


def run_all(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    results = []
    for peer in args.peers:
        for rate in args.rates:
            result = figures(run_one(args, peer, rate, work))
            print(report(result), flush=True)
            results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    recording = results_file.start("benchmarks.peers", argv)
    args = parse(argv)
    venv.ensure()
    args.versions, args.urls = venv.installed_versions(), stores.service_urls()
    work = args.work or Path(tempfile.mkdtemp(prefix="jobmesh-peers-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    finished = False
    try:
        results = run_all(args, work)
        finished = True
    finally:
        if args.work is None and not args.keep and finished:
            shutil.rmtree(work, ignore_errors=True)
        elif not finished:
            print(f"logs kept in {work}", file=sys.stderr)
    print(f"\npeers, {time.strftime('%Y-%m-%d')} ({results_file.machine()}):")
    print(markdown(results))
    recording.save({"runs": results}, args.json)
    return 0
