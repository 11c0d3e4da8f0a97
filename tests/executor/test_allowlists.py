"""What an executor will run, against real subprocesses and real local HTTP servers: programs off the command
allowlist and path tricks are refused before anything starts; `http` targets on loopback (by address, by a
name that resolves there, or through a redirect) are refused by default; allowed ones work."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jobmesh.core.error_types import ErrorType
from jobmesh.executor.handlers import HandlerRegistry
from jobmesh.executor.outcomes import Stop, TargetOutcome
from jobmesh.executor.policy import SAFE_PATH, ExecutionPolicy
from jobmesh.executor.runners import RunnerSettings, run_target
from jobmesh.v1 import job_pb2, run_pb2
from tests.executor.support import RecordingIO, command, dispatched

STDOUT = run_pb2.LOG_STREAM_STDOUT
SH = shutil.which("sh", path=SAFE_PATH) or "/bin/sh"


def run(target: job_pb2.Target, policy: ExecutionPolicy) -> tuple[TargetOutcome, RecordingIO]:
    async def scenario() -> tuple[TargetOutcome, RecordingIO]:
        io = RecordingIO()
        settings = RunnerSettings(HandlerRegistry(), cancel_grace=1.0, http_timeout=5.0, policy=policy)
        return await run_target(dispatched(target), io, Stop(), settings), io

    return asyncio.run(scenario())


def refused(outcome: TargetOutcome, rule: str) -> bool:
    return (
        outcome.state == run_pb2.RUN_STATE_FAILED
        and outcome.error_type == ErrorType.TARGET_NOT_ALLOWED
        and rule in outcome.error_message
    )


# Commands. -------------------------------------------------------------------------------------------------


def test_sh_c_id_is_refused_by_default_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    outcome, io = run(command("sh", "-c", f"id; touch {marker}"), ExecutionPolicy())
    assert refused(outcome, "allowed_commands")
    assert not marker.exists()
    assert not any("uid=" in text for text in io.texts(STDOUT))


def test_sh_c_id_runs_when_sh_is_listed() -> None:
    outcome, io = run(command("sh", "-c", "id"), ExecutionPolicy(allowed_commands=(SH,)))
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert io.texts(STDOUT)[0].startswith("uid=")


def test_a_listed_program_does_not_allow_another(tmp_path: Path) -> None:
    policy = ExecutionPolicy(allowed_commands=(str(shutil.which("true", path=SAFE_PATH)),))
    assert run(command("true"), policy)[0].state == run_pb2.RUN_STATE_SUCCEEDED
    assert refused(run(command("sh", "-c", "true"), policy)[0], "allowed_commands")


def test_dot_dot_out_of_an_allowed_folder_is_refused(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "hello").write_text("#!/bin/sh\necho hello\n")
    (tools / "hello").chmod(0o755)
    policy = ExecutionPolicy(allowed_commands=(f"{tools}/*",))
    assert run(command(f"{tools}/hello"), policy)[1].texts(STDOUT) == ["hello"]
    escape = "../" * len(tools.parts) + SH.lstrip("/")
    assert refused(run(command(f"{tools}/{escape}", "-c", "id"), policy)[0], "allowed_commands")
    assert refused(run(command(f"./{escape}", "-c", "id", cwd=str(tools)), policy)[0], "allowed_commands")


def test_a_job_that_points_path_at_its_own_folder_still_meets_the_allowlist(tmp_path: Path) -> None:
    """`sh` looked up on the job's PATH is whatever it finds there, and that is what must be allowed."""
    (tmp_path / "sh").symlink_to("/usr/bin/env")
    policy = ExecutionPolicy(allowed_commands=(SH,))
    outcome, _ = run(command("sh", "-c", "id", env={"PATH": str(tmp_path)}), policy)
    assert refused(outcome, "allowed_commands")


def test_a_star_stays_within_one_folder(tmp_path: Path) -> None:
    policy = ExecutionPolicy(allowed_commands=("/usr/*",))
    assert refused(run(command("sh", "-c", "id"), policy)[0], "allowed_commands")
    anywhere = ExecutionPolicy(allowed_commands=("/usr/**",))
    assert run(command(SH, "-c", "true"), anywhere)[0].state == run_pb2.RUN_STATE_SUCCEEDED


def test_the_dynamic_loader_cannot_be_steered_through_env() -> None:
    policy = ExecutionPolicy(allowed_commands=(SH,))
    outcome, _ = run(command("sh", "-c", "true", env={"LD_PRELOAD": "/tmp/evil.so"}), policy)
    assert refused(outcome, "LD_PRELOAD")


def test_a_pattern_that_is_not_absolute_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="absolute"):
        ExecutionPolicy(allowed_commands=("sh",))


# HTTP destinations. ----------------------------------------------------------------------------------------


@dataclass
class Site:
    port: int
    paths: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)

    def url(self, host: str = "127.0.0.1", path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"


def _serve(site: Site, location: str = "") -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.paths.append(self.path)
            site.hosts.append(self.headers.get("Host", ""))
            if location:
                self.send_response(302)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = b"internal only\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", site.port), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # shut down at once
    return server


@contextlib.contextmanager
def serving(location: str = "") -> Iterator[Site]:
    """A real HTTP server on loopback; with `location`, every answer is a redirect there."""
    site = Site(0)
    server = _serve(site, location)
    site.port = server.server_address[1]
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


def get(url: str) -> job_pb2.Target:
    return job_pb2.Target(http=job_pb2.Target.Http(method="GET", url=url))


@pytest.fixture
def internal() -> Iterator[Site]:
    with serving() as site:
        yield site


