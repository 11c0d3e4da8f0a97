"""`jobmesh server` and `jobmesh executor` as real processes over TLS: the API on the server's address, the
executor on the executor address with its client certificate (mutual TLS), one command job run to SUCCEEDED;
an executor without a certificate, or on the API's address, is never connected."""

from __future__ import annotations

from pathlib import Path

from jobmesh.transport.tls import ChannelTls
from jobmesh.v1 import run_pb2
from tests.acceptance.mesh import TERMINAL, Mesh, command_job, create, wait_for_run
from tests.acceptance.processes import free_port
from tests.support import eventually
from tests.support_certificates import CertificateAuthority


def test_an_executor_over_mutual_tls_runs_a_command_job(mesh: Mesh, tmp_path: Path) -> None:
    ca = CertificateAuthority()
    trust = ca.write(tmp_path / "ca.pem")
    server_leaf = ca.issue_server(tmp_path / "server")
    executor_leaf = ca.issue_client(tmp_path / "executor", "executor-tls")
    executor_address = f"127.0.0.1:{free_port()}"
    tls = ChannelTls(ca_bundle=trust)
    server = mesh.server(
        args=[
            "--tls-cert", str(server_leaf.chain), "--tls-key", str(server_leaf.key),
            "--tls-client-ca", str(trust), "--executor-listen", executor_address,
        ],
        tls=tls,
    )  # fmt: skip
    client_tls = ["--tls-ca", str(trust)]
    uncertified = mesh.executor(server, "uncertified", address=executor_address, args=client_tls)
    on_the_api = mesh.executor(
        server,
        "on-the-api",
        args=[
            *client_tls,
            "--tls-client-cert",
            str(executor_leaf.chain),
            "--tls-client-key",
            str(executor_leaf.key),
        ],
    )
    jobs, search = mesh.stubs(server, tls)
    eventually(
        lambda: "refused an executor" in server.log.read_text(), 60, "the API address refusing an executor"
    )
    eventually(
        lambda: "cannot connect" in uncertified.log.read_text(), 60, "the handshake refusing an executor"
    )
    for refused in (uncertified, on_the_api):
        refused.stop()  # they joined the queue's consumer group: their partitions go to the certified one
        assert "connected to" not in refused.log.read_text()
    assert "a valid credential is required" in on_the_api.log.read_text()

    certified = mesh.executor(
        server,
        "certified",
        address=executor_address,
        args=[
            *client_tls,
            "--tls-client-cert",
            str(executor_leaf.chain),
            "--tls-client-key",
            str(executor_leaf.key),
        ],
    )
    run = create(jobs, command_job(mesh.queue, "echo over mutual TLS")).run
    done = wait_for_run(search, run.name, lambda r: r.state in TERMINAL, 90, "the run")
    assert done.state == run_pb2.RUN_STATE_SUCCEEDED
    assert "connected to" in certified.log.read_text()
