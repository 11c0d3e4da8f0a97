"""What the `jobmesh` command loads before it answers: `jobmesh --help` and the API's commands (`jobmesh jobs
…`, `jobmesh runs …`) load nothing of the mesh's processes (no SQLAlchemy, Alembic, Kafka or Redis client),
so that they start at once; the processes' own commands still load their wiring when they run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from jobmesh.processes.command import jobmesh

pytestmark = pytest.mark.processes

# Runs the console script's `main` on argv[2:], then writes the modules it loaded to the file argv[1]. Help
# is wrapped at 80 columns, as click's CliRunner wraps it.
PROBE = """\
import json, sys
import click.formatting
from jobmesh.processes.command import main
click.formatting.FORCED_WIDTH = 80
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""
# The mesh's side: its drivers, its packages, and what the API's commands have no use for (the contract's
# descriptor set is for the server's reflection).
SERVER_SIDE = (
    "sqlalchemy",
    "alembic",
    "confluent_kafka",
    "redis",
    "psycopg",
    "opentelemetry",
    "yaml",
    "jobmesh.core",
    "jobmesh.adapters",
    "jobmesh.server",
    "jobmesh.watcher",
    "jobmesh.executor",
    "jobmesh.descriptors",
    "jobmesh.processes.settings",
    "jobmesh.processes.assembly",
)
# Nothing listens on port 1: the call is made, and refused.
UNREACHABLE = ["--server", "127.0.0.1:1"]


def loaded_by(tmp_path: Path, *args: str) -> tuple[int, list[str], str]:
    """The exit code of `jobmesh ARGS` in a fresh interpreter, the modules it had loaded at the end, and what
    it printed."""
    report = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(report), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    loaded = json.loads(report.read_text())
    return loaded["code"], loaded["modules"], done.stdout


def of(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    """Those of `packages` that were loaded (a package, or any module of it)."""
    return [p for p in packages if any(name == p or name.startswith(f"{p}.") for name in modules)]


@pytest.mark.parametrize(
    "args",
    [
        ["jobs", "get", "jobs/x", *UNREACHABLE],
        ["runs", "list", "--job", "jobs/x", *UNREACHABLE],
        ["jobs", "get", "--help"],
        ["runs", "--help"],
    ],
    ids=["jobs-get", "runs-list", "jobs-get-help", "runs-help"],
)
def test_the_api_commands_load_nothing_of_the_mesh(tmp_path: Path, args: list[str]) -> None:
    code, modules, _ = loaded_by(tmp_path, *args)
    assert code == (0 if "--help" in args else 6)  # 6: UNAVAILABLE, the call was made
    assert "jobmesh.client._cli" in modules
    assert of(modules, SERVER_SIDE) == []


def test_apply_loads_nothing_of_the_mesh_but_a_yaml_parser(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  nightly:\n    cron: '0 3 * * *'\n    command: ['true']\n")
    code, modules, _ = loaded_by(tmp_path, "apply", "-f", str(jobs), *UNREACHABLE)
    assert code == 6  # UNAVAILABLE: the file was read, and the server asked
    assert of(modules, SERVER_SIDE) == ["yaml"]


def test_the_command_list_loads_neither_the_mesh_nor_the_sdk(tmp_path: Path) -> None:
    code, modules, listed = loaded_by(tmp_path, "--help")
    assert code == 0
    assert of(modules, (*SERVER_SIDE, "jobmesh.client", "grpc", "google.protobuf")) == []
    # The SDK's groups are listed by their summaries as they describe themselves once loaded.
    assert CliRunner().invoke(jobmesh, ["jobs", "--help"]).exit_code == 0
    assert isinstance(jobmesh.commands["jobs"], click.Group)
    assert isinstance(jobmesh.commands["runs"], click.Group)
    assert [param.name for param in jobmesh.commands["apply"].params][:3] == ["file", "dry_run", "set_name"]
    assert CliRunner().invoke(jobmesh, ["--help"]).stdout == listed


def test_a_process_command_still_loads_its_wiring(tmp_path: Path) -> None:
    code, modules, _ = loaded_by(
        tmp_path, "migrate", "--database-url", f"sqlite:///{tmp_path / 'db.sqlite3'}"
    )
    assert code == 0
    assert "sqlalchemy" in modules
    assert "alembic" in modules


def test_the_supervisor_of_server_workers_loads_nothing_of_the_server(tmp_path: Path) -> None:
    """It only starts and watches the workers, which load the server themselves. Its port is taken here, so
    it stops with its one line before it starts any."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, modules, _ = loaded_by(
            tmp_path,
            "server",
            "--workers",
            "2",
            "--listen",
            f"127.0.0.1:{taken.getsockname()[1]}",
            "--database-url",
            f"sqlite:///{tmp_path / 'db.sqlite3'}",
            "--queue-url",
            "kafka://127.0.0.1:1",
            "--signals-url",
            "redis://127.0.0.1:1",
        )
    assert code != 0
    assert "jobmesh.processes.server_workers" in modules
    assert of(modules, ("jobmesh.server.app", "jobmesh.processes.assembly", "alembic")) == []
