"""The README's "Running it securely" commands, run as written: certificates made with openssl and tokens
with `jobmesh token new`, `jobmesh server` (TLS and tokens) and `jobmesh executor` (its certificate) started
on them, each a process of its own, the API called with grpcurl over TLS with a token, and a command job run
on the certified executor. The mesh reaches PostgreSQL, Kafka and Redis over TLS too. A command announced as
refused must fail as it says: with its gRPC code (`# expect: refused PermissionDenied`: grpcurl exits 64 + the
code and prints it) or with an exit status and a text of the output (`# expect: refused exit 1 (Failed to
dial target host)`), and never because nothing listens."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from sqlalchemy.engine import make_url

from jobmesh.transport.tls import ChannelTls
from tests.acceptance.processes import BIN, REPO, free_port, wait_serving
from tests.support import eventually, require_service_url

pytestmark = pytest.mark.processes

README = REPO / "README.md"
API, EXECUTORS, QUEUE = "127.0.0.1:50051", "127.0.0.1:50052", "secure"


REFUSAL = re.compile(
    r"# expect: refused (?:(?P<code>[A-Z][A-Za-z]+)|exit (?P<status>\d+) \((?P<says>[^)]+)\))"
)
GRPCURL_RPC_ERROR = 64  # grpcurl's exit status for an RPC that ends with a gRPC code is 64 + the code


@dataclass(frozen=True)
class Command:
    line: str
    refused: bool  # a `# expect: refused …` comment comes before it
    code: str = ""  # that comment's grpcurl code name (`Unauthenticated`), if it names one
    status: int = 0  # the exit status it announces
    says: str = ""  # a text the output must hold


def refusal(line: str, announced: re.Match[str]) -> Command:
    if code := announced["code"]:
        number = grpc.StatusCode[re.sub(r"(?<!^)(?=[A-Z])", "_", code).upper()].value[0]
        return Command(line, True, code, GRPCURL_RPC_ERROR + number, f"Code: {code}")
    return Command(line, True, status=int(announced["status"]), says=announced["says"])


def secure_block() -> list[Command]:
    """The block's commands, in order."""
    text = README.read_text()
    block = text.split("<!-- secure-tls:start -->", 1)[1].split("<!-- secure-tls:end -->", 1)[0]
    commands: list[Command] = []
    expected: re.Match[str] | None = None
    for line in block.splitlines():
        if line.startswith("# expect:"):
            expected = REFUSAL.fullmatch(line)
            assert expected, f"not a refusal this test knows: {line}"
        elif line and not line.startswith(("#", "```")):
            commands.append(refusal(line, expected) if expected else Command(line, False))
            expected = None
    return commands


def test_the_block_covers_tls_mutual_tls_and_tokens() -> None:
    text = " ".join(command.line for command in secure_block())
    needed = ("--tls-cert", "--tls-client-ca", "--executor-listen", "--tls-client-cert", "-cacert")
    for option in (*needed, "--authentication on", "--token-hashes", "Bearer", "jobmesh token new"):
        assert option in text
    codes = {command.code for command in secure_block() if command.refused}
    assert {"Unauthenticated", "PermissionDenied"} <= codes
    assert sum(command.refused for command in secure_block()) >= 5


def long_running(line: str) -> bool:
    return line.startswith(("jobmesh server", "jobmesh executor"))


@pytest.fixture
def services_env(database: str) -> dict[str, str]:
    """The services over TLS, verified with their CA (tools/services/services.sh): every hop encrypted."""
    ca = require_service_url("JOBMESH_SERVICES_CA")
    kafka = require_service_url("JOBMESH_KAFKA_TLS_BOOTSTRAP")
    tls_database = make_url(database).update_query_dict({"sslmode": "verify-full", "sslrootcert": ca})
    return {
        "JOBMESH_DATABASE_URL": tls_database.render_as_string(hide_password=False),
        "JOBMESH_QUEUE_URL": f"kafka://{kafka}?security_protocol=SSL&ssl_ca_location={ca}&session_timeout_ms=2000",
        "JOBMESH_REDIS_URL": require_service_url("JOBMESH_REDIS_TLS_URL"),
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
    for command in secure_block():
        line = command.line.replace(API, api).replace(EXECUTORS, executors)
        for written in (f"--queues {QUEUE}", f'"queue": "{QUEUE}"', f"executor-1={QUEUE}"):
            line = line.replace(written, written.replace(QUEUE, queue))
        if long_running(line):
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
        said = f"{line}\nexit {result.returncode}\n{result.stdout}{result.stderr}"
        assert result.returncode == command.status, said
        if command.refused:
            assert command.says in result.stderr, said
            assert "connection refused" not in result.stderr, said  # refused by a server that listens
        outputs.append(result.stdout)
    assert '"status": "SERVING"' in outputs[-2]  # the executor address, with the client certificate
    eventually(
        lambda: "RUN_STATE_SUCCEEDED" in run().stdout, 90, "the job to succeed on the certified executor"
    )
