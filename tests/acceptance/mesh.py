"""A real jobmesh deployment for acceptance tests: servers, watchers and executors as separate processes on
PostgreSQL, Kafka and Redis, each process killable on its own."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
from google.protobuf import field_mask_pb2

from jobmesh.transport.tls import ChannelTls
from jobmesh.transport.tls import channel as channel_to
from jobmesh.v1 import (
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    run_pb2,
    search_service_pb2,
    search_service_pb2_grpc,
)
from tests.acceptance.processes import BIN, REPO, ProcessExited, free_port, wait_serving
from tests.support import eventually

STAMP = 'date +%s.%N >> "{file}"'  # a command that records the instant it really starts


def escaping_sleeps(starts: Path, pids: Path) -> str:
    """A command that stamps its start, then runs `sleep 60` and a `setsid sleep 60` that leaves its process
    group, their pids appended to `pids`."""
    stamp = STAMP.format(file=starts)
    return f'{stamp}; setsid sleep 60 & echo $! >> "{pids}"; sleep 60 & echo $! >> "{pids}"; wait'


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    address: str = ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)
            self.popen.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s: a test's end needs no drain (an executor's would wait for the
        attempts still running)."""
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Mesh:
    """Processes share one database, Kafka and Redis; `queue` isolates this mesh's runs on Kafka."""

    tmp: Path
    env: dict[str, str]
    queue: str = field(default_factory=lambda: f"acc-{uuid.uuid4().hex[:8]}")
    processes: list[Process] = field(default_factory=list)
    _channels: list[grpc.Channel] = field(default_factory=list)

    def _spawn(self, name: str, args: list[str], extra_env: dict[str, str] | None = None) -> Process:
        log = self.tmp / f"{name}.log"
        with log.open("ab") as output:
            popen = subprocess.Popen(
                [str(BIN / "jobmesh"), *args],
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env, **(extra_env or {})},
                cwd=REPO,
                start_new_session=True,
            )
        process = Process(name, popen, log)
        self.processes.append(process)
        return process

    def server(
        self, name: str = "server", args: Sequence[str] = (), tls: ChannelTls | None = None
    ) -> Process:
        """`jobmesh server ARGS` on a free port; `tls`: how to reach it when ARGS turn TLS on."""
        address = f"127.0.0.1:{free_port()}"
        process = self._spawn(name, ["server", "--listen", address, *args])
        process.address = address
        try:
            wait_serving(address, timeout=60, tls=tls, process=process.popen)
        except (grpc.RpcError, ProcessExited):
            raise AssertionError(f"{name} did not start:\n{process.log.read_text()}") from None
        return process

    def watcher(self, name: str = "watcher", args: Sequence[str] = ()) -> Process:
        return self._spawn(name, ["watcher", *args], {"JOBMESH_WATCHER_ID": name})

    def executor(
        self,
        server: Process,
        name: str = "executor",
        concurrency: int | None = None,
        *,
        address: str | None = None,
        args: Sequence[str] = (),
    ) -> Process:
        """`jobmesh executor` towards `server` (or `address`, its executor address), with extra ARGS."""
        command = ["executor", "--server", address or server.address, "--queues", self.queue]
        command += ["--allowed-commands", "/**", *args]
        if concurrency is not None:
            command += ["--concurrency", str(concurrency)]
        return self._spawn(name, command, {"JOBMESH_EXECUTOR_ID": name})

    def stubs(
        self, server: Process, tls: ChannelTls | None = None
    ) -> tuple[job_service_pb2_grpc.JobServiceStub, search_service_pb2_grpc.SearchServiceStub]:
        channel = channel_to(server.address, tls)
        self._channels.append(channel)
        return job_service_pb2_grpc.JobServiceStub(channel), search_service_pb2_grpc.SearchServiceStub(
            channel
        )

    def close(self) -> None:
        for channel in self._channels:
            channel.close()
        for process in reversed(self.processes):
            process.stop()

    def logs(self) -> str:
        return "\n".join(f"==== {p.name}\n{p.log.read_text()[-6000:]}" for p in self.processes)


