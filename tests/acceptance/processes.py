"""Spawning jobmesh processes for acceptance tests: real subprocesses, stopped and reaped afterwards."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from jobmesh.transport.tls import ChannelTls
from jobmesh.transport.tls import channel as channel_to
from tests.support import environment_without_services

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_serving(address: str, timeout: float = 30.0, tls: ChannelTls | None = None) -> None:
    deadline = time.monotonic() + timeout
    with channel_to(address, tls) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                response = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if response.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)


@contextlib.contextmanager
def jobmesh_process(
    args: Sequence[str],
    address: str,
    log: Path,
    env: dict[str, str] | None = None,
    tls: ChannelTls | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Runs `jobmesh ARGS`, waits until it serves on `address` (over `tls` when given), and stops it with
    SIGINT afterwards. It sees none of the suite's `JOBMESH_*` variables (the services `make test` started):
    `jobmesh dev` runs on its embedded default, as `make run` starts it; `env` adds what a test means."""
    inherited = environment_without_services()
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(BIN / "jobmesh"), *args],
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**inherited, **(env or {})},
            cwd=REPO,
            start_new_session=True,
        )
        try:
            try:
                wait_serving(address, tls=tls)
            except grpc.RpcError:
                raise AssertionError(f"jobmesh did not start:\n{log.read_text()}") from None
            yield process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
