"""The README's grpcurl walkthrough, run exactly as written against `jobmesh dev` on a fresh store."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.acceptance.processes import BIN, REPO, free_port, jobmesh_process
from tests.support import eventually

pytestmark = pytest.mark.processes

README = REPO / "README.md"
DEFAULT_ADDRESS = "127.0.0.1:50051"
# grpcurl exits 64 + the status code when a call fails.
EXIT_CODES = {"Aborted": 64 + 10, "InvalidArgument": 64 + 3, "NotFound": 64 + 5}


def walkthrough() -> list[tuple[str, str | None]]:
    """The block's commands, each with the failure its `# expect:` comment announces (None: success)."""
    text = README.read_text()
    block = text.split("<!-- walkthrough:start -->", 1)[1].split("<!-- walkthrough:end -->", 1)[0]
    commands: list[tuple[str, str | None]] = []
    expect: str | None = None
    for line in block.splitlines():
        if match := re.match(r"# expect: (\w+)", line):
            expect = match.group(1)
        elif line.startswith("grpcurl "):
            commands.append((line, expect))
            expect = None
    return commands


def test_walkthrough_covers_the_acceptance_list() -> None:
    text = " ".join(command for command, _ in walkthrough())
    for needed in (
        "list",
        "describe jobmesh.v1.Job",
        "CreateJob",
        "GetJob",
        "ListJobs",
        "page_size",
        "filter",
        "UpdateJob",
        "etag",
        "PauseJob",
        "ResumeJob",
        "DeleteJob",
        "immediate",
        "run_at",
        "cron",
    ):
        assert needed in text
    assert {expect for _, expect in walkthrough()} >= {"Aborted", "InvalidArgument", "NotFound"}


def test_walkthrough_runs_as_written(tmp_path: Path) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    database = f"sqlite:///{tmp_path / 'dev.sqlite3'}"
    args = ["dev", "--listen", address, "--database-url", database, "--dashboard", "off"]  # tests/web has it
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command.replace(DEFAULT_ADDRESS, address)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    with jobmesh_process(args, address, tmp_path / "jobmesh.log"):
        outputs = []
        for command, expect in walkthrough():
            result = run(command)
            wanted = EXIT_CODES[expect] if expect else 0
            assert result.returncode == wanted, (
                f"{command}\nexit {result.returncode}\n{result.stdout}{result.stderr}"
            )
            if expect:
                assert f"Code: {expect}" in result.stderr
            outputs.append(result.stdout)

        # The last command lists the hello job's succeeded run: on a busy machine it may not have ended yet.
        def succeeded_listing() -> str | None:
            listing = run(command).stdout
            return listing if '"state": "RUN_STATE_SUCCEEDED"' in listing else None

        outputs[-1] = eventually(succeeded_listing, 30, "the hello job's run to succeed")
    assert "executor runs ANY command and calls ANY address" in (tmp_path / "jobmesh.log").read_text()
    listing = outputs[0]
    for service in (
        "jobmesh.v1.JobService",
        "jobmesh.v1.SearchService",
        "jobmesh.control.v1.ExecutorControl",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    ):
        assert service in listing.split()
    described = outputs[1]  # `describe jobmesh.v1.Job`: reflection serves the protos' comments
    assert "// Opaque version for optimistic concurrency: send it back on update and delete." in described
    joined = "\n".join(outputs)
    assert '"etag": "2"' in joined  # the update took the etag from "1" to "2"
    assert '"state": "JOB_STATE_PAUSED"' in joined
    assert '"state": "RUN_STATE_CANCELLED"' in joined  # the deleted job's pending run
    assert '"status": "SERVING"' in joined
    assert '"state": "RUN_STATE_SUCCEEDED"' in outputs[-1]  # the hello job ran end to end