def test_ssrf_to_loopback_is_refused_by_default(internal: Site) -> None:
    outcome, io = run(get(internal.url()), ExecutionPolicy())
    assert refused(outcome, "127.0.0.1, a loopback address")
    assert "allowed_networks" in outcome.error_message
    assert internal.paths == []
    assert io.texts(STDOUT) == []


def test_a_name_that_resolves_to_loopback_is_refused(internal: Site) -> None:
    outcome, _ = run(get(internal.url("localhost")), ExecutionPolicy())
    assert refused(outcome, "loopback")
    assert internal.paths == []


@pytest.mark.parametrize(
    "url",
    [
        "http://[::ffff:127.0.0.1]:{port}/",  # IPv4 mapped into IPv6
        "http://169.254.169.254/latest/meta-data/",  # the cloud metadata service
        "http://10.1.2.3:{port}/",
        "http://0.0.0.0:{port}/",
        "http://224.0.0.1:{port}/",
        # Loopback spelled as the resolver also reads it: decimal, hexadecimal, octal, short, IPv6.
        "http://2130706433:{port}/",
        "http://0x7f000001:{port}/",
        "http://0177.0.0.1:{port}/",
        "http://127.1:{port}/",
        "http://[::1]:{port}/",
        "http://[0:0:0:0:0:ffff:7f00:1]:{port}/",
    ],
)
def test_non_public_addresses_are_refused_by_default(internal: Site, url: str) -> None:
    outcome, _ = run(get(url.format(port=internal.port)), ExecutionPolicy())
    assert refused(outcome, "allowed_networks")
    assert internal.paths == []


def test_a_redirect_to_loopback_is_not_followed(internal: Site) -> None:
    """The redirecting site is allowed (its own address listed); where it points is never fetched."""
    with serving(location=internal.url("localhost", "/admin")) as redirecting:
        policy = ExecutionPolicy(allowed_networks=("127.0.0.1/32",), allowed_ports=(redirecting.port,))
        outcome, io = run(get(redirecting.url()), policy)
    assert (outcome.state, outcome.error_type) == (run_pb2.RUN_STATE_FAILED, "HttpStatus")
    assert "302" in outcome.error_message
    assert redirecting.paths == ["/"]
    assert internal.paths == []
    assert "internal only" not in io.texts(STDOUT)


def test_an_allowed_destination_works(internal: Site) -> None:
    outcome, io = run(get(internal.url(path="/ok")), ExecutionPolicy(allowed_networks=("127.0.0.0/8",)))
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert io.texts(STDOUT) == ["internal only"]
    assert internal.paths == ["/ok"]


def test_the_call_connects_to_the_address_that_was_checked(
    internal: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name is resolved once, for the check: a name no resolver knows still reaches the checked address,
    so a second lookup (DNS rebinding) cannot move the call elsewhere."""
    real = socket.getaddrinfo
    lookups: list[str] = []

    def resolver(host: str, *args: object, **kwargs: object) -> object:
        with contextlib.suppress(ValueError):
            ipaddress.ip_address(host)  # a literal needs no lookup (socket.create_connection asks anyway)
            return real(host, *args, **kwargs)  # type: ignore[arg-type]
        lookups.append(host)
        if host == "rebind.invalid":
            return real("127.0.0.1", *args, **kwargs)  # type: ignore[arg-type]
        raise socket.gaierror(socket.EAI_NONAME, "unknown")

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    policy = ExecutionPolicy(allowed_networks=("127.0.0.0/8",))
    outcome, _ = run(get(internal.url("rebind.invalid", "/pinned")), policy)
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert lookups == ["rebind.invalid"]
    assert internal.hosts == [f"rebind.invalid:{internal.port}"]


@pytest.mark.parametrize(
    ("policy", "url", "rule"),
    [
        (
            ExecutionPolicy(allowed_networks=("any",), allowed_schemes=("https",)),
            "http://127.0.0.1:{port}/",
            "allowed_schemes",
        ),
        (
            ExecutionPolicy(allowed_networks=("any",), allowed_ports=(443,)),
            "http://127.0.0.1:{port}/",
            "allowed_ports",
        ),
        (
            ExecutionPolicy(allowed_networks=("any",), allowed_hosts=("*.example.com",)),
            "http://localhost:{port}/",
            "allowed_hosts",
        ),
    ],
)
def test_schemes_ports_and_hosts_are_checked(
    internal: Site, policy: ExecutionPolicy, url: str, rule: str
) -> None:
    outcome, _ = run(get(url.format(port=internal.port)), policy)
    assert refused(outcome, rule)
    assert internal.paths == []


def test_dev_allows_everything(internal: Site) -> None:
    policy = ExecutionPolicy.unrestricted()
    assert run(get(internal.url("localhost")), policy)[0].state == run_pb2.RUN_STATE_SUCCEEDED
    assert run(command("sh", "-c", "id"), policy)[0].state == run_pb2.RUN_STATE_SUCCEEDED
    assert "ANY command" in policy.describe()
    assert os.path.isabs(SH)


def test_a_listed_link_allows_the_program_it_links_to_found_elsewhere(tmp_path: Path) -> None:
    """`/bin/sh` listed, `sh` found on the PATH at another path of the same file: allowed; another file is
    not, even by a link of the job's own making."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "sh").symlink_to(SH)
    (tmp_path / "bin" / "true").symlink_to(shutil.which("true", path=SAFE_PATH) or "/bin/true")
    policy = ExecutionPolicy(allowed_commands=(str(tmp_path / "bin" / "sh"),))
    assert run(command("sh", "-c", "true"), policy)[0].state == run_pb2.RUN_STATE_SUCCEEDED
    assert refused(run(command("true"), policy)[0], "allowed_commands")
