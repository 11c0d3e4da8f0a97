"""The README's Python SDK examples and CLI walkthrough, run as written against a live `jobmesh dev`, and
its Python examples type-checked with `mypy --strict`."""

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


def python_blocks() -> list[str]:
    """Every ```python block of the README (all of them show the SDK)."""
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.DOTALL | re.MULTILINE)


# What the README's first example was before `created.run` was narrowed: the check must refuse it.
UNNARROWED = """
from datetime import timedelta
from jobmesh.client import Client, command, immediately

with Client() as client:
    created = client.create_job(immediately(), command(["true"]))
    client.wait_for_run(created.run.name, timedelta(seconds=30))
"""


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`mypy --strict` (with the project's settings) over the README's blocks, each a module of its own, and
    over UNNARROWED: its output."""
    directory = tmp_path_factory.mktemp("readme")
    sources = {f"readme_example_{n}.py": block for n, block in enumerate(python_blocks())}
    sources["unnarrowed.py"] = UNNARROWED
    for name, source in sources.items():
        (directory / name).write_text(source)
    settings = ["--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(directory / "cache")]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *settings, "--no-error-summary", *sorted(sources)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=directory,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 2: mypy itself failed
    return done.stdout


def test_the_readme_shows_the_sdk_in_python_blocks() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 2
    assert block("sdk-example") in blocks
    assert block("sdk-more-example") in blocks
    shown = "\n".join(blocks)
    for call in ("batch_create_jobs", "preview_schedule", "list_audit_events", "watch_runs"):
        assert f"client.{call}(" in shown


def test_the_python_examples_pass_mypy_strict(mypy_report: str) -> None:
    errors = [line for line in mypy_report.splitlines() if not line.startswith("unnarrowed.py")]
    assert errors == []


def test_the_type_check_refuses_an_unnarrowed_optional_run(mypy_report: str) -> None:
    assert 'unnarrowed.py:7: error: Item "None" of "Run | None" has no attribute "name"' in mypy_report


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
    assert first == "SUCCEEDED ['hello from Python']"
    assert "job.schedule.cron.expression" in second


def test_the_second_python_example_runs_as_written(server: str) -> None:
    source = block("sdk-more-example").replace(DEFAULT_ADDRESS, server)
    done = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=60, check=False, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["created", "created", "refused"]
    assert "job.schedule.cron.expression" in lines[2]
    assert lines[3].count("T03:00:00+0") == 3  # three fire times at 03:00 in Paris
    assert any(line.endswith("SUCCEEDED SCHEDULE") for line in lines[4:])
    assert lines[-1] == "CREATE unauthenticated True"


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
