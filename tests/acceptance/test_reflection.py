"""Reflection on a running `jobmesh dev`, through grpcurl as a user runs it: `describe` prints the protos'
comments (the server serves the descriptor set that `buf generate` writes with source info), and the executor
protocol is listed, described and served under its own package, `jobmesh.control.v1`."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from jobmesh.server.api.reflection import contract_pool
from tests.acceptance.processes import BIN, REPO, free_port, jobmesh_process

pytestmark = pytest.mark.processes

DESCRIPTOR_SET = REPO / "gen/descriptors/jobmesh.binpb"


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("reflection")
    address = f"127.0.0.1:{free_port()}"
    database = f"sqlite:///{folder / 'dev.sqlite3'}"
    args = ["dev", "--listen", address, "--database-url", database, "--dashboard", "off"]
    with jobmesh_process(args, address, folder / "jobmesh.log"):
        yield address


def grpcurl(address: str, *args: str, data: str | None = None) -> subprocess.CompletedProcess[str]:
    payload = ["-d", data] if data is not None else []
    command = [str(BIN / "grpcurl"), "-plaintext", *payload, address, *args]
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=30, check=False)


def described(address: str, symbol: str) -> str:
    done = grpcurl(address, "describe", symbol)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_describe_prints_the_field_comments(address: str) -> None:
    job = described(address, "jobmesh.v1.Job")
    assert "// A job: the definition (schedule, target and policies) that produces runs." in job
    assert "// Opaque version for optimistic concurrency: send it back on update and delete." in job
    assert "string etag = 15;" in job
    assert 'pattern:"jobs/{job}"' in job  # the resource annotation travels too


def test_describe_shows_the_services_comments_and_method_signatures(address: str) -> None:
    service = described(address, "jobmesh.v1.JobService")
    assert "// Writes: create and steer jobs and their runs." in service
    assert 'option (.google.api.method_signature) = "name";' in service
    errors = described(address, "jobmesh.v1.ErrorReason")
    assert "ERROR_REASON_ETAG_MISMATCH = 5;" in errors
    assert "`ABORTED`: the `etag` sent is not the resource's current one" in errors


def test_the_executor_protocol_is_served_under_its_own_package(address: str) -> None:
    listing = grpcurl(address, "list")
    assert listing.returncode == 0, listing.stderr
    services = listing.stdout.split()
    assert "jobmesh.control.v1.ExecutorControl" in services
    assert "jobmesh.v1.ExecutorControl" not in services
    control = described(address, "jobmesh.control.v1.ExecutorControl")
    assert "// Opens an executor's stream." in control
    assert "rpc Connect ( stream .jobmesh.control.v1.ConnectRequest )" in control
    lease = described(address, "jobmesh.control.v1.HeartbeatAnswer")
    assert "// The lease: an attempt kept alive may run for its `DispatchedRun.heartbeat_timeout`" in lease
    assert "jobmesh.control.v1.DispatchedRun is a message" in described(
        address, "jobmesh.control.v1.DispatchedRun"
    )

    # Served: the hello is read and answered by the protocol. grpcurl is outside dev's process, which queues
    # its runs in its own memory: refused (FAILED_PRECONDITION, grpcurl's exit 64 + 9). The welcome that an
    # executor inside the process gets: tests/server/test_queue_reach.py.
    hello = '{"hello": {"executor_id": "reflection-probe", "queues": ["probe"]}}'
    connected = grpcurl(address, "jobmesh.control.v1.ExecutorControl/Connect", data=hello)
    assert connected.returncode == 73, connected.stdout + connected.stderr
    assert "Code: FailedPrecondition" in connected.stderr
    assert '"reason":"QUEUE_UNREACHABLE"' in connected.stderr


def test_the_old_executor_service_name_is_gone(address: str) -> None:
    gone = grpcurl(
        address, "jobmesh.v1.ExecutorControl/Connect", data='{"hello": {"executor_id": "reflection-probe"}}'
    )
    assert gone.returncode != 0
    assert 'does not expose service "jobmesh.v1.ExecutorControl"' in gone.stderr


def test_grpcurl_reads_the_served_set_without_a_server() -> None:
    done = subprocess.run(
        [str(BIN / "grpcurl"), "-protoset", str(DESCRIPTOR_SET), "describe", "jobmesh.v1.Job"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "// Opaque version for optimistic concurrency" in done.stdout


def test_grpcs_own_services_are_still_described(address: str) -> None:
    assert "rpc Check ( .grpc.health.v1.HealthCheckRequest )" in described(address, "grpc.health.v1.Health")
    assert "ServerReflectionInfo" in described(address, "grpc.reflection.v1alpha.ServerReflection")


def test_the_server_serves_the_set_in_gen() -> None:
    """The installed package's copy (`jobmesh.descriptors`) is gen/'s, source info included."""
    packaged = contract_pool().proto("jobmesh/v1/job.proto")
    assert packaged.source_code_info.location
    in_gen = {file.name: file for file in _read_set(DESCRIPTOR_SET).file}
    assert packaged == in_gen["jobmesh/v1/job.proto"]


def _read_set(path: Path) -> descriptor_pb2.FileDescriptorSet:
    return descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes())
