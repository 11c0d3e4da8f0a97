"""HTTP `/livez` and `/readyz` (processes/health_endpoint.py): 200 or 503 with a JSON body that names each
dependency and why it is down; 404 for any other path; a shared port for the workers of one server."""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from jobmesh.core.readiness import LIVE_WITHIN, NOT_CHECKED, Readiness
from jobmesh.processes.health_endpoint import HealthEndpoint, health_served


def get(port: int, path: str) -> tuple[int, Any]:
    """The status and the body (JSON when it says so) of a GET of `path`."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        if response.getheader("Content-Type") == "application/json":
            return response.status, json.loads(body)
        return response.status, body.decode()
    finally:
        connection.close()


@pytest.fixture
def readiness() -> Readiness:
    return Readiness("server", expected=("store", "queue"))


@pytest.fixture
def endpoint(readiness: Readiness) -> Iterator[HealthEndpoint]:
    served = HealthEndpoint(readiness, "127.0.0.1:0")
    yield served
    served.close()


def _dependencies(body: dict[str, Any]) -> list[tuple[str, bool, str]]:
    return [(item["name"], item["up"], item["detail"]) for item in body["dependencies"]]


def test_port_0_picks_a_port(endpoint: HealthEndpoint) -> None:
    assert endpoint.port > 0
    status, _ = get(endpoint.port, "/livez")
    assert status == 200


def test_readyz_answers_200_naming_each_dependency_when_ready(
    readiness: Readiness, endpoint: HealthEndpoint
) -> None:
    readiness.report("store", True)
    readiness.report("queue", True, "kafka")
    status, body = get(endpoint.port, "/readyz")
    assert status == 200
    assert (body["process"], body["ready"]) == ("server", True)
    assert _dependencies(body) == [("queue", True, "kafka"), ("store", True, "")]
    assert all(isinstance(item["since"], float) for item in body["dependencies"])


def test_readyz_answers_503_with_the_failing_dependencys_detail(
    readiness: Readiness, endpoint: HealthEndpoint
) -> None:
    readiness.report("queue", True)
    readiness.report("store", False, "StoreUnavailable: connection refused")
    status, body = get(endpoint.port, "/readyz")
    assert status == 503
    assert body["ready"] is False
    assert _dependencies(body) == [
        ("queue", True, ""),
        ("store", False, "StoreUnavailable: connection refused"),
    ]

    readiness.report("store", True)  # it came back: so does the answer
    assert get(endpoint.port, "/readyz")[0] == 200


def test_readyz_answers_503_before_a_dependency_is_first_checked(endpoint: HealthEndpoint) -> None:
    status, body = get(endpoint.port, "/readyz")
    assert status == 503
    assert _dependencies(body) == [("queue", False, NOT_CHECKED), ("store", False, NOT_CHECKED)]


def test_livez_answers_200_while_the_loop_beats_then_503(
    readiness: Readiness, endpoint: HealthEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    readiness.report("store", False, "down")  # liveness is not readiness: a process without its store lives
    readiness.beat()
    assert get(endpoint.port, "/livez") == (200, {"process": "server", "live": True})

    monkeypatch.setattr(readiness, "_beat", time.monotonic() - LIVE_WITHIN.total_seconds() - 1)
    assert get(endpoint.port, "/livez") == (503, {"process": "server", "live": False})

    readiness.beat()
    assert get(endpoint.port, "/livez")[0] == 200


@pytest.mark.parametrize("path", ["/", "/healthz", "/readyz/", "/livez/x", "/READYZ"])
def test_any_other_path_is_not_found(endpoint: HealthEndpoint, path: str) -> None:
    status, body = get(endpoint.port, path)
    assert status == 404
    assert "/livez" in body
    assert "/readyz" in body


def test_a_query_string_is_ignored(readiness: Readiness, endpoint: HealthEndpoint) -> None:
    readiness.report("queue", True)
    readiness.report("store", False, "StoreUnavailable: refused")
    assert get(endpoint.port, "/readyz?verbose=1") == get(endpoint.port, "/readyz")
    assert get(endpoint.port, "/livez?probe=k8s")[0] == 200


def test_share_port_lets_two_endpoints_bind_one_port(readiness: Readiness) -> None:
    first = HealthEndpoint(readiness, "127.0.0.1:0", share_port=True)
    try:
        second = HealthEndpoint(readiness, f"127.0.0.1:{first.port}", share_port=True)
        try:
            assert second.port == first.port
            assert get(first.port, "/livez")[0] == 200
        finally:
            second.close()
    finally:
        first.close()


def test_without_share_port_a_taken_port_is_refused(readiness: Readiness) -> None:
    first = HealthEndpoint(readiness, "127.0.0.1:0", share_port=True)
    try:
        with pytest.raises(OSError, match="in use"):
            HealthEndpoint(readiness, f"127.0.0.1:{first.port}")
    finally:
        first.close()


def test_a_closed_endpoint_no_longer_answers(readiness: Readiness) -> None:
    endpoint = HealthEndpoint(readiness, "127.0.0.1:0")
    endpoint.close()
    with pytest.raises(ConnectionRefusedError):
        get(endpoint.port, "/livez")


def test_health_served_answers_with_its_first_probes_and_stops_serving_after(
    capsys: pytest.CaptureFixture[str],
) -> None:
    readiness = Readiness("watcher")

    def store_down() -> None:
        raise ConnectionRefusedError("connection refused")

    async def scenario() -> int:
        async with health_served(readiness, {"store": store_down, "queue": lambda: None}, "127.0.0.1:0"):
            printed = capsys.readouterr().out
            found = re.search(r"health: http://127\.0\.0\.1:(\d+)/readyz and /livez", printed)
            assert found, printed
            port = int(found[1])
            # Every probe has answered once before the block starts: no "not checked yet".
            status, body = await asyncio.to_thread(get, port, "/readyz")
            assert status == 503
            assert _dependencies(body) == [
                ("queue", True, ""),
                ("store", False, "ConnectionRefusedError: connection refused"),
            ]
            assert (await asyncio.to_thread(get, port, "/livez"))[0] == 200
        return port

    port = asyncio.run(asyncio.wait_for(scenario(), 30))
    with pytest.raises(ConnectionRefusedError):
        get(port, "/readyz")


def test_health_served_without_an_address_probes_only() -> None:
    readiness = Readiness("executor")

    async def scenario() -> None:
        async with health_served(readiness, {"server": lambda: None}, None):
            assert readiness.ready()
            assert readiness.live(timedelta(seconds=1))

    asyncio.run(asyncio.wait_for(scenario(), 30))
