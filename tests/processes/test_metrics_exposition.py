"""`/metrics` on the health endpoint: this process's metrics in Prometheus's text format; and, for the workers
of `jobmesh server --workers N`, every worker's metrics from whichever worker is asked (a dead worker's live
gauges dropped, its counts kept)."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobmesh.core.metrics import JOBS_CREATED
from jobmesh.core.readiness import Readiness
from jobmesh.processes.health_endpoint import HealthEndpoint
from jobmesh.processes.metrics_exposition import SharedMetrics
from jobmesh.processes.settings import METRICS_FOLDER_VARIABLE

# What a worker does: a create counted, an executor connected.
WORKER = """
from jobmesh.core import metrics
metrics.JOBS_CREATED.inc({created})
metrics.EXECUTORS_CONNECTED.set(1)
import os, sys
sys.stdout.write(str(os.getpid()))
"""
READ = """
import sys
from jobmesh.processes.metrics_exposition import metrics_text
sys.stdout.write(metrics_text().decode())
"""


def python(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=dict(os.environ),
    ).stdout


def sample(text: str, name: str) -> float | None:
    found = [line.split()[-1] for line in text.splitlines() if line.split(" ", 1)[0] == name]
    return float(found[0]) if found else None


@pytest.fixture
def shared() -> Iterator[SharedMetrics]:
    assert METRICS_FOLDER_VARIABLE not in os.environ
    metrics = SharedMetrics()
    try:
        yield metrics
    finally:
        metrics.close()
    assert METRICS_FOLDER_VARIABLE not in os.environ


def test_the_health_endpoint_serves_this_process_metrics() -> None:
    JOBS_CREATED.inc(0)
    endpoint = HealthEndpoint(Readiness("server"), "127.0.0.1:0")
    try:
        connection = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        body = response.read().decode()
        connection.close()
    finally:
        endpoint.close()
    assert response.status == 200
    assert response.getheader("Content-Type", "").startswith("text/plain; version=0.0.4")
    assert "# TYPE jobmesh_run_lateness_seconds histogram" in body
    assert 'jobmesh_build_info{version="' in body
    assert sample(body, "jobmesh_jobs_created_total") is not None


def test_workers_metrics_are_summed_and_a_dead_ones_live_gauges_dropped(shared: SharedMetrics) -> None:
    first = int(python(WORKER.format(created=2)))
    python(WORKER.format(created=3))
    text = python(READ)
    assert sample(text, "jobmesh_jobs_created_total") == 5
    assert sample(text, "jobmesh_executors_connected") == 2
    shared.worker_died(first)
    text = python(READ)
    assert sample(text, "jobmesh_jobs_created_total") == 5  # a count never goes back
    assert sample(text, "jobmesh_executors_connected") == 1


def test_the_folder_is_removed_when_the_server_stops() -> None:
    metrics = SharedMetrics()
    folder = Path(metrics.folder)
    python(WORKER.format(created=1))
    assert any(folder.iterdir())
    metrics.close()
    assert not folder.exists()
