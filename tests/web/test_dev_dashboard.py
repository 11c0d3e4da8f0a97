"""`jobmesh dev`'s Envoy (a taken dashboard port: tests/processes/test_taken_ports.py): an Envoy that cannot
start is reported with its own words, `--dashboard off` starts none, and none outlives a killed dev; and
`--demo on`, which `make run` passes."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path

import grpc
import pytest

from jobmesh.processes.dashboard import DashboardConfig, DashboardError, Envoy
from jobmesh.v1 import (
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    run_pb2,
    search_service_pb2,
    search_service_pb2_grpc,
)
from tests.acceptance.processes import free_port, jobmesh_process

pytestmark = pytest.mark.processes


def test_an_envoy_that_cannot_start_is_reported_with_its_log(taken_port: int) -> None:
    envoy = Envoy(DashboardConfig(dashboard_listen=f"127.0.0.1:{taken_port}"), ("127.0.0.1", free_port()))
    envoy.start()
    try:
        with pytest.raises(
            DashboardError, match=f"Envoy did not start on http://127.0.0.1:{taken_port}"
        ) as caught:
            asyncio.run(envoy.ready())
    finally:
        envoy.stop()
    assert "address already in use" in str(caught.value).lower()


def test_dashboard_off_starts_no_envoy(tmp_path: Path) -> None:
    address, web = f"127.0.0.1:{free_port()}", free_port()
    args = ["dev", "--listen", address, "--dashboard", "off", "--dashboard-listen", f"127.0.0.1:{web}"]
    args += ["--database-url", f"sqlite:///{tmp_path / 'dev.db'}"]
    with jobmesh_process(args, address, tmp_path / "jobmesh.log"), socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", web)) != 0
    assert "dashboard:" not in (tmp_path / "jobmesh.log").read_text()


def _envoys_on(port: int) -> list[int]:
    """The pids of the Envoys started for a dashboard on `port` (their base id is the port)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"jobmesh-envoy-" in word for word in words) and str(port).encode() in words:
            found.append(int(entry.name))
    return found


def test_envoy_dies_with_a_killed_dev(tmp_path: Path) -> None:
    address, web = f"127.0.0.1:{free_port()}", free_port()
    args = ["dev", "--listen", address, "--dashboard-listen", f"127.0.0.1:{web}"]
    args += ["--database-url", f"sqlite:///{tmp_path / 'dev.db'}"]
    with jobmesh_process(args, address, tmp_path / "jobmesh.log") as dev:
        deadline = time.monotonic() + 20
        while not (envoys := _envoys_on(web)):
            assert time.monotonic() < deadline, (tmp_path / "jobmesh.log").read_text()
            time.sleep(0.1)
        os.killpg(dev.pid, signal.SIGKILL)  # Envoy runs in a session of its own: not in this group
        dev.wait()
        deadline = time.monotonic() + 10
        while _envoys_on(web):
            assert time.monotonic() < deadline, f"Envoy {envoys} outlived jobmesh dev"
            time.sleep(0.1)


def test_demo_on_gives_an_empty_store_a_job_that_runs_and_only_an_empty_one(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    args = ["dev", "--listen", address, "--dashboard", "off", "--demo", "on"]
    args += ["--database-url", f"sqlite:///{tmp_path / 'dev.db'}"]
    with jobmesh_process(args, address, tmp_path / "first.log"), grpc.insecure_channel(address) as channel:
        search = search_service_pb2_grpc.SearchServiceStub(channel)
        deadline = time.monotonic() + 30
        while not _succeeded_runs(search, "jobs/demo"):  # dev may serve before it has made the demo job
            assert time.monotonic() < deadline, (tmp_path / "first.log").read_text()
            time.sleep(0.5)
        job_service_pb2_grpc.JobServiceStub(channel).DeleteJob(
            job_service_pb2.DeleteJobRequest(name="jobs/demo")
        )
    assert "got the job `demo`" in (tmp_path / "first.log").read_text()
    with jobmesh_process(args, address, tmp_path / "second.log"), grpc.insecure_channel(address) as channel:
        search = search_service_pb2_grpc.SearchServiceStub(channel)
        listed = search.ListJobs(search_service_pb2.ListJobsRequest(show_deleted=True)).jobs
        assert [(job.name, job.state) for job in listed] == [("jobs/demo", job_pb2.JOB_STATE_DELETED)]
    assert "got the job" not in (tmp_path / "second.log").read_text()


def _succeeded_runs(search: search_service_pb2_grpc.SearchServiceStub, job: str) -> list[run_pb2.Run]:
    """The job's runs that succeeded; none while the job does not exist yet."""
    request = search_service_pb2.ListRunsRequest(parent=job, filter="state = SUCCEEDED")
    try:
        return list(search.ListRuns(request).runs)
    except grpc.RpcError as error:
        if error.code() is not grpc.StatusCode.NOT_FOUND:
            raise
        return []