def command_job(queue: str, script: str, **fields: object) -> job_pb2.Job:
    job = job_pb2.Job(
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["sh", "-c", script])),
        queue=queue,
        **fields,  # type: ignore[arg-type]
    )
    if not job.HasField("schedule"):
        job.schedule.immediate.SetInParent()
    return job


def get_run(search: search_service_pb2_grpc.SearchServiceStub, name: str) -> run_pb2.Run:
    run: run_pb2.Run = search.GetRun(search_service_pb2.GetRunRequest(name=name)).run
    return run


def runs_of(
    search: search_service_pb2_grpc.SearchServiceStub, job: str, filter_text: str = ""
) -> list[run_pb2.Run]:
    runs: list[run_pb2.Run] = []
    token = ""
    while True:
        page = search.ListRuns(
            search_service_pb2.ListRunsRequest(
                parent=job,
                filter=filter_text,
                page_size=1000,
                page_token=token,
                order_by="schedule_time",
                show_upcoming=True,
            )
        )
        runs.extend(page.runs)
        token = page.next_page_token
        if not token:
            return runs


def create(jobs: job_service_pb2_grpc.JobServiceStub, job: job_pb2.Job) -> job_service_pb2.CreateJobResponse:
    response: job_service_pb2.CreateJobResponse = jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job))
    return response


def read_times(path: Path) -> list[datetime]:
    if not path.exists():
        return []
    return [datetime.fromtimestamp(float(line), UTC) for line in path.read_text().split()]


def at(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


TERMINAL = {
    run_pb2.RUN_STATE_SUCCEEDED,
    run_pb2.RUN_STATE_FAILED,
    run_pb2.RUN_STATE_CANCELLED,
    run_pb2.RUN_STATE_TIMED_OUT,
    run_pb2.RUN_STATE_DEAD_LETTERED,
}


def warm_up(
    mesh: Mesh, jobs: job_service_pb2_grpc.JobServiceStub, search: search_service_pb2_grpc.SearchServiceStub
) -> None:
    """Runs one job through the mesh, so that measurements start once executors have joined the queue."""
    run = create(jobs, command_job(mesh.queue, "true")).run
    eventually(lambda: get_run(search, run.name).state == run_pb2.RUN_STATE_SUCCEEDED, 60, "a warm-up run")


def wait_for_run(
    search: search_service_pb2_grpc.SearchServiceStub,
    name: str,
    predicate: Callable[[run_pb2.Run], bool],
    timeout: float,
    what: str,
) -> run_pb2.Run:
    """Polls the run until `predicate` holds; returns it then."""
    found: list[run_pb2.Run] = []

    def check() -> bool:
        run = get_run(search, name)
        if predicate(run):
            found.append(run)
            return True
        return False

    eventually(check, timeout, what)
    return found[0]


def pid_gone(pid: int) -> bool:
    """Exited (a zombie waiting for its parent counts: it runs no more)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def pids_in(path: Path, count: int) -> list[int] | None:
    """The pids a command wrote to `path`, once it wrote `count` of them."""
    found = [int(line) for line in path.read_text().split()] if path.exists() else []
    return found if len(found) >= count else None


def running_sleep(
    mesh: Mesh,
    jobs: job_service_pb2_grpc.JobServiceStub,
    search: search_service_pb2_grpc.SearchServiceStub,
    pid_file: Path,
) -> tuple[str, int]:
    job = command_job(mesh.queue, f'echo $$ > "{pid_file}"; exec sleep 60')
    run_name = create(jobs, job).run.name
    wait_for_run(search, run_name, lambda r: r.state == run_pb2.RUN_STATE_RUNNING, 20, "sleep 60 to run")
    pid = eventually(lambda: pid_file.read_text().strip() if pid_file.exists() else None, 10, "the pid")
    return run_name, int(pid)


# A job that prints 600,000 lines of 100 characters: 60 MB with their newlines, at least six times the log
# budget of the tests that use it and three times the growth they allow (an executor that kept it would fail).
FLOOD_LINES = 600_000
FLOOD = f"yes {'x' * 99} | head -n {FLOOD_LINES}"
FLOOD_MB = FLOOD_LINES * 101 // 10**6


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def peak_rss_while(pid: int, done: Callable[[], bool], timeout: float) -> int:
    """The process's largest resident set, sampled every 50 ms until `done()` (or the timeout)."""
    peak, deadline = rss_bytes(pid), time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not done after {timeout}s")
        peak = max(peak, rss_bytes(pid))
        time.sleep(0.05)
    return max(peak, rss_bytes(pid))


def log_texts(search: search_service_pb2_grpc.SearchServiceStub, run: str) -> list[str]:
    lines = search.TailRunLogs(search_service_pb2.TailRunLogsRequest(name=run), timeout=120)
    return [line.text for response in lines for line in response.lines]


def assert_flood_told_truly(texts: list[str], budget_lines: int) -> None:
    """Kept lines up to the budget, then one marker whose count is exactly what was not kept."""
    kept = [text for text in texts if not text.startswith("jobmesh:")]
    [marker] = [text for text in texts if text.startswith("jobmesh:")]
    assert len(kept) == budget_lines
    assert f"{FLOOD_LINES - budget_lines:,} more lines" in marker
    assert "log budget" in marker
    assert texts[-1] == marker


EVERY_SECOND = job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="* * * * * *"))


