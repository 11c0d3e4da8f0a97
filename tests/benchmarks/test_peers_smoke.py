"""The peers benchmark at a tiny load, so that it cannot rot: every peer starts every job exactly once and
the figures come out. No timing is asserted (`benchmarks/peers/` measures; tests do not)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.peers.results import MARKDOWN_HEADER
from benchmarks.peers.specs import PEERS
from tests.support import require_service_url

REPO = Path(__file__).resolve().parents[2]
JOBS = 20

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def run_peers(output: Path) -> subprocess.CompletedProcess[str]:
    """The benchmark as a developer runs it, making the peers venv first if it is missing."""
    env = {
        **os.environ,
        "JOBMESH_DATABASE_URL": require_service_url("JOBMESH_DATABASE_URL"),
        "JOBMESH_REDIS_URL": require_service_url("JOBMESH_REDIS_URL"),
    }
    command = [sys.executable, "-m", "benchmarks.peers", "--rates", str(JOBS), "--duration", "1"]
    return subprocess.run(
        [*command, "--drain", "20", "--json", str(output)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )


@pytest.mark.timeout(600)  # the first run installs the peers venv
def test_every_peer_starts_each_job_exactly_once(tmp_path: Path) -> None:
    output = tmp_path / "peers.json"
    done = run_peers(output)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    record = json.loads(output.read_text())
    typed = f"-m benchmarks.peers --rates {JOBS} --duration 1 --drain 20 --json {output}"
    assert record["command"].endswith(typed)
    runs = {run["peer"]: run for run in record["result"]["runs"]}
    assert sorted(runs) == sorted(PEERS)
    for name, run in runs.items():
        counts = {key: run[key] for key in ("offered", "sent", "started", "not_started", "duplicates")}
        assert counts == {
            "offered": JOBS,
            "sent": JOBS,
            "started": JOBS,
            "not_started": 0,
            "duplicates": 0,
        }, name
        assert run["submit_to_start_s"]["count"] == JOBS, name
        assert set(run["cpu_s_per_1000"]) >= {"workers", "load"}, name
    assert MARKDOWN_HEADER in done.stdout
    for name, run in runs.items():
        assert f"| {name} {run['version']} | {JOBS} |" in done.stdout
