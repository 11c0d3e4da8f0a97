"""The Envoy in front of the dashboard: every checked-in config passes `envoy --mode validate`, the copy that
`jobmesh dev` runs does too and serves exactly the app's build, the live streams have no timeouts, and a
gRPC-Web call through it reaches a gRPC server with its `authorization` header, over TLS to a server that
serves it when Envoy trusts the server's CA."""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from jobmesh.processes.dashboard import (
    ENVOY_CONFIG,
    WEB_BUILD,
    DashboardConfig,
    Envoy,
    envoy_config,
    served_files,
)
from jobmesh.transport.tls import ChannelTls
from jobmesh.v1 import job_pb2, search_service_pb2, search_service_pb2_grpc
from tests.acceptance.processes import BIN, REPO, free_port
from tests.support_certificates import CertificateAuthority

pytestmark = pytest.mark.processes

CONFIGS = sorted((REPO / "deploy" / "envoy").glob("*.yaml"))


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "envoy"), "--mode", "validate", "-c", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_there_is_a_checked_in_config() -> None:
    assert ENVOY_CONFIG in CONFIGS


@pytest.mark.parametrize("path", CONFIGS, ids=[path.name for path in CONFIGS])
def test_every_checked_in_config_validates(path: Path) -> None:
    done = validate(path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "OK" in done.stdout + done.stderr


def test_the_copy_jobmesh_dev_runs_validates_and_serves_exactly_the_build(tmp_path: Path) -> None:
    config = envoy_config(("127.0.0.1", 18080), ("127.0.0.1", 15051))
    path = tmp_path / "envoy.json"
    path.write_text(json.dumps(config))
    done = validate(path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    built = {file for file in WEB_BUILD.rglob("*") if file.is_file()}
    assert set(served_files(config)) == built  # a file the build adds would not be served: fix the config


def _routes() -> list[dict[str, Any]]:
    config = yaml.safe_load(ENVOY_CONFIG.read_text())
    manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    routes: list[dict[str, Any]] = manager["route_config"]["virtual_hosts"][0]["routes"]
    return [manager, *routes]


def test_live_streams_have_no_timeouts_and_the_filters_are_in_order() -> None:
    manager, *routes = _routes()
    assert manager["stream_idle_timeout"] == "0s"
    assert [f["name"] for f in manager["http_filters"]] == [
        "envoy.filters.http.grpc_web",
        "envoy.filters.http.cors",
        "envoy.filters.http.router",
    ]
    streams = [r for r in routes if "safe_regex" in r["match"]]
    assert len(streams) == 1
    assert "WatchRuns|TailRunLogs" in streams[0]["match"]["safe_regex"]["regex"]
    assert (streams[0]["route"]["timeout"], streams[0]["route"]["idle_timeout"]) == ("0s", "0s")


class Recording(search_service_pb2_grpc.SearchServiceServicer):
    """A SearchService that answers and remembers what each call's metadata said."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []

    def _note(self, context: grpc.ServicerContext) -> None:
        self.metadata.append({str(key): str(value) for key, value in context.invocation_metadata()})

    def ListJobs(
        self, request: search_service_pb2.ListJobsRequest, context: grpc.ServicerContext
    ) -> search_service_pb2.ListJobsResponse:
        self._note(context)
        return search_service_pb2.ListJobsResponse(jobs=[job_pb2.Job(name="jobs/seen")])

    def WatchRuns(
        self, request: search_service_pb2.WatchRunsRequest, context: grpc.ServicerContext
    ) -> Iterator[search_service_pb2.WatchRunsResponse]:
        self._note(context)
        yield search_service_pb2.WatchRunsResponse()
        yield search_service_pb2.WatchRunsResponse()


@pytest.fixture
def envoy_in_front() -> Iterator[tuple[str, Recording]]:
    recording = Recording()  # type: ignore[abstract]  # the other methods are never called
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    search_service_pb2_grpc.add_SearchServiceServicer_to_server(recording, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    config = DashboardConfig(dashboard_listen=f"127.0.0.1:{free_port()}")
    envoy = Envoy(config, ("127.0.0.1", port))
    envoy.start()
    try:
        asyncio.run(envoy.ready())
        yield config.url, recording
    finally:
        envoy.stop()
        server.stop(None)


def grpc_web(url: str, method: str, message: bytes, headers: dict[str, str]) -> tuple[list[bytes], str]:
    """One gRPC-Web call (binary): the messages of the response and its trailer block."""
    body = b"\x00" + struct.pack(">I", len(message)) + message
    request = urllib.request.Request(
        f"{url}/jobmesh.v1.SearchService/{method}",
        data=body,
        headers={"content-type": "application/grpc-web+proto", "x-grpc-web": "1", **headers},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        data = response.read()
    messages, trailers = [], ""
    while data:
        flag, length = data[0], struct.unpack(">I", data[1:5])[0]
        frame, data = data[5 : 5 + length], data[5 + length :]
        if flag & 0x80:
            trailers = frame.decode()
        else:
            messages.append(frame)
    return messages, trailers


def test_a_grpc_web_call_reaches_the_server_with_its_authorization(
    envoy_in_front: tuple[str, Recording],
) -> None:
    url, recording = envoy_in_front
    request = search_service_pb2.ListJobsRequest(page_size=1).SerializeToString()
    messages, trailers = grpc_web(url, "ListJobs", request, {"authorization": "Bearer the-token"})
    assert "grpc-status:0" in trailers
    assert [search_service_pb2.ListJobsResponse.FromString(m).jobs[0].name for m in messages] == ["jobs/seen"]
    assert recording.metadata[-1]["authorization"] == "Bearer the-token"
    watch = search_service_pb2.WatchRunsRequest(parent="jobs/-").SerializeToString()
    messages, trailers = grpc_web(url, "WatchRuns", watch, {})
    assert len(messages) == 2  # a server stream, message by message
    assert "grpc-status:0" in trailers
    assert "authorization" not in recording.metadata[-1]


def test_the_executor_protocol_is_not_routed(envoy_in_front: tuple[str, Recording]) -> None:
    """Executors dial the server itself: the dashboard's Envoy serves the public API (`jobmesh.v1`) alone."""
    url, _ = envoy_in_front
    request = urllib.request.Request(
        f"{url}/jobmesh.control.v1.ExecutorControl/Connect",
        data=b"\x00\x00\x00\x00\x00",
        headers={"content-type": "application/grpc-web+proto", "x-grpc-web": "1"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    caught.value.close()
    assert caught.value.code == 404


def test_the_copy_for_a_tls_server_validates(tmp_path: Path) -> None:
    ca = CertificateAuthority()
    trust = ca.write(tmp_path / "ca.pem")
    client = ca.issue_client(tmp_path / "envoy", "envoy")
    tls = ChannelTls(
        ca_bundle=trust, client_certificate=client.chain, client_key=client.key, server_name="localhost"
    )
    config = envoy_config(("127.0.0.1", 18080), ("127.0.0.1", 15051), upstream_tls=tls)
    path = tmp_path / "envoy.json"
    path.write_text(json.dumps(config))
    done = validate(path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.parametrize("trusted", [True, False])
def test_a_grpc_web_call_reaches_a_tls_server_only_when_envoy_trusts_it(
    tmp_path: Path, trusted: bool
) -> None:
    ca = CertificateAuthority()
    leaf = ca.issue_server(tmp_path / "server")
    trust = (ca if trusted else CertificateAuthority("another CA")).write(tmp_path / "ca.pem")
    recording = Recording()  # type: ignore[abstract]  # the other methods are never called
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    search_service_pb2_grpc.add_SearchServiceServicer_to_server(recording, server)
    credentials = grpc.ssl_server_credentials([(leaf.key.read_bytes(), leaf.chain.read_bytes())])
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    config = DashboardConfig(dashboard_listen=f"127.0.0.1:{free_port()}")
    envoy = Envoy(config, ("127.0.0.1", port), ChannelTls(ca_bundle=trust, server_name="localhost"))
    envoy.start()
    try:
        asyncio.run(envoy.ready())
        request = search_service_pb2.ListJobsRequest(page_size=1).SerializeToString()
        if not trusted:
            with pytest.raises(urllib.error.HTTPError) as refused:
                grpc_web(config.url, "ListJobs", request, {})
            refused.value.close()
            assert refused.value.code == 503  # Envoy refused the server's certificate: no upstream
            assert recording.metadata == []
            return
        messages, trailers = grpc_web(config.url, "ListJobs", request, {})
    finally:
        envoy.stop()
        server.stop(None)
    assert "grpc-status:0" in trailers
    assert [search_service_pb2.ListJobsResponse.FromString(m).jobs[0].name for m in messages] == ["jobs/seen"]


def _port_of(url: str) -> int:
    return int(url.rpartition(":")[2])


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:{port}", "127.0.0.2:{port}"])
def test_a_grpc_web_call_with_a_foreign_host_is_refused(
    envoy_in_front: tuple[str, Recording], host: str
) -> None:
    """DNS rebinding: a page of another site, its name pointed at 127.0.0.1, sends its own Host and Origin."""
    url, recording = envoy_in_front
    request = search_service_pb2.ListJobsRequest(page_size=1).SerializeToString()
    foreign = {"host": host.format(port=_port_of(url)), "origin": "http://attacker.example"}
    with pytest.raises(urllib.error.HTTPError) as refused:
        grpc_web(url, "ListJobs", request, foreign)
    refused.value.close()
    assert refused.value.code == 403
    assert recording.metadata == []  # the server never saw it


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LOCALHOST:{port}"])
def test_the_loopback_names_are_answered(envoy_in_front: tuple[str, Recording], host: str) -> None:
    url, recording = envoy_in_front
    request = search_service_pb2.ListJobsRequest(page_size=1).SerializeToString()
    _, trailers = grpc_web(url, "ListJobs", request, {"host": host.format(port=_port_of(url))})
    assert "grpc-status:0" in trailers
    assert len(recording.metadata) == 1


def test_the_app_may_not_be_framed_and_loads_only_its_own_files(
    envoy_in_front: tuple[str, Recording],
) -> None:
    url, _ = envoy_in_front
    for path in ("/", "/assets/app.js"):
        with urllib.request.urlopen(f"{url}{path}", timeout=10) as response:
            headers = response.headers
        assert headers["x-frame-options"] == "DENY"
        policy = [part.strip() for part in headers["content-security-policy"].split(";")]
        assert "frame-ancestors 'none'" in policy
        assert "default-src 'self'" in policy
        assert headers["x-content-type-options"] == "nosniff"


def test_the_dashboard_answers_the_configured_names_and_its_listen_host() -> None:
    config = DashboardConfig(dashboard_listen="10.1.2.3:8443", dashboard_hosts=("jobs.example.com", "::1"))
    assert config.domains == [
        "jobs.example.com:8443",
        "[::1]:8443",
        "10.1.2.3:8443",
        "jobs.example.com",
        "[::1]",
        "10.1.2.3",
    ]
    assert DashboardConfig(dashboard_listen="0.0.0.0:8080").domains == [
        "127.0.0.1:8080",
        "localhost:8080",
        "[::1]:8080",
        "127.0.0.1",
        "localhost",
        "[::1]",
    ]


def test_the_shipped_config_answers_the_loopback_names_only() -> None:
    config = yaml.safe_load(ENVOY_CONFIG.read_text())
    manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    dashboard, refused = manager["route_config"]["virtual_hosts"]
    assert dashboard["domains"] == DashboardConfig().domains
    assert refused["domains"] == ["*"]
    assert refused["routes"][0]["direct_response"]["status"] == 403


def _preflight(url: str, origin: str) -> tuple[int, Any]:
    """A browser's CORS preflight for a gRPC-Web call from a page of `origin`: its status and headers."""
    request = urllib.request.Request(
        f"{url}/jobmesh.v1.SearchService/ListJobs",
        method="OPTIONS",
        headers={
            "origin": origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type,x-grpc-web,authorization",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as error:
        error.close()
        return error.code, error.headers


def test_another_origin_is_not_allowed_to_call_the_api(envoy_in_front: tuple[str, Recording]) -> None:
    """CORS: a page of another site, at a loopback name, asks whether it may call the API: no answer allows it
    (the browser then never sends the call), while the Vite dev server's origin is allowed."""
    url, recording = envoy_in_front
    _, foreign = _preflight(url, "http://attacker.example")
    assert "access-control-allow-origin" not in foreign
    assert "access-control-allow-credentials" not in foreign
    status, dev = _preflight(url, "http://localhost:5173")
    assert status == 200
    assert dev["access-control-allow-origin"] == "http://localhost:5173"
    assert recording.metadata == []  # the server ran no handler for either
