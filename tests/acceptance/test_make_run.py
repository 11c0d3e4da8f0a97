"""`make run` needs Python and Node alone: from a fresh clone of this repository (its committed state), with a
PATH on which only the tools that `make run` uses are found (no Go, Java, javac or Maven), it sets the clone
up, starts the mesh on the ports given by JOBMESH_LISTEN and JOBMESH_DASHBOARD_LISTEN, serves gRPC and the
dashboard there, offers commands that work as printed from the clone's root, and stops cleanly on Ctrl-C (a
SIGINT to its process group). It builds a venv and installs the npm packages (pip's and npm's caches make
that a minute or two): it is left out of `make unit`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.acceptance.processes import REPO, free_port
from tests.acceptance.test_banner import assert_each_works_as_printed, offered_commands
from tests.web.browser import wait_http

pytestmark = pytest.mark.processes

# What `make run` runs: make and its shell, `find`, `touch` and `dirname` in the Makefile and its scripts,
# Node and npm for the dashboard (npm's scripts use sh), Python; when they are there, setpriv ties Envoy to
# the mesh and bubblewrap sandboxes the commands (without it they run unsandboxed, with a warning).
NEEDED = ("make", "bash", "sh", "find", "touch", "dirname", "node", "npm", "setpriv", "bwrap")
OPTIONAL = ("setpriv", "bwrap")
HIDDEN = ("go", "java", "javac", "mvn")
SETUP_TIMEOUT = 900.0  # seconds: a venv and node_modules from the caches, on a busy 2-core machine
PYTHON = f"python{sys.version_info.major}.{sys.version_info.minor}"  # the Makefile's PYTHON


def tools_only(folder: Path) -> str:
    """A folder of links to the tools `make run` needs, and nothing else: the PATH the test gives it."""
    folder.mkdir()
    for tool in NEEDED:
        found = shutil.which(tool)
        if found is None:
            assert tool in OPTIONAL, f"{tool} is not on this machine's PATH"
            continue
        (folder / tool).symlink_to(found)
    # The interpreter this test runs on (the venv's own base), not a shim that needs more of the PATH.
    (folder / PYTHON).symlink_to(Path(sys.base_prefix) / "bin" / PYTHON)
    return str(folder)


def _serving(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return False
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


def _wait_serving(process: subprocess.Popen[bytes], address: str, log: Path) -> None:
    deadline = time.monotonic() + SETUP_TIMEOUT
    while not _serving(address):
        assert process.poll() is None, f"make run exited {process.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"make run did not serve in {SETUP_TIMEOUT}s:\n{log.read_text()}"
        time.sleep(0.5)


@pytest.mark.fresh_clone
@pytest.mark.timeout(SETUP_TIMEOUT + 300)
def test_make_run_from_a_fresh_clone_needs_python_and_node_only(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    address, dashboard = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("JOBMESH_", "VIRTUAL_ENV", "MAKE")) and key != "MFLAGS"
    }
    env = {**inherited, "PATH": tools_only(tmp_path / "bin")}
    env |= {"JOBMESH_LISTEN": address, "JOBMESH_DASHBOARD_LISTEN": dashboard}
    assert [tool for tool in HIDDEN if shutil.which(tool, path=env["PATH"])] == []
    log = tmp_path / "make-run.log"
    began = time.monotonic()
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(Path(env["PATH"]) / "make"), "run"],
            cwd=clone,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_serving(process, address, log)
        wait_http(f"http://{dashboard}/")
        print(f"make run from a fresh clone: serving after {time.monotonic() - began:.0f} s")
        assert_each_works_as_printed(offered_commands(log), clone, env)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in its terminal
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    output_text = log.read_text()
    # Make passes a Ctrl-C on by dying of it once its recipe has ended (a shell shows 130); it prints a
    # `make: *** [run] …` line when the recipe failed or was killed, and only then.
    assert code in (0, -signal.SIGINT), output_text
    assert "make: ***" not in output_text
    assert "jobmesh dev: stopping" in output_text
    assert "Traceback" not in output_text
    assert not (clone / ".jobmesh" / "tools").exists()  # no code generator was installed
    shutil.rmtree(clone)  # a venv and node_modules: hundreds of MB
