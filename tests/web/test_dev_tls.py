"""`jobmesh dev` serving TLS: its own executor and demo client dial it with the client settings, and its
Envoy reaches it over TLS, verified by the same CA."""

from __future__ import annotations

import urllib.error
from pathlib import Path

import pytest

from jobmesh.transport.tls import ChannelTls, channel
from jobmesh.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc, run_pb2, search_service_pb2
from jobmesh.v1 import search_service_pb2_grpc as search_grpc
from tests.acceptance.processes import free_port, jobmesh_process
from tests.support import eventually
from tests.support_certificates import CertificateAuthority
from tests.web.test_envoy import grpc_web

pytestmark = pytest.mark.processes


def test_dev_over_tls_runs_a_job_and_serves_the_dashboard(tmp_path: Path) -> None:
    ca = CertificateAuthority()
    trust = ca.write(tmp_path / "ca.pem")
    leaf = ca.issue_server(tmp_path / "server")
    address, dashboard = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    args = [
        "dev", "--listen", address, "--database-url", f"sqlite:///{tmp_path / 'dev.db'}",
        "--dashboard-listen", dashboard, "--demo", "on",
        "--tls-cert", str(leaf.chain), "--tls-key", str(leaf.key), "--tls-ca", str(trust),
    ]  # fmt: skip
    tls = ChannelTls(ca_bundle=trust)
    with jobmesh_process(args, address, tmp_path / "dev.log", tls=tls), channel(address, tls) as open_channel:
        jobs = job_service_pb2_grpc.JobServiceStub(open_channel)
        search = search_grpc.SearchServiceStub(open_channel)

        def listed_through_envoy() -> list[str]:
            listing = search_service_pb2.ListJobsRequest(page_size=10, order_by="name").SerializeToString()
            try:
                messages, trailers = grpc_web(f"http://{dashboard}", "ListJobs", listing, {})
            except urllib.error.URLError as error:
                if isinstance(error.reason, ConnectionRefusedError):
                    return []  # dev serves gRPC before its Envoy listens: not yet
                raise
            assert "grpc-status:0" in trailers
            return [job.name for job in search_service_pb2.ListJobsResponse.FromString(messages[0]).jobs]

        # dev makes the demo job (through TLS too) only on an empty store, after it serves: it is waited for
        # before this test's own job, which would otherwise leave the store not empty.
        assert eventually(listed_through_envoy, 60, "the demo job") == ["jobs/demo"]
        job = job_pb2.Job(target=job_pb2.Target(command=job_pb2.Target.Command(argv=["echo", "over TLS"])))
        job.schedule.immediate.SetInParent()
        run = jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id="tls")).run

        def succeeded() -> bool:
            found = search.GetRun(search_service_pb2.GetRunRequest(name=run.name)).run
            return bool(found.state == run_pb2.RUN_STATE_SUCCEEDED)

        eventually(succeeded, 60, "the job to run on dev's executor over TLS")
        assert listed_through_envoy() == ["jobs/demo", "jobs/tls"]
