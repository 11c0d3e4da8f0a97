"""`jobmesh dev`, the embedded default, killed with SIGKILL: its commands die with it, and on restart the runs
it had queued in memory run at once."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from jobmesh.transport.tls import ChannelTls
from jobmesh.transport.tls import channel as channel_to
from jobmesh.v1 import job_pb2, job_service_pb2_grpc, run_pb2, search_service_pb2_grpc
from tests.acceptance.mesh import (
    EVERY_SECOND,
    FLOOD,
    FLOOD_MB,
    STAMP,
    TERMINAL,
    assert_flood_told_truly,
    check_a_change_stops_a_cron_job,
    create,
    escaping_sleeps,
    get_run,
    log_texts,
    peak_rss_while,
    pid_gone,
    pids_in,
    read_times,
    rss_bytes,
    runs_of,
    wait_for_run,
)
from tests.acceptance.processes import BIN, REPO, ProcessExited, free_port, wait_serving
from tests.support import environment_without_services, eventually

pytestmark = pytest.mark.processes

Stubs = tuple[job_service_pb2_grpc.JobServiceStub, search_service_pb2_grpc.SearchServiceStub]


@contextmanager
def dev(
    tmp_path: Path, address: str, *flags: str, tls: ChannelTls | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], Stubs]]:
    """`jobmesh dev` on a store in tmp_path, with nothing of the environment's services; `tls` when its
    flags make it serve TLS."""
    env = environment_without_services()
    env["JOBMESH_DASHBOARD"] = "off"  # no Envoy on :8080 here: tests/web runs the dashboard on a free port
    store = f"sqlite:///{tmp_path / 'dev.sqlite3'}"
    with (tmp_path / "dev.log").open("ab") as log:
        process = subprocess.Popen(
            [str(BIN / "jobmesh"), "dev", "--listen", address, "--database-url", store, *flags],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
    try:
        try:
            wait_serving(address, timeout=60, tls=tls, process=process)
        except (grpc.RpcError, ProcessExited):
            raise AssertionError((tmp_path / "dev.log").read_text()) from None
        with channel_to(address, tls) as channel:
            yield (
                process,
                (
                    job_service_pb2_grpc.JobServiceStub(channel),
                    search_service_pb2_grpc.SearchServiceStub(channel),
                ),
            )
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def command(script: str) -> job_pb2.Job:
    return job_pb2.Job(
        schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()),
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["sh", "-c", script])),
    )


def test_the_commands_of_a_killed_dev_die_with_it(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    with dev(tmp_path, f"127.0.0.1:{free_port()}") as (process, (jobs, _)):
        create(jobs, command(escaping_sleeps(tmp_path / "starts", pids)))
        sleeps = eventually(lambda: pids_in(pids, 2), 20, "both sleeps to start")
        os.killpg(process.pid, signal.SIGKILL)  # the dev process and its own group: not the sleeps' sessions
        eventually(lambda: all(pid_gone(pid) for pid in sleeps), 10, "both sleeps to die with jobmesh dev")


def test_a_flood_of_output_is_cut_at_the_budget_with_a_true_marker(tmp_path: Path) -> None:
    """On SQLite, with a budget of 10,000 lines (the default's 100,000 take the embedded store 15 s to write).
    The executor's memory is measured where it is a process of its own (test_pipeline): here it shares one
    with the server and SQLite's caches, and the figure is printed only."""
    with dev(tmp_path, f"127.0.0.1:{free_port()}", "--attempt-log-lines", "10000") as (
        process,
        (jobs, search),
    ):
        before = rss_bytes(process.pid)
        name = create(jobs, command(FLOOD)).run.name
        peak = peak_rss_while(process.pid, lambda: get_run(search, name).state in TERMINAL, timeout=120)
        growth = (peak - before) / 2**20
        print(f"a {FLOOD_MB} MB flood: jobmesh dev (server, watcher, executor) grew by {growth:.1f} MiB")
        assert get_run(search, name).state == run_pb2.RUN_STATE_SUCCEEDED
        assert_flood_told_truly(log_texts(search, name), budget_lines=10_000)


@pytest.mark.timing
def test_runs_queued_in_memory_run_at_once_after_a_restart(tmp_path: Path) -> None:
    starts, address = tmp_path / "starts", f"127.0.0.1:{free_port()}"
    with dev(tmp_path, address, "--concurrency", "1") as (process, (jobs, search)):
        busy = create(jobs, command("sleep 60")).run.name
        wait_for_run(search, busy, lambda r: r.state == run_pb2.RUN_STATE_RUNNING, 20, "the sleep to run")
        queued = [create(jobs, command(STAMP.format(file=starts))).run.name for _ in range(5)]
        eventually(
            lambda: all(get_run(search, name).state == run_pb2.RUN_STATE_QUEUED for name in queued),
            10,
            "the runs to wait QUEUED behind the busy executor",
        )
        os.killpg(process.pid, signal.SIGKILL)
    with dev(tmp_path, address) as (_, (_, search)):
        restarted = time.monotonic()
        eventually(lambda: len(read_times(starts)) == 5, 5, "the queued runs to start within 5 s")
        assert time.monotonic() - restarted < 5
        eventually(lambda: _succeeded(search) >= set(queued), 10, "the queued runs to succeed")


def _succeeded(search: search_service_pb2_grpc.SearchServiceStub) -> set[str]:
    return {run.name for run in runs_of(search, "jobs/-", "state = SUCCEEDED")}


@pytest.mark.parametrize("change", ["pause", "delete", "schedule change"])
def test_a_paused_deleted_or_rescheduled_cron_job_stops_at_once_on_jobmesh_dev(
    tmp_path: Path, change: str
) -> None:
    """Issue 20 on the embedded default (SQLite, in-process queue and signals), as on the production mesh
    (tests/acceptance/test_pipeline.py)."""
    stamps = tmp_path / "cron"
    job = command(STAMP.format(file=stamps))
    job.schedule.CopyFrom(EVERY_SECOND)
    with dev(tmp_path, f"127.0.0.1:{free_port()}") as (_, (jobs, search)):
        check_a_change_stops_a_cron_job(jobs, search, job, stamps, change)
