"""`jobmesh server --workers N` whose workers cannot start: the parent says which and exits 1."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.processes


def test_a_worker_that_dies_before_serving_stops_the_server_with_a_message() -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("JOBMESH_")}
    # Nothing listens on these: the workers die opening the store first (its folder cannot be made).
    flags = ["--queue-url", "kafka://127.0.0.1:1", "--signals-url", "redis://127.0.0.1:1/0"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobmesh.processes",
            "server",
            "--workers",
            "2",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            "sqlite:////proc/no-such-folder/jobmesh.sqlite3",
            *flags,
        ],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert "a server worker exited (1) before it served" in stderr
    assert "workers serving gRPC" not in done.stdout.decode()
