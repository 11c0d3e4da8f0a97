"""The systemd units in deploy/systemd: one per process, each passing `systemd-analyze verify` (with no
warning) where /opt/jobmesh, their install folder, is this checkout, so their programs are real ones; each
restarted on failure and hardened; and every JOBMESH_* variable they or the example environment file set is
a setting of the command that reads it (processes/settings.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from jobmesh.processes import settings
from tests.acceptance.processes import REPO
from tests.support import missing

pytestmark = pytest.mark.processes

UNITS = REPO / "deploy" / "systemd"
PREFIX = "/opt/jobmesh"
PROCESSES = ("server", "watcher", "executor", "envoy")
ENVIRONMENT_EXAMPLE = UNITS / "jobmesh.env.example"
VARIABLE = re.compile(r"^#?(JOBMESH_[A-Z_]+)=(.*)$")


def unit(process: str) -> Path:
    return UNITS / f"jobmesh-{process}.service"


def directives(path: Path) -> list[tuple[str, str]]:
    """(key, value) of each line of a unit, in order."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [
        (key.strip(), value.strip())
        for key, _, value in (line.partition("=") for line in lines if line and line[0] not in "#;[")
    ]


def verify(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        missing("systemd-analyze is not installed (Debian's systemd package)")
    return subprocess.run(
        [analyze, "verify", "--man=no", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def installed(tmp_path: Path, text: str, name: str) -> Path:
    """The unit as installed with this checkout as its folder."""
    path = tmp_path / name
    path.write_text(text.replace(PREFIX, str(REPO)))
    return path


def test_there_is_a_unit_for_each_process() -> None:
    assert sorted(UNITS.glob("*.service")) == sorted(unit(process) for process in PROCESSES)


def test_the_units_verify_without_a_warning(tmp_path: Path) -> None:
    paths = [installed(tmp_path, unit(p).read_text(), unit(p).name) for p in PROCESSES]
    for path in paths:
        assert PREFIX not in path.read_text()
    done = verify(paths)
    assert done.returncode == 0, done.stderr
    assert done.stdout + done.stderr == ""


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (("Restart=on-failure", "Restart=on-failure\nRestartEvery=2s"), "Unknown key"),
        ((f"{PREFIX}/.venv/bin/jobmesh", f"{PREFIX}/.venv/bin/no-such-program"), "not executable"),
    ],
    ids=["unknown-key", "missing-program"],
)
def test_verify_catches_a_broken_unit(tmp_path: Path, change: tuple[str, str], complaint: str) -> None:
    text = unit("server").read_text().replace(*change)
    done = verify([installed(tmp_path, text, "jobmesh-server.service")])
    assert complaint in done.stdout + done.stderr


@pytest.mark.parametrize("process", PROCESSES)
def test_each_unit_restarts_on_failure_and_is_hardened(process: str) -> None:
    found = directives(unit(process))
    keys = dict(found)
    assert keys["Restart"] == "on-failure"
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices", "ProtectControlGroups"):
        assert keys[key] == "yes", key
    assert keys["ProtectSystem"] == "strict"
    assert keys["SystemCallFilter"].startswith("@system-service")
    if process == "executor":
        # Root, for the job user, with only what switching users and killing the job's processes need.
        assert "User" not in keys
        assert set(keys["CapabilityBoundingSet"].split()) == {"CAP_SETUID", "CAP_SETGID", "CAP_KILL"}
        # bubblewrap's namespaces, and a fresh /proc inside them (refused under a /proc partly covered).
        assert {"user", "pid", "mnt"} <= set(keys["RestrictNamespaces"].split())
        assert not {"ProtectKernelTunables", "ProtectKernelLogs", "ProtectProc"} & set(keys)
        assert keys["KillMode"] == "control-group"
    else:
        assert keys["User"] == "jobmesh"
        assert keys["CapabilityBoundingSet"] == ""
        assert keys["RestrictNamespaces"] == "yes"
        assert keys["ProtectKernelTunables"] == "yes"


@pytest.mark.parametrize("process", ["server", "watcher", "executor"])
def test_each_process_reads_only_its_settings_and_serves_health(process: str) -> None:
    found = directives(unit(process))
    [start] = [value for key, value in found if key == "ExecStart"]
    program, command, *flags = start.split()
    assert (program, command) == (f"{PREFIX}/.venv/bin/jobmesh", process)
    known = settings.settings_of(process)
    assert [flag for flag in flags if flag.startswith("--")] == []
    variables = {name: setting for setting in known for name in setting.variables}
    environment = dict(value.split("=", 1) for key, value in found if key == "Environment")
    assert set(environment) <= set(variables), set(environment) - set(variables)
    for name, value in environment.items():
        variables[name].parse(value)  # raises ValueError on what the process would refuse
    assert environment["JOBMESH_HEALTH_LISTEN"].startswith("127.0.0.1:")
    files = [value.lstrip("-") for key, value in found if key == "EnvironmentFile"]
    assert files == ["/etc/jobmesh/jobmesh.env", f"/etc/jobmesh/{process}.env"]


def test_the_health_ports_differ() -> None:
    listens = [
        value.split("=", 1)[1]
        for process in ("server", "watcher", "executor")
        for key, value in directives(unit(process))
        if key == "Environment" and value.startswith("JOBMESH_HEALTH_LISTEN=")
    ]
    assert len(set(listens)) == 3


def test_the_example_environment_names_only_settings() -> None:
    variables = {name for setting in settings.SETTINGS for name in setting.variables}
    found = [
        match.group(1)
        for line in ENVIRONMENT_EXAMPLE.read_text().splitlines()
        if (match := VARIABLE.match(line))
    ]
    assert len(found) > 10
    assert sorted(set(found) - variables) == []
