"""The README's Python SDK example and CLI walkthrough, run as written against a live `jobmesh dev`."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.acceptance.processes import REPO

pytestmark = pytest.mark.processes

README = REPO / "README.md"
DEFAULT_ADDRESS = "127.0.0.1:50051"


def block(marker: str) -> str:
    text = README.read_text()
    inner = text.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->", 1)[0]
    return inner.strip().split("\n", 1)[1].rsplit("```", 1)[0]  # inside the fence


def cli_script(address: str) -> str:
    """The CLI block as one bash script: every command must end with its `# expect:` code (0 unless told)."""
    lines = [f"export JOBMESH_SERVER={shlex.quote(address)}"]
    expect = 0
    for number, line in enumerate(block("cli-example").splitlines(), start=1):
        if match := re.match(r"# expect: (\d+)", line):
            expect = int(match.group(1))
        elif line and not line.startswith("#"):
            told = shlex.quote(f"line {number} did not exit {expect}: {line}")
            lines += [line, f"[ $? -eq {expect} ] || {{ echo {told} >&2; exit 99; }}"]
            expect = 0
    return "\n".join(lines)


def test_the_python_example_is_ten_lines_of_code() -> None:
    code = [line for line in block("sdk-example").splitlines() if line.strip()]
    assert len(code) <= 11
    ast.parse("\n".join(code))


def test_the_python_example_runs_as_written(server: str) -> None:
    source = block("sdk-example").replace(DEFAULT_ADDRESS, server)
    done = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=60, check=False, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == "RUN_STATE_SUCCEEDED ['hello from Python']"
    assert "job.schedule.cron.expression" in second


def test_the_cli_walkthrough_covers_every_command() -> None:
    text = block("cli-example")
    for command in ("create", "get", "list", "update", "pause", "resume", "delete", "run-now"):
        assert f"jobmesh jobs {command}" in text
    for command in ("list", "get", "logs", "watch"):
        assert f"jobmesh runs {command}" in text


def test_the_cli_walkthrough_runs_as_written(server: str) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("JOBMESH_")}
    done = subprocess.run(
        ["bash", "-c", cli_script(server)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hello from the CLI" in done.stdout
    assert '"time_zone": "Europe/Paris"' in done.stdout
    assert "jobs/cli-nightly  DELETED" in done.stdout
