"""A taken address, whichever it is (gRPC, the dashboard's, the executors'), stops the process before anything
starts, with one line on stderr that names the flag and the variable to change, and exit code 2 (a bad
setting)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.acceptance.processes import BIN, REPO
from tests.support_certificates import CertificateAuthority

pytestmark = pytest.mark.processes


def _refused(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "jobmesh"), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _assert_one_line_naming(
    done: subprocess.CompletedProcess[str], address: str, flag: str, variable: str
) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert f"{address} is taken" in line
    assert f"pass {flag} HOST:PORT ({variable})" in line
    assert "gRPC on" not in done.stdout  # refused before the server started


@pytest.mark.parametrize(
    ("flag", "variable", "other"),
    [
        ("--listen", "JOBMESH_LISTEN", ["--dashboard", "off"]),
        ("--dashboard-listen", "JOBMESH_DASHBOARD_LISTEN", ["--listen", "127.0.0.1:0"]),
    ],
)
def test_dev_refuses_a_taken_port_in_one_line(
    tmp_path: Path, taken_port: int, flag: str, variable: str, other: list[str]
) -> None:
    address = f"127.0.0.1:{taken_port}"
    done = _refused(["dev", flag, address, *other, "--database-url", f"sqlite:///{tmp_path / 'dev.db'}"])
    _assert_one_line_naming(done, address, flag, variable)
    assert not (tmp_path / "dev.db").exists()  # nothing was opened either
    if flag == "--dashboard-listen":
        assert done.stderr.rstrip().endswith("or --dashboard off")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_server_refuses_a_taken_grpc_port_in_one_line(tmp_path: Path, taken_port: int, workers: str) -> None:
    address = f"127.0.0.1:{taken_port}"
    # Two workers need a queue and a signal bus that several processes share; nothing connects to them.
    shared = ["--queue-url", "kafka://127.0.0.1:9", "--signals-url", "redis://127.0.0.1:9/0"]
    done = _refused(
        [
            "server",
            "--listen",
            address,
            "--workers",
            workers,
            *shared,
            "--database-url",
            f"sqlite:///{tmp_path / 'db'}",
        ]
    )
    _assert_one_line_naming(done, address, "--listen", "JOBMESH_LISTEN")


def test_server_refuses_a_taken_executor_port_in_one_line(tmp_path: Path, taken_port: int) -> None:
    ca = CertificateAuthority()
    ca_file = ca.write(tmp_path / "ca.pem")
    leaf = ca.issue_server(tmp_path / "server")
    address = f"127.0.0.1:{taken_port}"
    done = _refused(
        [
            "server",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            str(leaf.chain),
            "--tls-key",
            str(leaf.key),
            "--tls-client-ca",
            str(ca_file),
            "--executor-listen",
            address,
            "--database-url",
            f"sqlite:///{tmp_path / 'db'}",
        ]
    )
    _assert_one_line_naming(done, address, "--executor-listen", "JOBMESH_EXECUTOR_LISTEN")
