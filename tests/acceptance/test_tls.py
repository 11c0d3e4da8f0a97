"""`jobmesh server` and `jobmesh executor` as real processes over TLS: the API on the server's address, the
executor on the executor address with its client certificate (mutual TLS), one command job run to SUCCEEDED;
an executor without a certificate, or on the API's address, is never connected; and server workers sharing
both addresses each serve TLS."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from jobmesh.transport.tls import ChannelTls, channel
from jobmesh.v1 import job_service_pb2, run_pb2, search_service_pb2, search_service_pb2_grpc
from tests.acceptance.mesh import TERMINAL, Mesh, Process, command_job, create, wait_for_run
from tests.acceptance.processes import REPO, free_port
from tests.acceptance.test_banner import TRY
from tests.acceptance.test_dev_authenticated import new_token
from tests.support import eventually
from tests.support_certificates import CertificateAuthority, Leaf

pytestmark = [pytest.mark.postgres, pytest.mark.kafka, pytest.mark.redis, pytest.mark.processes]


def tls_server(
    mesh: Mesh, tmp_path: Path, *extra: str
) -> tuple[Process, str, Path, Leaf, CertificateAuthority]:
    """A server with TLS on its address and mutual TLS on an executor address (and EXTRA flags); that
    address, the CA bundle, a client certificate of the CA (common name `executor-tls`) and the CA."""
    ca = CertificateAuthority()
    trust = ca.write(tmp_path / "ca.pem")
    server_leaf = ca.issue_server(tmp_path / "server")
    executor_address = f"127.0.0.1:{free_port()}"
    server = mesh.server(
        args=[
            "--tls-cert", str(server_leaf.chain), "--tls-key", str(server_leaf.key),
            "--tls-client-ca", str(trust), "--executor-listen", executor_address, *extra,
        ],
        tls=ChannelTls(ca_bundle=trust),
    )  # fmt: skip
    return server, executor_address, trust, ca.issue_client(tmp_path / "executor", "executor-tls"), ca


def certified_args(trust: Path, leaf: Leaf) -> list[str]:
    return ["--tls-ca", str(trust), "--tls-client-cert", str(leaf.chain), "--tls-client-key", str(leaf.key)]


def health(address: str, tls: ChannelTls | None) -> int:
    with channel(address, tls) as open_channel:
        answer = health_pb2_grpc.HealthStub(open_channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        return int(answer.status)


def test_an_executor_over_mutual_tls_runs_a_command_job(mesh: Mesh, tmp_path: Path) -> None:
    server, executor_address, trust, executor_leaf, _ = tls_server(mesh, tmp_path)
    tls = ChannelTls(ca_bundle=trust)
    banner = server.log.read_text()
    assert f"executors: {executor_address} (mutual TLS" in banner
    # The server knows no CA of its callers: its command verifies it by the machine's trust store (a
    # machine whose store holds the CA, as SSL_CERT_FILE makes it here, runs it as printed).
    [command] = set(TRY.findall(banner))  # each worker prints the same
    offered = subprocess.run(
        command,
        shell=True,
        cwd=REPO,
        env={**os.environ, "SSL_CERT_FILE": str(trust)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert offered.returncode == 0, offered.stdout + offered.stderr
    assert "jobmesh.v1.JobService" in offered.stdout
    uncertified = mesh.executor(
        server, "uncertified", address=executor_address, args=["--tls-ca", str(trust)]
    )
    on_the_api = mesh.executor(server, "on-the-api", args=certified_args(trust, executor_leaf))
    jobs, search = mesh.stubs(server, tls)
    eventually(
        lambda: "refused an executor" in server.log.read_text(), 60, "the API address refusing an executor"
    )
    eventually(
        lambda: "cannot connect" in uncertified.log.read_text(), 60, "the handshake refusing an executor"
    )
    # Refused, they stay up and never join the queue's consumer group: the run goes to the certified one.
    for refused in (uncertified, on_the_api):
        assert "connected to" not in refused.log.read_text()
        assert "taking runs from" not in refused.log.read_text()
    # gRPC Python can report a stream the server ended while the hello was being written as INTERNAL
    # ("Internal error from Core"), now and then; the executor's next try tells why.
    eventually(
        lambda: "a valid credential is required" in on_the_api.log.read_text(), 60, "the refusal's reason"
    )

    certified = mesh.executor(
        server, "certified", address=executor_address, args=certified_args(trust, executor_leaf)
    )
    run = create(jobs, command_job(mesh.queue, "echo over mutual TLS")).run
    done = wait_for_run(search, run.name, lambda r: r.state in TERMINAL, 90, "the run")
    assert done.state == run_pb2.RUN_STATE_SUCCEEDED
    assert "connected to" in certified.log.read_text()


def test_server_workers_each_serve_tls_on_both_addresses(mesh: Mesh, tmp_path: Path) -> None:
    mesh.env["JOBMESH_SERVER_WORKERS"] = "2"
    server, executor_address, trust, leaf, _ = tls_server(mesh, tmp_path)
    # The supervisor says so once every worker serves; the first may answer before the second is up.
    eventually(lambda: "workers serving gRPC (TLS)" in server.log.read_text(), 60, "both workers to serve")
    mesh.executor(server, "certified", address=executor_address, args=certified_args(trust, leaf))
    jobs, search = mesh.stubs(server, ChannelTls(ca_bundle=trust))
    run = create(jobs, command_job(mesh.queue, "true")).run
    assert wait_for_run(search, run.name, lambda r: r.state in TERMINAL, 90, "the run").state == (
        run_pb2.RUN_STATE_SUCCEEDED
    )
    # Each new channel is a new connection, which the kernel hands to either worker.
    certified = ChannelTls(trust, leaf.chain, leaf.key)
    for _ in range(8):
        assert health(server.address, ChannelTls(ca_bundle=trust)) == health_pb2.HealthCheckResponse.SERVING
        assert health(executor_address, certified) == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as plaintext:
            health(server.address, None)
        assert plaintext.value.code() == grpc.StatusCode.UNAVAILABLE


def test_with_authentication_on_an_executor_is_known_by_its_certificate_alone(
    mesh: Mesh, tmp_path: Path
) -> None:
    hashes = tmp_path / "tokens.yaml"
    token = new_token(hashes, "--subject", "operations", "--role", "*=admin")
    grants = f"executor-tls={mesh.queue}"
    flags = ["--authentication", "on", "--token-hashes", str(hashes), "--executor-certificates", grants]
    server, executor_address, trust, leaf, ca = tls_server(mesh, tmp_path, *flags)
    stranger = ca.issue_client(tmp_path / "stranger", "stranger")  # the CA's, but granted nothing
    refused = mesh.executor(
        server, "stranger", address=executor_address, args=certified_args(trust, stranger)
    )
    eventually(
        lambda: "a valid credential is required" in refused.log.read_text(), 60, "the stranger refused"
    )
    assert "connected to" not in refused.log.read_text()
    assert "taking runs from" not in refused.log.read_text()  # and it holds no partition meanwhile

    # named as its certificate is: the name is bound to it
    certified = mesh.executor(
        server, "executor-tls", address=executor_address, args=certified_args(trust, leaf)
    )
    jobs, search = mesh.stubs(server, ChannelTls(ca_bundle=trust))
    with pytest.raises(grpc.RpcError) as anonymous:
        create(jobs, command_job(mesh.queue, "true"))
    assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
    metadata = (("authorization", f"Bearer {token}"),)
    request = job_service_pb2.CreateJobRequest(job=command_job(mesh.queue, "echo known by its certificate"))
    run = jobs.CreateJob(request, metadata=metadata, timeout=30).run
    done = eventually(lambda: _finished(search, run.name, metadata), 90, "the run on the certified executor")
    assert done.state == run_pb2.RUN_STATE_SUCCEEDED
    assert done.executor == "executor-tls"
    assert "connected to" in certified.log.read_text()


def _finished(
    search: search_service_pb2_grpc.SearchServiceStub, name: str, metadata: tuple[tuple[str, str], ...]
) -> run_pb2.Run | None:
    run = search.GetRun(search_service_pb2.GetRunRequest(name=name), metadata=metadata, timeout=10).run
    return run if run.state in TERMINAL else None