def check_a_change_stops_a_cron_job(
    jobs: job_service_pb2_grpc.JobServiceStub,
    search: search_service_pb2_grpc.SearchServiceStub,
    job: job_pb2.Job,
    stamps: Path,
    change: str,
) -> None:
    """Issue 20, on any mesh: `job` (a cron job every second whose command stamps `stamps`) is made and
    starts; a pause, delete or schedule change (`change`) withdraws its runs made ahead, so nothing starts
    later than 1 s after the change is acknowledged and nothing is left pending; after a pause, a resume
    starts again at the next fire time."""
    name = create(jobs, job).job.name
    eventually(lambda: len(read_times(stamps)) >= 3, 20, "three occurrences to start")

    _change(jobs, name, change)
    acknowledged = datetime.now(UTC)
    time.sleep(5)
    late = [started - acknowledged for started in read_times(stamps) if started > acknowledged]
    assert all(delay <= timedelta(seconds=1) for delay in late), late
    waiting = (run_pb2.RUN_STATE_SCHEDULED, run_pb2.RUN_STATE_QUEUED)
    pending = [run.name for run in runs_of(search, name) if run.state in waiting]
    assert not pending, pending
    if change != "pause":
        return

    resumed = datetime.now(UTC)
    jobs.ResumeJob(job_service_pb2.ResumeJobRequest(name=name))
    again = eventually(
        lambda: [started for started in read_times(stamps) if started > resumed],
        20,
        "a start after the resume",
    )
    assert again[0] - resumed < timedelta(seconds=3), again[0] - resumed  # next fire time, within 2 s


def _change(jobs: job_service_pb2_grpc.JobServiceStub, name: str, change: str) -> None:
    if change == "pause":
        jobs.PauseJob(job_service_pb2.PauseJobRequest(name=name))
    elif change == "delete":
        jobs.DeleteJob(job_service_pb2.DeleteJobRequest(name=name))
    else:
        yearly = job_pb2.Job(name=name)
        yearly.schedule.cron.expression = "0 0 1 1 *"
        mask = field_mask_pb2.FieldMask(paths=["schedule"])
        jobs.UpdateJob(job_service_pb2.UpdateJobRequest(job=yearly, update_mask=mask))
