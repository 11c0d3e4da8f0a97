"""The README's "Running it securely" commands, run as written: certificates made with openssl, `jobmesh
server` and `jobmesh executor` started on them (each `jobmesh` line is a process of its own), the API called
with grpcurl over TLS, and a command job run on the certified executor."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobmesh.transport.tls import ChannelTls
from tests.acceptance.processes import BIN, REPO, free_port, wait_serving
from tests.support import eventually, require_service_url

README = REPO / "README.md"
API, EXECUTORS, QUEUE = "127.0.0.1:50051", "127.0.0.1:50052", "secure"


def secure_block() -> list[tuple[str, bool]]:
    """The block's commands, each with whether its `# expect: refused` comment announces a failure."""
    text = README.read_text()
    block = text.split("<!-- secure-tls:start -->", 1)[1].split("<!-- secure-tls:end -->", 1)[0]
    commands: list[tuple[str, bool]] = []
    refused = False
    for line in block.splitlines():
        if re.match(r"# expect: refused", line):
            refused = True
        elif line and not line.startswith(("#", "```")):
            commands.append((line, refused))
            refused = False
    return commands


def test_the_block_covers_tls_and_mutual_tls() -> None:
    text = " ".join(command for command, _ in secure_block())
    for needed in ("--tls-cert", "--tls-client-ca", "--executor-listen", "--tls-client-cert", "-cacert"):
        assert needed in text
    assert sum(refused for _, refused in secure_block()) >= 3


@pytest.fixture
def services_env(database: str) -> dict[str, str]:
    kafka = require_service_url("JOBMESH_KAFKA_BOOTSTRAP")
    return {
        "JOBMESH_DATABASE_URL": database,
        "JOBMESH_QUEUE_URL": f"kafka://{kafka}?session_timeout_ms=2000",
        "JOBMESH_REDIS_URL": require_service_url("JOBMESH_REDIS_URL"),
    }


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in reversed(processes):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.mark.postgres
@pytest.mark.kafka
@pytest.mark.redis
def test_the_secure_walkthrough_runs_as_written(
    tmp_path: Path, services_env: dict[str, str], started: list[subprocess.Popen[bytes]]
) -> None:
    api, executors, queue = (
        f"127.0.0.1:{free_port()}",
        f"127.0.0.1:{free_port()}",
        f"secure-{uuid.uuid4().hex[:8]}",
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("JOBMESH_")},
        **services_env,
        "PATH": f"{BIN}:{os.environ['PATH']}",
    }
    outputs = []
    for command, refused in secure_block():
        line = command.replace(API, api).replace(EXECUTORS, executors)
        line = line.replace(f"--queues {QUEUE}", f"--queues {queue}").replace(
            f'"queue": "{QUEUE}"', f'"queue": "{queue}"'
        )
        if line.startswith("jobmesh "):
            with (tmp_path / f"{line.split()[1]}.log").open("wb") as log:
                started.append(
                    subprocess.Popen(
                        ["bash", "-c", f"exec {line}"],
                        cwd=tmp_path,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            if line.startswith("jobmesh server"):
                wait_serving(api, timeout=60, tls=ChannelTls(ca_bundle=tmp_path / "ca.pem"))
            continue

        def run(line: str = line) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["bash", "-c", line],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        result = run()
        assert (result.returncode != 0) is refused, (
            f"{line}\nexit {result.returncode}\n{result.stdout}{result.stderr}"
        )
        outputs.append(result.stdout)
    assert '"status": "SERVING"' in outputs[-2]  # the executor address, with the client certificate
    eventually(
        lambda: "RUN_STATE_SUCCEEDED" in run().stdout, 90, "the job to succeed on the certified executor"
    )
