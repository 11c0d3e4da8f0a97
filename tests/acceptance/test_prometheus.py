"""Debian's Prometheus scrapes a real mesh (a server with 2 workers, a watcher and an executor, on PostgreSQL,
Kafka and Redis) at each process's `/metrics`: PromQL on the lateness histogram finds the runs just made,
N creates spread over both workers are counted exactly N times (an idempotent replay not at all), and
`promtool check metrics` passes on what every process serves."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from jobmesh.v1 import job_service_pb2, job_service_pb2_grpc, run_pb2, search_service_pb2
from jobmesh.v1 import search_service_pb2_grpc as search_grpc
from tests.acceptance.mesh import TERMINAL, Mesh, Process, command_job, get_run
from tests.acceptance.proc import sockets_of, tcp_ports, workers_of
from tests.acceptance.processes import free_port
from tests.support import eventually, prometheus_tools

pytestmark = [pytest.mark.postgres, pytest.mark.kafka, pytest.mark.redis, pytest.mark.processes]

CREATES = 12


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as answer:
        body: bytes = answer.read()
        return body


@contextlib.contextmanager
def prometheus(tools: Path, folder: Path, targets: dict[str, str]) -> Iterator[str]:
    """Prometheus scraping `targets` (job -> HOST:PORT) every second; yields its API's base URL."""
    port = free_port()
    config = folder / "prometheus.yml"
    jobs = [
        {
            "job_name": job,
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "static_configs": [{"targets": [t]}],
        }
        for job, t in targets.items()
    ]
    config.write_text(json.dumps({"global": {"scrape_interval": "1s"}, "scrape_configs": jobs}))
    log = (folder / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            str(tools / "prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            assert process.poll() is None, (folder / "prometheus.log").read_text()
            try:
                return http_get(f"{base}/-/ready") is not None
            except OSError:
                return False

        eventually(ready, 60, "Prometheus to be ready")
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def query(base: str, promql: str) -> list[dict[str, object]]:
    answer = json.loads(http_get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"))
    assert answer["status"] == "success", answer
    result: list[dict[str, object]] = answer["data"]["result"]
    return result


def scalar(base: str, promql: str) -> float | None:
    """The value of a query that yields one series (None while it yields none)."""
    result = query(base, promql)
    if not result:
        return None
    assert len(result) == 1, result
    value = result[0]["value"]
    assert isinstance(value, list)
    return float(value[1])


def holders(server: Process) -> dict[int, int]:
    """By local port of this test's connections to the server: the worker that holds the other end."""
    port = int(server.address.rsplit(":", 1)[1])
    ends = tcp_ports()
    mine = {ends[i][0] for i in sockets_of(os.getpid()) if ends.get(i, (0, 0))[1] == port}
    found = {}
    for worker in workers_of(server):
        for inode in sockets_of(worker):
            local, remote = ends.get(inode, (0, 0))
            if local == port and remote in mine:
                found[remote] = worker
    return found


def stubs_on_both_workers(mesh: Mesh, server: Process) -> list[job_service_pb2_grpc.JobServiceStub]:
    """A connection (a channel of its own, not sharing gRPC's subchannels) to each worker."""
    by_worker: dict[int, job_service_pb2_grpc.JobServiceStub] = {}
    for _ in range(60):
        channel = grpc.insecure_channel(server.address, options=[("grpc.use_local_subchannel_pool", 1)])
        mesh._channels.append(channel)  # closed with the mesh
        before = set(holders(server))
        search_grpc.SearchServiceStub(channel).ListJobs(search_service_pb2.ListJobsRequest(page_size=1))
        new = {port: worker for port, worker in holders(server).items() if port not in before}
        if len(new) == 1:
            by_worker.setdefault(next(iter(new.values())), job_service_pb2_grpc.JobServiceStub(channel))
        if len(by_worker) == 2:
            return list(by_worker.values())
    raise AssertionError(f"60 connections did not reach both workers: {by_worker}")


def test_prometheus_scrapes_a_mesh_and_counts_creates_once(mesh: Mesh, tmp_path: Path) -> None:
    tools = prometheus_tools()
    health = {name: f"127.0.0.1:{free_port()}" for name in ("server", "watcher", "executor")}
    mesh.env["JOBMESH_SERVER_WORKERS"] = "2"
    server = mesh.server(args=["--health-listen", health["server"]])
    mesh.watcher(args=["--health-listen", health["watcher"]])
    mesh.executor(server, args=["--health-listen", health["executor"]])
    stubs = stubs_on_both_workers(mesh, server)
    _, search = mesh.stubs(server)

    names = []
    for index in range(CREATES):
        request = job_service_pb2.CreateJobRequest(job=command_job(mesh.queue, "true"))
        if index == 0:
            request.request_id = "metrics-replayed-create"
        names.append(stubs[index % 2].CreateJob(request).run.name)
    # The same request again, on the other worker: the job made before, not a new one.
    replay = job_service_pb2.CreateJobRequest(
        job=command_job(mesh.queue, "true"), request_id="metrics-replayed-create"
    )
    assert stubs[1].CreateJob(replay).run.name == names[0]

    def all_ended() -> bool:
        return all(get_run(search, name).state in TERMINAL for name in names)

    eventually(all_ended, 90, "the runs to end")
    assert {get_run(search, name).state for name in names} == {run_pb2.RUN_STATE_SUCCEEDED}

    # Whichever worker the shared health port hands a scrape to answers for both.
    for _ in range(6):
        text = http_get(f"http://{health['server']}/metrics").decode()
        assert f"jobmesh_jobs_created_total {float(CREATES)}" in text.splitlines()

    with prometheus(
        tools, tmp_path, {f"jobmesh-{name}": address for name, address in health.items()}
    ) as base:
        queue = f'queue="{mesh.queue}"'

        def scraped() -> bool:
            up = query(base, "up")
            return len(up) == 3 and all(series["value"][1] == "1" for series in up)  # type: ignore[index]

        eventually(scraped, 60, "Prometheus to scrape the three processes")
        eventually(
            lambda: scalar(base, 'sum(jobmesh_jobs_created_total{job="jobmesh-server"})') is not None,
            30,
            "the creates to be scraped",
        )
        assert scalar(base, "sum(jobmesh_jobs_created_total)") == CREATES
        assert scalar(base, f"sum(jobmesh_run_lateness_seconds_count{{{queue}}})") == CREATES
        by_bucket = {
            series["metric"]["le"]: float(series["value"][1])  # type: ignore[index]
            for series in query(base, f"sum by (le) (jobmesh_run_lateness_seconds_bucket{{{queue}}})")
        }
        assert by_bucket["+Inf"] == CREATES
        assert {"0.001", "0.01", "1.0"} <= by_bucket.keys()  # 1 ms, 10 ms and 1 s told apart
        ordered = sorted(by_bucket.items(), key=lambda item: float(item[0]))
        assert [count for _, count in ordered] == sorted(count for _, count in ordered)  # cumulative
        p99 = scalar(
            base, f"histogram_quantile(0.99, sum by (le) (jobmesh_run_lateness_seconds_bucket{{{queue}}}))"
        )
        assert p99 is not None
        assert 0 <= p99 < 60
        lanes = query(base, f"sum by (lane, trigger) (jobmesh_run_lateness_seconds_count{{{queue}}})")
        assert [series["metric"] for series in lanes] == [{"lane": "NORMAL", "trigger": "SCHEDULE"}]
        assert scalar(base, 'sum(jobmesh_runs_ended_total{outcome="SUCCEEDED"})') == CREATES
        assert scalar(base, "sum(jobmesh_executor_slots)") is not None
        eventually(lambda: scalar(base, "max(jobmesh_watcher_leading)") == 1, 30, "the watcher's lease")
        assert scalar(base, 'count(jobmesh_build_info{version!=""})') == 3
        eventually(
            lambda: scalar(base, 'count(jobmesh_kafka_consumer_lag{job="jobmesh-executor"})'),
            30,
            "the executor's Kafka consumer lag",
        )
        assert scalar(base, 'sum(jobmesh_rpc_duration_seconds_count{method=~".*/CreateJob"})') == CREATES + 1

    for name, address in health.items():
        served = http_get(f"http://{address}/metrics")
        checked = subprocess.run(
            [str(tools / "promtool"), "check", "metrics"],
            input=served,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert checked.returncode == 0, (name, checked.stdout, checked.stderr)
