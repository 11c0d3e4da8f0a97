"""Every command that `jobmesh dev`'s start banner offers (`  try: COMMAND`) works as printed: run by a shell
in the folder the dev was started in, with a PATH that does not hold the venv (grpcurl is installed there
only), against the live dev; over TLS too, verified by the CA the dev was given."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from jobmesh.transport.tls import ChannelTls
from tests.acceptance.processes import BIN, REPO, ProcessExited, free_port, wait_serving
from tests.support import eventually
from tests.support_certificates import CertificateAuthority

pytestmark = pytest.mark.processes

TRY = re.compile(r"^  try: (.+)$", re.MULTILINE)


def environment_without_venv() -> dict[str, str]:
    """The environment with neither the venv's folder on the PATH nor any JOBMESH_* setting."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("JOBMESH_", "VIRTUAL_ENV"))}
    folders = [folder for folder in env.get("PATH", "").split(os.pathsep) if Path(folder) != BIN]
    env["PATH"] = os.pathsep.join(folders)
    return env


@contextmanager
def started_dev(
    folder: Path, cwd: Path, args: Sequence[str], env: dict[str, str], tls: ChannelTls | None = None
) -> Iterator[Path]:
    """`jobmesh dev ARGS` started in `cwd` until it serves; yields the file of its output."""
    address = args[list(args).index("--listen") + 1]
    log = folder / "dev.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(BIN / "jobmesh"), "dev", *args],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    try:
        try:
            wait_serving(address, timeout=60, tls=tls, process=process)
        except (grpc.RpcError, ProcessExited):
            raise AssertionError(f"jobmesh dev did not start:\n{log.read_text()}") from None
        yield log
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0, log.read_text()


def offered_commands(log: Path) -> list[str]:
    """The banner's commands, once it has printed them (after its first line)."""
    return eventually(lambda: TRY.findall(log.read_text()), 30, "the banner's commands")


def assert_each_works_as_printed(commands: Sequence[str], cwd: Path, env: dict[str, str]) -> None:
    for command in commands:
        done = subprocess.run(
            command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, f"{command!r} failed:\n{done.stdout}{done.stderr}"
        assert "jobmesh.v1.JobService" in done.stdout, done.stdout


def test_the_banners_commands_work_as_printed_from_the_repository(tmp_path: Path) -> None:
    env = environment_without_venv()
    address = f"127.0.0.1:{free_port()}"
    args = ["--listen", address, "--dashboard", "off", "--database-url", f"sqlite:///{tmp_path / 'dev.db'}"]
    with started_dev(tmp_path, REPO, args, env) as log:
        commands = offered_commands(log)
        assert_each_works_as_printed(commands, REPO, env)
    if BIN.is_relative_to(REPO):  # the repository's own venv: named from its root, as `make run` shows it
        assert commands[0].startswith(f"{BIN.relative_to(REPO)}/grpcurl "), commands


@pytest.mark.parametrize("listen_host", ["127.0.0.1", "0.0.0.0"])
def test_the_banners_commands_work_as_printed_over_tls_from_elsewhere(
    tmp_path: Path, listen_host: str
) -> None:
    """Started outside the repository, on a CA the dev knows (`--tls-ca`) and a name its certificate carries
    (`--tls-server-name`); a wildcard address is tried on loopback."""
    ca = CertificateAuthority()
    trust = ca.write(tmp_path / "ca.pem")
    leaf = ca.issue_server(tmp_path / "server", names=("dev.jobmesh.test",))
    port = free_port()
    args = [
        "--listen", f"{listen_host}:{port}", "--dashboard", "off",
        "--database-url", f"sqlite:///{tmp_path / 'dev.db'}",
        "--tls-cert", str(leaf.chain), "--tls-key", str(leaf.key), "--tls-ca", str(trust),
        "--tls-server-name", "dev.jobmesh.test", "--allow-insecure-public", "on",
    ]  # fmt: skip
    env = environment_without_venv()
    tls = ChannelTls(ca_bundle=trust, server_name="dev.jobmesh.test")
    with started_dev(tmp_path, tmp_path, args, env, tls) as log:
        commands = offered_commands(log)
        assert_each_works_as_printed(commands, tmp_path, env)
    assert f" 127.0.0.1:{port} " in commands[0]
